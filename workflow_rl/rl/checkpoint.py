"""Checkpoint files: atomic writes, loading with one clear error per way a file can be unusable, and the check
that a checkpoint belongs to the run that wants to continue it."""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field, fields
from pathlib import Path

import numpy as np
import torch

from workflow_rl.checks import check_int, check_types, flag
from workflow_rl.rl.config import TrainConfig
from workflow_rl.rl.memory import Memory
from workflow_rl.rl.ppo import Agent
from workflow_rl.rundir import atomic_write
from workflow_rl.workflow import Workflow

CHECKPOINT_VERSION = 1
RECENT = 100
"""episodes in the running mean of returns (``mean100``)."""


@dataclass
class RunState:
    """A training run's counters: what its log rows, stop rule and summary read, and what a checkpoint must hold
    to continue it. ``to_checkpoint``/``from_checkpoint`` are the one place the checkpoint format is written and
    read."""

    n_envs: int
    update: int = 0
    global_step: int = 0
    total_episodes: int = 0
    episodes_per_env: np.ndarray = None
    round_active: int = 0
    last_compliance: float = float("nan")
    last_counted: float = 0.0
    stop_reason: str | None = None
    gate_at: int | None = None
    """episodes per env (the fewest any env finished) when the compliance gate fired; None: not yet"""
    gate_episodes: int | None = None
    """training episodes of the run when the gate fired"""
    recent: deque = field(default_factory=lambda: deque(maxlen=RECENT))

    def __post_init__(self):
        if self.episodes_per_env is None:
            self.episodes_per_env = np.zeros(self.n_envs, np.int64)
        if not self.round_active:
            self.round_active = self.n_envs

    def finish_update(self, steps: int, fin_returns: list[float], compliance: float, counted: float) -> None:
        """Count one update of ``steps`` steps whose finished episodes had ``fin_returns``."""
        self.update += 1
        self.global_step += steps
        self.total_episodes += len(fin_returns)
        self.recent.extend(fin_returns)
        self.last_compliance, self.last_counted = compliance, counted

    def to_checkpoint(self, cfg: TrainConfig, workflow: Workflow | None, agent: dict, optimizer: dict,
                      engine: dict | None = None) -> dict:
        """The checkpoint of this run: weights, Adam state, counters and, where the engine can be snapshotted and
        the run is mid-episode, ``engine`` (RNG, engine state, current observations, compliance counts and episode
        sums: see ``BatchedTrainer.engine_snapshot``)."""
        e = engine or {}
        return {
            "format": "workflow-rl", "version": CHECKPOINT_VERSION, "config": cfg.to_dict(),
            "workflow": workflow.names if workflow else None, "agent": agent, "optimizer": optimizer,
            "counters": {"update": self.update, "global_step": self.global_step,
                         "total_episodes": self.total_episodes, "episodes_per_env": self.episodes_per_env.copy(),
                         "stop_reason": self.stop_reason, "last_compliance": self.last_compliance,
                         "round_active": self.round_active, "gate_at": self.gate_at,
                         "gate_episodes": self.gate_episodes},
            "rng": e.get("rng"), "env_state": e.get("env_state"), "obs": e.get("obs"), "access": e.get("access"),
            "tracker": e.get("tracker"), "episode_running": e.get("episode_running"),
            "memory": e.get("memory"), "recent": list(self.recent),
        }

    @classmethod
    def from_checkpoint(cls, ck: dict, n_envs: int) -> "RunState":
        """The counters to continue from. The stop reason is not carried over: a resumed run trains on under its
        (possibly larger) limits, and stops again at once if they are already met."""
        c = ck["counters"]
        return cls(n_envs, update=c["update"], global_step=c["global_step"], total_episodes=c["total_episodes"],
                   episodes_per_env=np.asarray(c["episodes_per_env"]).copy(),
                   round_active=c.get("round_active", n_envs), last_compliance=c["last_compliance"],
                   gate_at=c.get("gate_at"), gate_episodes=c.get("gate_episodes"),
                   recent=deque(ck["recent"], maxlen=RECENT))


class CheckpointError(ValueError):
    """A checkpoint that cannot be used (corrupt, wrong version, or from a different configuration)."""


