"""Pretrained blue agents shipped with the package, loadable by name.

``workflow_rl.rl.pretrained.load("universal")`` returns the agent (an :class:`~workflow_rl.rl.ppo.Agent`) and its
workflow (None: unconstrained, or an agent trained across workflows playing none); ``workflow-rl evaluate
pretrained:universal --workflow none`` evaluates it.
Each agent is two files in ``workflow_rl/pretrained/`` (package data, no code): ``NAME.pt``, a slim checkpoint
(weights, config and counters; no optimiser or engine state), and ``NAME.json``, its card: how it was trained (the
exact command), how long that took on which machine, and its evaluation tables, each number with its episodes and
95% interval.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import torch

from workflow_rl.rl.checkpoint import agent_from_checkpoint, atomic_save, load_checkpoint
from workflow_rl.rl.config import TrainConfig
from workflow_rl.rl.memory import Memory
from workflow_rl.rl.ppo import Agent, PPOConfig
from workflow_rl.files import file_version
from workflow_rl.workflow import Workflow

DIR = Path(__file__).resolve().parent.parent / "pretrained"
"""Where the shipped files live: the data package ``workflow_rl/pretrained``."""
PREFIX = "pretrained:"
"""How the command line names a shipped agent: ``pretrained:universal``."""


def names() -> list[str]:
    """The shipped agents (those with both a weights file and a card)."""
    return sorted(p.stem for p in DIR.glob("*.pt") if p.with_suffix(".json").is_file())


RETIRED = {"cage2": "none", "cage2-opening": "none", "cage2-compliant": "D,OS,E,OH,U"}
"""Names of agents replaced by ``pretrained:universal`` (their files: commit 7404f75fc5), each with the
``--workflow`` under which the one agent plays what it played; naming one is an error that says so."""


def _bare(name: str) -> str:
    return name[len(PREFIX):] if name.startswith(PREFIX) else name


def path(name: str) -> Path:
    """The weights file of a shipped agent; a ValueError listing the shipped ones otherwise (a retired name: which
    name and workflow play it now)."""
    name = _bare(name)
    if name in RETIRED:
        raise ValueError(f"{PREFIX}{name} was retired (its file: commit 7404f75fc5): use {PREFIX}universal "
                         f"--workflow {RETIRED[name]} (in Python: workflow={RETIRED[name]!r})")
    if name not in names():
        raise ValueError(f"no pretrained agent {name!r}: the shipped ones are {', '.join(names()) or 'none'} "
                         "(write pretrained:NAME)")
    return DIR / f"{name}.pt"


def card(name: str) -> dict:
    """The agent's card: reproduce command, training time and machine, evaluation tables."""
    return json.loads(path(name).with_suffix(".json").read_text())


def spec_file(spec: str | Path) -> Path:
    """The checkpoint file an agent argument names: a shipped agent's (``pretrained:NAME``) or the path itself (the
    one reading of ``evaluate AGENT``, ``replay AGENT``, ``--init-checkpoint`` and ``search``'s universal agent)."""
    spec = str(spec)
    return path(spec) if spec.startswith(PREFIX) else Path(spec)


_READ: dict = {}
"""The last checkpoint :func:`read_spec` read, by the file's identity and version (at most one entry)."""


def read_spec(spec: str | Path) -> dict:
    """The checkpoint ``spec`` names (a file or ``pretrained:NAME``), loaded on the CPU with every check of
    :func:`~workflow_rl.rl.checkpoint.load_checkpoint`, and read from disk once per version of the file: a command
    asks for its starting checkpoint several times (the settings it inherits, the weights' fit, whether it was
    trained across workflows, the screen's agent, each workflow's warm start), and each ask after the first is
    answered from memory. The key is the resolved path and the file's device, inode, size, modification and change
    times, taken before the read: a file replaced or rewritten mid-run is read again, never answered stale. One
    entry is kept (the last file read), so nothing grows in a long process. A file that fails to load is not kept:
    every ask raises its error again.

    The checkpoint is shared between callers: read it, never change it (the trainer copies weights into its own
    network; ``starting_weights`` and ``agent_from_checkpoint`` build new tensors where they change anything)."""
    file = spec_file(spec)
    key = file_version(file)   # None: missing or unreadable, and load_checkpoint says so
    if key is not None and key in _READ:
        return _READ[key]
    ck = load_checkpoint(file, "cpu")
    if key is not None:
        _READ.clear()
        _READ[key] = ck
    return ck


