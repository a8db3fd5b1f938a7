"""Checkpoint files: atomic writes, loading with one clear error per way a file can be unusable, and the check
that a checkpoint belongs to the run that wants to continue it."""
from __future__ import annotations

import os
from pathlib import Path

import torch

from workflow_rl.rl.config import TrainConfig
from workflow_rl.rl.ppo import Agent

CHECKPOINT_VERSION = 1


class CheckpointError(ValueError):
    """A checkpoint that cannot be used (corrupt, wrong version, or from a different configuration)."""


def atomic_save(obj, path: Path) -> None:
    """torch.save to a temporary file in the same folder, fsync, then rename over ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    with open(tmp, "wb") as f:
        torch.save(obj, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


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
    return ck


def check_same_run(ck: dict, cfg: TrainConfig) -> None:
    """Refuse to continue a checkpoint under settings that would make it a different run (budget and stop limits
    may differ)."""
    saved = TrainConfig.from_dict(ck["config"])
    for name in ("workflow", "red_agent", "engine", "n_envs", "episode_length", "update_every_steps", "seed"):
        if getattr(saved, name) != getattr(cfg, name):
            raise CheckpointError(f"checkpoint was written with {name}={getattr(saved, name)!r}, this run has "
                                  f"{getattr(cfg, name)!r}: resume with the original settings")


def agent_from_checkpoint(ck: dict, device: str = "cpu") -> Agent:
    hidden = tuple(ck["config"]["ppo"]["hidden"])
    agent = Agent(hidden).to(device)
    try:
        agent.load_state_dict(ck["agent"])
    except RuntimeError as e:
        raise CheckpointError(f"checkpoint weights do not fit the network ({e.__class__.__name__}): the file is "
                              "damaged or was edited; retrain") from None
    return agent