def atomic_save(obj, path: Path) -> None:
    """torch.save to a temporary file in the same folder, fsync, then rename over ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path, "wb") as f:
        torch.save(obj, f)


def load_checkpoint(path: Path, device: str = "cpu") -> dict:
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"no checkpoint at {path}: pass a file written by `workflow-rl train`")
    try:
        ck = torch.load(path, map_location=device, weights_only=False)
    except Exception as e:  # noqa: BLE001 - any unpickling failure means the file is unusable
        raise CheckpointError(f"checkpoint {path} is corrupt or not a workflow-rl checkpoint ({type(e).__name__}); "
                              "use another checkpoint or retrain") from None
    if not isinstance(ck, dict) or ck.get("format") != "workflow-rl" or "agent" not in ck:
        raise CheckpointError(f"{path} is not a workflow-rl checkpoint: use a file written by `workflow-rl train`")
    if ck.get("version") != CHECKPOINT_VERSION:
        raise CheckpointError(f"checkpoint {path} has version {ck.get('version')}, this workflow-rl reads "
                              f"{CHECKPOINT_VERSION}: retrain, or use the workflow-rl release that wrote it")
    try:
        check_fields(ck)
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        why = str(e) if isinstance(e, ValueError) else f"{type(e).__name__}: {e}"
        raise CheckpointError(f"checkpoint {path} is damaged ({why}): use another checkpoint or retrain") from None
    return ck


def check_fields(ck: dict) -> None:
    """The fields a resume, an evaluation or an inheritance reads, checked for type, range and consistency: its
    config (every setting's type and range), the weights and the counters."""
    cfg = TrainConfig.from_dict(ck["config"])
    check_types(cfg)
    check_types(cfg.ppo)
    if not isinstance(ck["agent"], dict):
        raise ValueError("agent weights are missing")
    c = ck["counters"]
    for name in ("update", "global_step", "total_episodes", "round_active"):
        if name in c:
            check_int(name, c[name], 0)
    per_env = np.asarray(c["episodes_per_env"])
    if per_env.shape != (cfg.n_envs,) or per_env.dtype.kind not in "iu" or (per_env < 0).any():
        raise ValueError(f"episodes_per_env is not {cfg.n_envs} counts >= 0")
    if int(per_env.sum()) > c["total_episodes"]:
        raise ValueError(f"episodes_per_env sums to {int(per_env.sum())}, more than total_episodes "
                         f"{c['total_episodes']}")


SAME_RUN = ("workflow", "red_agent", "engine", "n_envs", "episode_length", "update_every_steps", "seed",
            "alignment_lambda", "anneal_lr", "official_bugs")
"""The run settings a resumed run must share with its checkpoint (with every PPO setting): what it trains against,
on what, how its reward is made. Budget, stop rule, device and bookkeeping may differ."""


def check_same_run(ck: dict, cfg: TrainConfig) -> None:
    """Refuse to continue a checkpoint under settings that would make it a different run: a resumed run that
    silently trained on with another learning rate or reward would not be the run its files name. Starting a new
    run from the checkpoint's weights under new settings is what ``--init-checkpoint`` is for."""
    saved = TrainConfig.from_dict(ck["config"])
    pairs = [(name, getattr(saved, name), getattr(cfg, name)) for name in SAME_RUN]
    pairs += [(f.name, getattr(saved.ppo, f.name), getattr(cfg.ppo, f.name)) for f in fields(cfg.ppo)]
    for name, was, now in pairs:
        if (tuple(was) if isinstance(was, list) else was) != (tuple(now) if isinstance(now, list) else now):
            raise CheckpointError(f"checkpoint was written with {flag(name)} {was!r}, this run has {now!r}: resume "
                                  "with the original settings, or start a new run from its weights with "
                                  "--init-checkpoint")


def agent_from_checkpoint(ck: dict, device: str = "cpu") -> Agent:
    ppo = ck["config"]["ppo"]
    agent = Agent(tuple(ppo["hidden"]), Memory.of(ppo)).to(device)
    try:
        agent.load_state_dict(ck["agent"])
    except RuntimeError as e:
        raise CheckpointError(f"checkpoint weights do not fit the network ({e.__class__.__name__}): the file is "
                              "damaged or was edited; retrain") from None
    return agent


def load_batch_state(path: Path, device: str = "cpu") -> dict:
    """A batch's own state file (``train --seeds``' ``batch.pt``, a batched search's ``search_batch.pt``), written
    with :func:`atomic_save` beside the runs' checkpoints: the one place such files are read. A damaged one is
    refused naming the fix (without it the runs still resume, on fresh episodes)."""
    try:
        snap = torch.load(path, map_location=device, weights_only=False)
    except Exception as e:  # noqa: BLE001 - any unpickling failure means the file is unusable
        snap = e
    if not isinstance(snap, dict):
        why = type(snap).__name__
        raise CheckpointError(f"batch state {path} is damaged ({why}): delete it and resume again (the runs then "
                              "continue from their checkpoints on fresh episodes)") from None
    return snap
