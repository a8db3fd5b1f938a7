"""Real CybORG (PyPI ``csle-cyborg``, CybORG 2.1) as a gymnasium ``Env`` with the native engine's conventions.

csle-cyborg ships without the Scenario2 YAML and imports an undeclared ``stable_baselines3``; this module deals with
both: :func:`install_scenario` copies the user's scenario folder next to the package (idempotently), and a stub
``stable_baselines3`` module is registered only if the real one is missing (it is used by a loader agent we never
touch). CybORG draws all randomness from Python's global ``random``; each env owns a ``random.Random`` stream and
swaps it in around every call, so several envs in one process stay independent and reproducible.
"""
from __future__ import annotations

import copy
import importlib
import os
import random
import shutil
import sys
import types
from pathlib import Path

import gymnasium as gym
import numpy as np

from workflow_rl.sim import attackers, tables

SCENARIO_ENV_VAR = "WORKFLOW_RL_CAGE2_SCENARIO"
_PRIVILEGED_USERS = ("root", "SYSTEM")


class CybORGUnavailable(RuntimeError):
    """csle-cyborg or its scenario data is missing; the message says how to fix it."""


def cyborg_red_class(name: str, agents_mod):
    """The CybORG red agent class that plays attacker ``name`` (its ``Attacker.cyborg_class``: a class of
    csle-cyborg's ``agents`` module, or ``module:Class``); a ValueError for an attacker with none."""
    from workflow_rl.envs.names import check_engine_plays

    check_engine_plays(name, "cyborg")
    cls = attackers.get(name).cyborg_class
    module, sep, attr = cls.partition(":")
    return getattr(importlib.import_module(module), attr) if sep else getattr(agents_mod, cls)


def _import_csle_cyborg():
    try:
        importlib.import_module("stable_baselines3")
    except ImportError:
        stub = types.ModuleType("stable_baselines3")

        class PPO:  # noqa: D401 - placeholder for csle_cyborg's unused BlueLoadAgent
            def __init__(self, *a, **k):
                raise CybORGUnavailable("stable_baselines3 is not installed (only csle_cyborg's BlueLoadAgent uses it)")

        stub.PPO = PPO
        sys.modules["stable_baselines3"] = stub
    try:
        return importlib.import_module("csle_cyborg.main")
    except ImportError as e:
        raise CybORGUnavailable(
            "the cyborg engine needs csle-cyborg: pip install 'workflow-rl[cyborg]' (or pip install csle-cyborg)"
        ) from e


def package_scenario_dir() -> Path:
    """Where csle-cyborg looks for its scenario files (``<package>/shared/scenarios``)."""
    main = _import_csle_cyborg()
    return Path(main.__file__).parent / "shared" / "scenarios"


def _find_source(source: str | os.PathLike | None) -> Path | None:
    src = source or os.environ.get(SCENARIO_ENV_VAR)
    if not src:
        return None
    p = Path(src).expanduser()
    return p.parent if p.is_file() else p


def install_scenario(source: str | os.PathLike | None = None) -> Path:
    """Make Scenario2.yaml and the host images available to csle-cyborg; returns the Scenario2.yaml it will use.

    ``source`` (or ``$WORKFLOW_RL_CAGE2_SCENARIO``) is a folder holding ``Scenario2.yaml`` and ``images/``. Files
    already in place are left alone; missing ones are copied. Raises :class:`CybORGUnavailable` naming the fix.
    """
    dest = package_scenario_dir()
    target = dest / "Scenario2.yaml"
    src = _find_source(source)
    if src is not None:
        if not (src / "Scenario2.yaml").is_file() or not (src / "images" / "images.yaml").is_file():
            raise CybORGUnavailable(
                f"{src} does not hold Scenario2.yaml and images/images.yaml: point --scenario (or "
                f"${SCENARIO_ENV_VAR}) at the folder of the official CAGE2 Scenario2 files "
                "(cage-challenge-2/CybORG/CybORG/Shared/Scenarios)")
        (dest / "images").mkdir(parents=True, exist_ok=True)
        for f in [src / "Scenario2.yaml", *sorted((src / "images").glob("*.yaml"))]:
            out = dest / f.relative_to(src)
            if not out.exists() or out.read_bytes() != f.read_bytes():
                shutil.copyfile(f, out)
    if not target.is_file() or not (dest / "images" / "images.yaml").is_file():
        raise CybORGUnavailable(
            f"CybORG's Scenario2 data is missing from {dest}: run `workflow-rl cyborg-setup --scenario DIR` (or set "
            f"${SCENARIO_ENV_VAR}=DIR) with DIR the folder holding Scenario2.yaml and images/ from the official "
            "cage-challenge-2 repository (CybORG/CybORG/Shared/Scenarios)")
    return target


_SCENARIO_CACHE: dict[str, dict] = {}


def scenario_dict(scenario: str | os.PathLike | None = None) -> dict:
    """CybORG's parsed Scenario2 (a fresh copy each call): what csle-cyborg's ``Main`` takes where CybORG 2.1's took
    the YAML's path (``scenario``: the folder of the official files, as for :func:`install_scenario`)."""
    path = str(install_scenario(scenario))
    if path not in _SCENARIO_CACHE:
        sim = importlib.import_module("csle_cyborg.simulator.simulation_controller")
        # _parse_scenario is an instance method that needs no initialised state (see csle-cyborg's docs)
        parser = sim.SimulationController.__new__(sim.SimulationController)
        _SCENARIO_CACHE[path] = parser._parse_scenario(path)
    return copy.deepcopy(_SCENARIO_CACHE[path])


