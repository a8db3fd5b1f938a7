"""When a run updates and when it stops: the exact episode budget and the stop rule.

The exact episode budget and the stop rule (compliance gate, per-env cap, budget). Pure functions of the config and the
run's counters.
"""
from __future__ import annotations

import numpy as np

from workflow_rl.rl.config import EPISODE_WORKERS, TrainConfig


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


def check_first_update(cfg: TrainConfig) -> None:
    """The run's budget holds at least its first update: an update longer than the budget can pay for would train
    nothing and end "budget" after 0 episodes (:func:`plan_update` decides). Checked for what a user asks for
    (``train``, a search's settings), not in ``TrainConfig.validate``: a search's last workflow may get a claim too
    small for an update, and then rightly trains nothing."""
    if cfg.vectorization == EPISODE_WORKERS or plan_update(cfg, 0, cfg.budget, 0) is not None:
        return
    per_env = -(-cfg.update_every_steps // cfg.episode_length)
    raise ValueError(f"--update-every-steps {cfg.update_every_steps} plays {per_env} episode(s) of every env per "
                     f"update ({per_env * cfg.n_envs} with {cfg.n_envs} envs), more than the run's budget of "
                     f"{cfg.budget} episodes: nothing would train; use fewer steps per update (e.g. "
                     f"--update-every-steps {cfg.episode_length}) or a larger budget (--max-episodes, --num-episodes)")


PASSED_GATE = ("compliant", "post_gate")
"""Stop reasons of a run that passed the compliance gate: at the gate (``post_gate_episodes`` 0) or after training
its post-gate budget. Every reader of a stop reason asks :func:`passed_gate`."""


def passed_gate(stop_reason: str | None) -> bool:
    return stop_reason in PASSED_GATE


def gate_fires(cfg: TrainConfig, conditioned: bool, min_episodes_done: int, counted: float,
               compliance: float, worst: float = 1.0) -> bool:
    """Whether an update passes the compliance gate: it needs a workflow, every env past ``min_episodes``, at
    least ``min_fixes`` counted fixes in the update's finished episodes and batch compliance >= the threshold.

    A run across workflows pools the update's episodes whatever their workflows (the same batch compliance) and
    also needs ``worst``, the least compliant workflow's compliance over its last episodes
    (``compliance.WorkflowWindow``; NaN until every trained workflow has its window), >= the threshold: a
    mixture passes when every workflow complies, not on average. One workflow: ``worst`` 1.0."""
    return (conditioned and min_episodes_done >= cfg.min_episodes and counted >= max(1, cfg.min_fixes)
            and compliance >= cfg.compliance_threshold and worst >= cfg.compliance_threshold)


def stop_rule(cfg: TrainConfig, min_episodes_done: int, total_episodes: int, gate_at: int | None) -> str | None:
    """Why training stops after an update (None: go on). ``gate_at``: the per-env episode count at which the
    gate fired (None: not yet; see :func:`gate_fires`).

    Before the gate: stop at ``max_episodes`` per env or when the budget is spent. After it the run trains exactly
    ``post_gate_episodes`` more episodes per env (the post-gate phase is not capped by ``max_episodes``, which
    bounds only the time to reach the gate), so the value a workflow is judged by comes after the same further
    training whatever it started from; only the episode budget (``num_episodes``) can cut it ("budget")."""
    if gate_at is not None:
        if min_episodes_done >= gate_at + cfg.post_gate_episodes:
            return "post_gate" if cfg.post_gate_episodes else "compliant"
        return "budget" if total_episodes >= cfg.budget else None
    if min_episodes_done >= cfg.max_episodes:
        return "max_episodes"
    if total_episodes >= cfg.budget:
        return "budget"
    return None


def most_episodes(cfg: TrainConfig, min_episodes_done: int, total_episodes: int, gate_at: int | None,
                  stop_reason: str | None) -> int:
    """The most training episodes a run can have when it stops, from its counters now (an upper bound that
    :func:`stop_rule` guarantees; exact once it stopped).

    Before the gate the run may still pass it as late as its ``max_episodes``th episode per env and then train its
    post-gate phase, so only its budget bounds it; once the gate fired the post-gate phase is a fixed number of
    episodes per env. A search uses this to hand a running workflow's unusable claim to new workflows as soon as
    its gate fires, instead of when it finishes. ``per`` covers updates that span several episodes per env (each
    stop check can then overshoot by all but one of them)."""
    if stop_reason is not None:
        return total_episodes
    per = -(-cfg.update_every_steps // cfg.episode_length)   # episodes per env an update can finish, at most
    gate = (cfg.max_episodes + per - 1) if gate_at is None else gate_at
    last = gate + cfg.post_gate_episodes + per - 1
    return min(cfg.budget, total_episodes + cfg.n_envs * max(0, last - min_episodes_done))


def episode_seed(seed: int, index: int, stream: int) -> int:
    """A 63-bit seed for episode ``index`` of a run (stream 0: the env, 1: action sampling)."""
    return int(np.random.SeedSequence([seed, index, stream]).generate_state(1, np.uint64)[0] >> np.uint64(1))


def learning_rate(cfg: TrainConfig, spent_fraction: float) -> float:
    """Adam's step size for a run's next update: ``--learning-rate``, or with ``--anneal-lr`` that times 1 - the
    fraction of its episode budget the run has spent, never below 0. Per run, so workflows sharing a batch at
    different stages (a search) each follow their own schedule; a pure function of the counters, so a resumed run
    continues the same schedule."""
    if not cfg.anneal_lr:
        return cfg.ppo.learning_rate
    return cfg.ppo.learning_rate * max(0.0, 1.0 - float(spent_fraction))
