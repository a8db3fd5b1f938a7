"""Any agent with CybORG's agent interface as an acting function, so evaluate, replay and compare can play it.

``evaluate``, ``replay`` and ``compare`` then put another CAGE2 agent beside ours, on the same episodes, on either
engine.

Every CAGE2 submission is a class with ``get_action(observation, action_space)`` (the 52-bit ChallengeWrapper
observation in, an action 0..144 out) and ``end_episode()``; CAGE2's evaluation loop builds one object, calls
``get_action`` every step and ``end_episode`` after every episode. :func:`interface_act` does the same for each env
of a batch: one object per env (built with the given keyword arguments), ``get_action`` on that env's observation
with the action space CybORG's wrapper reports (the number 145), ``end_episode`` before each new episode.

An agent is named ``module:Class`` (importable, e.g. installed) or ``path/to/file.py:Class``; a file's folder is put
first on ``sys.path`` while it loads, so a submission's own imports of its sibling files resolve.
"""
from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from workflow_rl.checks import read_json
from workflow_rl.sim import tables

ACTION_SPACE = tables.N_ACTIONS
"""What CybORG's ChallengeWrapper gives an agent as its action space (``get_action_space``): the number of actions."""


def is_interface_agent(spec: str) -> bool:
    """Whether ``spec`` names an agent class (``module:Class`` or ``file.py:Class``) rather than a checkpoint,
    ``pretrained:NAME`` or a baseline."""
    if not isinstance(spec, str) or spec.startswith("pretrained:") or ":" not in spec:
        return False
    where, _, name = spec.rpartition(":")
    return bool(where) and name.isidentifier()


def parse_kwargs(text: str | None) -> dict:
    """``--agent-kwargs``: a JSON object of the class's constructor arguments (None: none)."""
    if text is None:
        return {}
    try:
        value = read_json(text)
    except ValueError as e:   # not JSON, or nested too deep (checks.read_json)
        raise ValueError(f"--agent-kwargs is not JSON ({e.__class__.__name__}): write an object such as "
                         "'{\"seed\": 1}'") from None
    if not isinstance(value, dict):
        raise ValueError(f"--agent-kwargs must be a JSON object of constructor arguments, got "
                         f"{type(value).__name__}: write e.g. '{{\"seed\": 1}}'")
    return value


def load_agent_class(spec: str) -> type:
    """The class ``spec`` names; one ValueError naming the fix if it cannot be loaded or lacks ``get_action``."""
    where, _, name = spec.rpartition(":")
    if where.endswith(".py"):
        path = Path(where)
        if not path.is_file():
            raise ValueError(f"agent {spec}: no file {path}: give path/to/file.py:Class of an existing file")
        module = _load_file(path, spec)
    else:
        try:
            module = importlib.import_module(where)
        except Exception as e:  # noqa: BLE001 - any failure of the user's import is one line
            raise ValueError(f"agent {spec}: cannot import module {where} ({e.__class__.__name__}: {e}): install "
                             "it, or give path/to/file.py:Class") from None
    cls = getattr(module, name, None)
    if not isinstance(cls, type):
        raise ValueError(f"agent {spec}: {where} has no class {name}")
    if not callable(getattr(cls, "get_action", None)):
        raise ValueError(f"agent {spec}: {name} has no get_action(observation, action_space): CybORG's agent "
                         "interface needs one")
    return cls


def _load_file(path: Path, spec: str):
    folder = str(path.resolve().parent)
    sys.path.insert(0, folder)
    try:
        module_spec = importlib.util.spec_from_file_location(f"_workflow_rl_agent_{path.stem}", path)
        module = importlib.util.module_from_spec(module_spec)
        module_spec.loader.exec_module(module)
    except Exception as e:  # noqa: BLE001 - any failure of the user's file is one line
        raise ValueError(f"agent {spec}: loading {path} failed ({e.__class__.__name__}: {e})") from None
    finally:
        if sys.path and sys.path[0] == folder:
            sys.path.pop(0)
    return module


def make_agents(spec: str, kwargs: dict) -> Callable[[], object]:
    """A factory of fresh agent objects (checked once here: a constructor that fails is one line)."""
    cls = load_agent_class(spec)

    def build():
        try:
            return cls(**kwargs)
        except Exception as e:  # noqa: BLE001 - the user's constructor
            raise ValueError(f"agent {spec}: {cls.__name__}(**{kwargs!r}) failed ({e.__class__.__name__}: {e}): "
                             "fix --agent-kwargs") from None

    build()
    return build


def interface_act(build: Callable[[], object]):
    """``act(obs, t)`` over a batch of envs, one agent object per env from ``build``: ``end_episode()`` on each
    before every episode after its first, ``get_action(obs_i, 145)`` every step. An action outside 0..144 is one
    ValueError naming the agent's class."""
    agents: list = []

    def act(obs: torch.Tensor, t: int) -> torch.Tensor:
        rows = obs.detach().cpu().numpy().astype(np.float32).reshape(len(obs), -1)
        if t == 0:
            for a in agents:
                if callable(getattr(a, "end_episode", None)):
                    a.end_episode()
            if len(agents) != len(rows):
                agents[:] = [build() for _ in range(len(rows))]
        out = np.empty(len(rows), np.int64)
        for i, (a, o) in enumerate(zip(agents, rows)):
            action = a.get_action(o, ACTION_SPACE)
            try:
                out[i] = int(action)
            except (TypeError, ValueError):
                out[i] = -1
            if not 0 <= out[i] < tables.N_ACTIONS or isinstance(action, (bool, float)):
                raise ValueError(f"{type(a).__name__}.get_action returned {action!r}: CAGE2's blue actions are "
                                 f"integers 0..{tables.N_ACTIONS - 1}")
        return torch.as_tensor(out, device=obs.device)

    return act


__all__ = ["ACTION_SPACE", "is_interface_agent", "parse_kwargs", "load_agent_class", "make_agents", "interface_act"]