class CybORGEnv(gym.Env):
    """One CybORG Scenario2 blue env: float32 (52,) obs, Discrete(145), truncation at ``episode_length``.

    ``info["red_access"]`` holds the true red access per host (0 none, 1 user, 2 privileged), computed here from
    CybORG's session table so no true-state dict leaves the process; after a step, ``info["red_action"]`` red's
    action of that step (kind, target, success; :meth:`red_action`), as the native engine reports it.
    """

    metadata = {"render_modes": []}

    def __init__(self, red_agent: str = "B_lineAgent", episode_length: int = 100, scenario: str | None = None,
                 seed: int | None = None):
        """``red_agent``: one red agent, or a mixture (``mix``, ``NAME:W,...``): then one CybORG per agent of the
        mixture is built here, and each ``reset`` draws the episode's red agent from this env's own random stream
        before resetting that CybORG (an episode is still reproducible from its reset seed)."""
        from workflow_rl.envs.names import red_weights

        main = _import_csle_cyborg()
        agents_mod = importlib.import_module("csle_cyborg.agents")
        wrap_mod = importlib.import_module("csle_cyborg.agents.wrappers.challenge_wrapper")
        self.red_agent = red_agent
        self.episode_length = int(episode_length)
        self._mix = red_weights(red_agent)
        self._rng = random.Random(seed)
        self._engines = {}
        with self._own_random():
            for name in self._mix:
                red_cls = cyborg_red_class(name, agents_mod)
                cyborg = main.Main(scenario_dict(scenario), "sim", agents={"Red": red_cls})
                wrapper = wrap_mod.ChallengeWrapper(env=cyborg, agent_name="Blue", max_steps=None)
                self._engines[name] = (cyborg, wrapper)
        self.current_red = next(iter(self._mix))
        self._cyborg, self._env = self._engines[self.current_red]
        self._hosts = list(tables.HOSTS)
        self.observation_space = gym.spaces.Box(0.0, 1.0, (4 * tables.N_HOSTS,), np.float32)
        self.action_space = gym.spaces.Discrete(tables.N_ACTIONS)
        self._t = 0

    def _own_random(self):
        env = self

        class _Swap:
            def __enter__(self_inner):
                self_inner.saved = random.getstate()
                random.setstate(env._rng.getstate())

            def __exit__(self_inner, *exc):
                env._rng.setstate(random.getstate())
                random.setstate(self_inner.saved)

        return _Swap()

    def red_access(self) -> np.ndarray:
        """(13,) int8 true red access per host, from CybORG's session table (SPEC §8 definition)."""
        out = np.zeros(tables.N_HOSTS, np.int8)
        sessions = self._cyborg.environment_controller.state.sessions.get("Red", {})
        index = {h: i for i, h in enumerate(self._hosts)}
        for sess in sessions.values():
            i = index.get(sess.host)
            if i is None:
                continue
            level = tables.ACCESS_PRIVILEGED if sess.username in _PRIVILEGED_USERS else tables.ACCESS_USER
            out[i] = max(out[i], level)
        return out

    def red_action(self) -> np.ndarray:
        """(3,) int8 red's last action as the native engine reports it (``info["red_action"]``): its kind
        (``tables.RED_ACTIONS`` index), its target (host index; the subnet index for DiscoverRemoteSystems; -1 none)
        and its success (0/1), read from CybORG's last red action and red's observation."""
        action = self._cyborg.get_last_action("Red")
        name = type(action).__name__
        kind = tables.RED_ACTIONS.index(name) if name in tables.RED_ACTIONS else tables.R_SLEEP
        ctrl = self._cyborg.environment_controller
        target = -1
        if getattr(action, "subnet", None) is not None:
            names = [n for n, net in ctrl.subnet_cidr_map.items() if net == action.subnet]
            target = tables.SUBNETS.index(names[0]) if names and names[0] in tables.SUBNETS else -1
        elif getattr(action, "hostname", None) in self._hosts:
            target = self._hosts.index(action.hostname)
        elif getattr(action, "ip_address", None) is not None:
            names = [h for h, ip in ctrl.hostname_ip_map.items() if ip == action.ip_address]
            target = self._hosts.index(names[0]) if names and names[0] in self._hosts else -1
        success = str(self._cyborg.get_observation("Red").get("success", "")).endswith("TRUE")
        return np.array([kind, target, success], np.int8)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        if seed is not None:
            self._rng.seed(seed)
        if len(self._mix) > 1:   # one draw from this env's stream picks the episode's red agent
            self.current_red = self._rng.choices(list(self._mix), weights=list(self._mix.values()))[0]
            self._cyborg, self._env = self._engines[self.current_red]
        with self._own_random():
            out = self._env.reset()
        obs = out[0] if isinstance(out, tuple) else out
        self._t = 0
        return np.asarray(obs, np.float32), {"red_access": self.red_access()}

    def step(self, action):
        a = int(action)
        if not 0 <= a < tables.N_ACTIONS:
            raise ValueError(f"action {action!r} is outside 0..{tables.N_ACTIONS - 1}")
        with self._own_random():
            obs, reward, _done, _info, _ = self._env.step(a)
        self._t += 1
        truncated = self._t >= self.episode_length
        return (np.asarray(obs, np.float32), float(np.float32(reward)), False, truncated,
                {"red_access": self.red_access(), "red_action": self.red_action()})

    def close(self):
        self._env = None
        self._engines = {}
