"""When a run updates and when it stops: the exact episode budget and the stop rule (compliance gate, per-env
cap, budget). Pure functions of the config and the run's counters."""
from __future__ import annotations

import numpy as np

from workflow_rl.rl.config import TrainConfig


def plan_update(cfg: TrainConfig, global_step: int, left: int, round_active: int) -> tuple[int, int, int] | None:
    """(steps, active envs, round_active) of the next update of a run at ``global_step`` with ``left`` episodes of
    budget, or None when the budget is spent.

    Envs are synchronised (they start together and episodes have a fixed length), so the budget can be cut
    exactly by training on the first ``active`` envs only: decided per rollout when a rollout holds whole
    episodes (update_every_steps a multiple of episode_length), or once per episode round (``round_active``) when an
    episode spans several rollouts (episode_length a multiple of update_every_steps). Otherwise training stops at
    the last update that fits.
    """
    steps, length = cfg.update_every_steps, cfg.episode_length
    phase = global_step % length
    if length % steps == 0 and steps < length:
        if phase == 0:
            if left <= 0:
                return None
            round_active = min(cfg.n_envs, left)
        return steps, round_active, round_active
    if left <= 0:
        return None
    ends_per_env = (phase + steps) // length
    if ends_per_env * cfg.n_envs <= left:
        return steps, cfg.n_envs, round_active
    if phase == 0 and steps % length == 0 and left // ends_per_env >= 1:
        return steps, left // ends_per_env, round_active
    return None


def stop_rule(cfg: TrainConfig, conditioned: bool, min_episodes_done: int, counted: float, compliance: float,
              total_episodes: int) -> str | None:
    """Why training stops after an update (None: go on). The compliance gate needs a workflow, every env past
    ``min_episodes`` and at least ``min_fixes`` counted fixes in the update's finished episodes."""
    if (conditioned and min_episodes_done >= cfg.min_episodes and counted >= max(1, cfg.min_fixes)
            and compliance >= cfg.compliance_threshold):
        return "compliant"
    if min_episodes_done >= cfg.max_episodes:
        return "max_episodes"
    if total_episodes >= cfg.budget:
        return "budget"
    return None


def episode_seed(seed: int, index: int, stream: int) -> int:
    """A 63-bit seed for episode ``index`` of a run (stream 0: the env, 1: action sampling)."""
    return int(np.random.SeedSequence([seed, index, stream]).generate_state(1, np.uint64)[0] >> np.uint64(1))