def load_agent(spec: str | Path, device: str | torch.device) -> tuple[Agent, dict]:
    """The agent of ``spec`` (a checkpoint file or ``pretrained:NAME``) in evaluation mode on ``device``, and its
    checkpoint (config, workflow, counters). The one place a command loads an agent and puts it on the run's
    device: ``evaluate`` (greedy, sampled, ``--workflow``, ``--plan``), ``replay``, ``search``'s screen of a
    universal agent and :func:`make_act` all call it with their run's device, so weights and inputs meet on one
    device (the planner then copies the agent to the CPU, where it plans: ``planning.planner``). ``device`` has no
    default on purpose: an agent left on the CPU while a CUDA engine feeds it fails at its first step. (``train
    --init-checkpoint`` and a search's warm starts read only the weights, :func:`starting_weights`, which the
    trainer copies into its own network on its device.) The file is read on the CPU, where its checks run, and
    only the network is put on ``device``."""
    ck = read_spec(spec)
    return agent_from_checkpoint(ck, device).eval(), ck


def load(name: str, device: str | torch.device = "cpu", planned: bool = False) -> tuple[Agent, Workflow | None]:
    """The shipped agent ``name`` (``"universal"`` or ``"pretrained:universal"``), or the agent of a checkpoint file
    ``name``, and its workflow (None: unconstrained), on ``device`` (for a user's own loop; :func:`load_agent`
    underneath). Acting: pass it (or just its name) to :func:`workflow_rl.rl.planning.planner.make_act` (it keeps the
    episode memory of an agent trained with ``--decoy-memory`` or ``--red-memory`` and plays the ``--opening`` of one
    trained with it), or ``agent.act(torch.cat([obs, workflow_encoding_or_zeros], 1), None, greedy=True)`` for one
    without either. ``planned``: the planner will act with it, which refuses an agent trained with a reward term it
    does not value (``rl.reward.check_valued``)."""
    spec = name if name.startswith(PREFIX) or Path(name).is_file() else PREFIX + name
    agent, ck = load_agent(spec, device)
    if planned:
        from workflow_rl.rl.reward import check_valued

        check_valued(ck["config"], "the planner", name)
    return agent, Workflow.parse(ck["workflow"]) if ck.get("workflow") else None


def trained_config(spec: str) -> TrainConfig:
    """The training settings of the checkpoint ``spec`` (a file or ``pretrained:NAME``); a setting a checkpoint
    from before it existed lacks has its only value then, the default (the ratio alignment reward, no opening)."""
    return TrainConfig.from_dict(read_spec(spec)["config"])


def starting_weights(spec: str, ppo: PPOConfig, device: str = "cpu") -> dict:
    """The weights a run starts from with ``--init-checkpoint SPEC`` (a checkpoint file or ``pretrained:NAME``):
    the agent's state dict, after checking that it fits the network this run's ``ppo`` settings build (hidden
    layers and episode memory), so a mismatch is one error naming the flags to change, not a failure mid-run.

    A run may add the clock (``--clock-memory``) to weights trained without it: the clock is the last input, and
    its weights start at zero, so the run starts from exactly the checkpoint's policy."""
    ck = read_spec(spec)
    saved = ck["config"]["ppo"]
    have = (tuple(saved["hidden"]), Memory.of(saved))
    want = (tuple(ppo.hidden), Memory.of(ppo))
    adds_clock = want[1].clock and not have[1].clock and dataclasses.replace(want[1], clock=False) == have[1]
    if have != want and not (adds_clock and have[0] == want[0]):
        raise ValueError(f"--init-checkpoint {spec} has hidden layers {list(have[0])} and {have[1].flags}; this run "
                         f"has {list(want[0])} and {want[1].flags}: train with the same --hidden and memory flags")
    weights = {k: v.to(device) for k, v in ck["agent"].items()}
    if adds_clock:
        return {k: torch.cat([v, v.new_zeros(v.shape[0], 1)], 1) if k in FIRST_LAYERS else v
                for k, v in weights.items()}
    return weights


FIRST_LAYERS = ("actor.0.weight", "critic.0.weight")
"""The weights that read the policy input (``Agent``'s actor and critic): what a new last input widens."""


SLIM_DROP = ("optimizer", "rng", "env_state", "obs", "access", "tracker", "episode_running", "memory",
             "decoys_placed")
"""What a shipped checkpoint leaves out: only a resume needs it, and it is most of a training checkpoint's size."""


def save_slim(checkpoint: Path, out: Path) -> Path:
    """Write the slim form of a training checkpoint (what ships here); it loads with ``load_checkpoint`` as any
    checkpoint does, but cannot be resumed."""
    ck = load_checkpoint(Path(checkpoint))
    atomic_save({k: (None if k in SLIM_DROP else v) for k, v in ck.items()}, Path(out))
    return Path(out)
