"""The training reward: one function of named terms, each with its weight setting.

A :class:`RewardTerm` is a name, the log column of its episode return, the ``TrainConfig`` setting that weighs it
and its per-step reward: a function of what a rollout step knows (:class:`Step`: the environment's reward, the
alignment reward of ``rl.compliance``, the blue action played, red's true access before it) and of each env's
weight. :data:`TERMS` lists them in the order they are summed; :func:`compose` is the training reward both rollout
paths train on (the vector-env rollout, ``rl.trainer``; episode workers, ``rl.episode_workers``)::

    reward = (env + align + every other term at a nonzero weight) * reward_scale

Everything else reads the list: each term's episode return is kept per env (``BatchedTrainer``: its running sum,
the episode-end record ``ENDED``, the engine snapshot's ``episode_running``), logged (``runlog.LOG_COLUMNS``: its
column, and ``total_reward`` sums them all) and, its weight being a setting declared ``resume="must_match"``
(``rl.config.setting``), part of the resume identity (``rl.checkpoint.SAME_RUN``). The planner and expert iteration
value the terms with a ``planner`` line, and refuse in one line an agent trained with another at a nonzero weight
(:func:`check_valued`).

A new term is its entry here and its weight's one line in ``TrainConfig`` (docs/extending.md, "A new reward term").
Its function must stay device work (no host read: the rollout segment is replayed as a CUDA graph) and return
float32 of the batch's shape. A term at weight 0 in every run of a batch is skipped, so adding one changes no run
that leaves it at 0, bit for bit.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, NamedTuple

import torch

from workflow_rl.checks import flag
from workflow_rl.rl.config import DECLARED, TrainConfig


class Step(NamedTuple):
    """What one rollout step knows, for N envs."""

    env: torch.Tensor
    """(N,) float32: the environment's reward."""
    align: torch.Tensor
    """(N,) float32: the alignment reward (``ComplianceTracker.step``: lambda applied, 0 in an episode with no
    workflow)."""
    actions: torch.Tensor
    """(N,) int64: the blue action played (the opening's where it forced one)."""
    access: torch.Tensor
    """(N, 13): red's true access on each host before the action (``info["red_access"]``)."""


@dataclass(frozen=True)
class RewardTerm:
    """One term of the training reward."""

    name: str
    """its name: its episode return is ``<name>_return`` in the finished-episode lists, ``<name>`` in the engine
    snapshot's ``episode_running``"""
    column: str
    """the training log's column of its mean episode return"""
    weight: str | None
    """the ``TrainConfig`` setting that weighs it (declared ``resume="must_match"``); None: always 1"""
    reward: Callable[[Step, torch.Tensor | None], torch.Tensor]
    """``reward(step, weight)``: the term's (N,) float32 reward at a step, ``weight`` (N,) float32 each env's value
    of its weight setting, which it applies (its episode return is what it added). The built-in terms get None:
    the environment's reward has no weight, and the compliance tracker applies the alignment lambda"""
    planner: str | None = None
    """how the planner and expert iteration value it; None: they do not (they refuse an agent trained with it at a
    nonzero weight)"""
    always: bool = False
    """summed even at weight 0 (the built-in terms, as training summed them before this module, bit for bit)"""

    def weight_in(self, cfg: TrainConfig) -> float:
        """This term's weight in a run of ``cfg`` (1 for a term without a setting)."""
        return 1.0 if self.weight is None else float(getattr(cfg, self.weight))


TERMS: tuple[RewardTerm, ...] = (
    RewardTerm("env", "env_reward", None, lambda s, w: s.env, always=True,
               planner="as its rollouts' return"),
    # the compliance tracker computes it at every step (it counts the fixes) with lambda per env, 0 in an episode
    # with no workflow, so its weight is applied there
    RewardTerm("align", "alignment_bonus", "alignment_lambda", lambda s, w: s.align, always=True,
               planner="as its limit on a violation's chance, --plan-max-violation"),
)
"""The training reward's terms, in the order :func:`compose` sums them."""


def returns_key(term: RewardTerm) -> str:
    """The finished-episode lists' key of ``term``'s episode returns (``env_return``, ``align_return``)."""
    return f"{term.name}_return"


RETURNS = tuple(returns_key(t) for t in TERMS)
"""Each term's episode-return key, in :data:`TERMS` order."""


def _check_registry() -> None:
    """Each term's weight is a declared setting a resume must match (so the resume identity covers it), and names
    and columns are unique: a term that breaks either fails when this module loads."""
    for t in TERMS:
        d = DECLARED.get(t.weight) if t.weight is not None else None
        if t.weight is not None and (d is None or d.resume != "must_match"):
            raise TypeError(f"reward term {t.name!r}: its weight {t.weight!r} must be a TrainConfig setting declared "
                            "with setting(..., resume=\"must_match\")")
    for what in ("name", "column"):
        seen = [getattr(t, what) for t in TERMS]
        if len(set(seen)) != len(seen):
            raise TypeError(f"reward terms share a {what}: {seen}")


_check_registry()


def weighed() -> tuple[RewardTerm, ...]:
    """The terms whose weight :func:`step_rewards` hands them: those with a weight setting but the built-ins."""
    return tuple(t for t in TERMS if t.weight is not None and not t.always)


def active(cfgs) -> tuple[RewardTerm, ...]:
    """The terms a batch of runs with configs ``cfgs`` sums: the built-ins, and each other term at a nonzero
    weight in one of them at least."""
    cfgs = list(cfgs)
    return tuple(t for t in TERMS if t.always or any(t.weight_in(c) != 0 for c in cfgs))


def step_rewards(terms, step: Step, weights: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Each term of ``terms``' reward at ``step`` (``weights``: term name -> (N,) float32 per env, for the terms
    :func:`weighed`; the others get None)."""
    return {t.name: t.reward(step, weights.get(t.name)) for t in terms}


def compose(parts: dict[str, torch.Tensor], reward_scale: float) -> torch.Tensor:
    """The training reward of a step (or a stack of steps) from its terms' rewards ``parts`` (name -> tensor, the
    terms a batch sums): their sum in :data:`TERMS` order, times ``reward_scale``. With the built-in terms alone,
    ``(env + align) * reward_scale``."""
    total = None
    for t in TERMS:
        if t.name in parts:
            total = parts[t.name] if total is None else total + parts[t.name]
    return total * reward_scale


def episode_total(returns: dict[str, list[float]]) -> list[float]:
    """Per finished episode, the sum of its terms' returns (the log's ``total_reward``), in :data:`TERMS` order."""
    out = None
    for key in RETURNS:
        out = list(returns[key]) if out is None else [a + b for a, b in zip(out, returns[key])]
    return out


def check_valued(config: dict | TrainConfig, by: str, what: str = "the agent") -> None:
    """Refuse (ValueError, one line) to plan with an agent whose training ``config`` (a checkpoint's) weighed a
    term ``by`` (the planner, expert iteration) does not value."""
    cfg = config if isinstance(config, TrainConfig) else TrainConfig.from_dict(config)
    for t in TERMS:
        if t.planner is None and t.weight_in(cfg) != 0:
            valued = " and ".join(f"the {u.name} term ({u.planner})" for u in TERMS if u.planner is not None)
            raise ValueError(f"{by} values {valued} only: {what} was trained with the {t.name} reward term too "
                             f"({flag(t.weight)} {t.weight_in(cfg):g}); use an agent trained with {flag(t.weight)} 0")
