"""Workflow compliance of blue's fixes, and the alignment reward built on it (batched, torch).

Definition (also in docs/training.md, "Compliance, exactly"):

* A *fix* is Remove(h) (actions 15..27) or Restore(h) (132..144).
* Before blue acts, host h is *compromised* when red holds a session on it (true red access > none, from the
  engine's ``info["red_access"]``). User0 is never counted: it is red's permanent foothold, which blue cannot clear.
* The *target type* is the first type in the workflow order that has a compromised host.
* A fix is *compliant* when its host's unit type is the target type, a *violation* when something is compromised and
  the type differs, and *neutral* when nothing is compromised. Neutral fixes are counted apart and enter neither the
  numerator nor the denominator.
* Episode compliance C = compliant / (compliant + violations); the running value C_t uses the counts so far and is 0
  before the first counted fix. Batch compliance pools the counts over an update's finished episodes.
* Alignment reward (``--alignment-reward``, lambda = ``--alignment-lambda``), one of two forms:

  - ``ratio`` (the default): on each counted (compliant or violating) fix,
    lambda * (C_t - C_{t-1}); over an episode it sums to lambda * C_final. C is a ratio, so this also pays for
    *diluting*: after a violation, every extra compliant fix raises C and earns reward, and the first compliant fix
    of an episode earns lambda (from C_0 = 0). It pulls towards fixing often.
  - ``violations``: -lambda / VIOLATION_SCALE on each violating fix, 0 on compliant and neutral ones; over an
    episode -lambda * violations / VIOLATION_SCALE. No fix ever earns reward, so dilution pays nothing and a fix
    is worth only what it does to the env reward. Since lambda * C_final = lambda - lambda * violations / n for n
    counted fixes, this is the ratio form's total less its constant, with the fix count n frozen at the scale.

  The compliance counts, the gate and the logs are the same under both forms (the gate reads the ratio C).
"""
from __future__ import annotations

import torch

from workflow_rl.sim import tables

_HOST_TYPE = torch.as_tensor(tables.HOST_UNIT_TYPE, dtype=torch.int64)
_TYPE_ONEHOT = torch.nn.functional.one_hot(_HOST_TYPE, 5).to(torch.float32)   # (13, 5) host -> unit type
_ON_DEVICE: dict[torch.device, tuple[torch.Tensor, torch.Tensor]] = {}


def _host_tables(device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """(host -> unit type, its one-hot) on ``device``, copied there once: a copy per step would be two host-to-GPU
    transfers inside every rollout step."""
    if device not in _ON_DEVICE:
        _ON_DEVICE[device] = (_HOST_TYPE.to(device), _TYPE_ONEHOT.to(device))
    return _ON_DEVICE[device]


def fix_hosts(actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(is_fix, host) for a batch of blue actions; host is meaningful where is_fix."""
    a = actions.to(torch.int64)
    remove = (a >= tables.A_REMOVE) & (a < tables.A_REMOVE + tables.N_HOSTS)
    restore = a >= tables.A_RESTORE
    host = torch.where(restore, a - tables.A_RESTORE, a - tables.A_REMOVE).clamp(0, tables.N_HOSTS - 1)
    return remove | restore, host


def target_types(access_before: torch.Tensor, type_rank: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(target type (N,) int64, anything compromised (N,) bool) in states with true access ``access_before``
    (N, 13): the first unit type (index into ``tables.UNIT_TYPES``) in the workflow order with a compromised host
    (User0 not counted); meaningless where nothing is compromised. ``type_rank`` as in :func:`classify_fixes`."""
    device = access_before.device
    _, type_onehot = _host_tables(device)
    compromised = access_before > 0
    compromised[:, tables.USER0] = False
    type_comp = (compromised.to(torch.float32) @ type_onehot) > 0   # (N, 5): a host of that type
    rank = type_rank.to(device).expand(access_before.shape[0], 5)
    return torch.where(type_comp, rank, torch.full_like(rank, 99)).argmin(1), type_comp.any(1)


def classify_fixes(actions: torch.Tensor, access_before: torch.Tensor, type_rank: torch.Tensor):
    """Compliant / violation / neutral masks (N,) for actions taken in states with true access ``access_before``
    (N, 13). ``type_rank`` (N, 5) or (5,) holds each unit type's rank in the env's workflow (0 = first)."""
    is_fix, host = fix_hosts(actions)
    device = actions.device
    host_type, _ = _host_tables(device)
    target, any_comp = target_types(access_before.to(device), type_rank)
    fix_type = host_type[host]
    compliant = is_fix & any_comp & (fix_type == target)
    violation = is_fix & any_comp & (fix_type != target)
    neutral = is_fix & ~any_comp
    return compliant, violation, neutral


ALIGNMENT_REWARDS = ("ratio", "violations")
"""The alignment reward's forms (``TrainConfig.alignment_reward``; the module docstring defines them)."""

VIOLATION_SCALE = 100.0
"""The ``violations`` form charges lambda / VIOLATION_SCALE per violating fix: what a violation costs the ``ratio``
form at 100 counted fixes per episode (its marginal cost lambda * C / n at C ~ 1), i.e. at one fix per step of
CAGE2's 100-step episode and near the fix count of the agents trained under it (~90 per B_line episode), so one
lambda weighs about the same in both forms for those agents. Fixed, not the episode's own count: a count that
moves with the policy is what makes the ratio form pay for fixing more."""


def ratio(compliant: torch.Tensor, violations: torch.Tensor) -> torch.Tensor:
    """compliant / (compliant + violations), 0 where nothing was counted."""
    total = compliant + violations
    return torch.where(total > 0, compliant / total.clamp(min=1), torch.zeros_like(compliant))


class ComplianceTracker:
    """Per-env running fix counts of the current episode, and the alignment reward they produce."""

    def __init__(self, num_envs: int, device: torch.device | str = "cpu", form: str = ALIGNMENT_REWARDS[0]):
        if form not in ALIGNMENT_REWARDS:
            raise ValueError(f"unknown alignment reward {form!r}: use one of {', '.join(ALIGNMENT_REWARDS)}")
        z = torch.zeros(num_envs, dtype=torch.float64, device=device)
        self.compliant, self.violations, self.neutral = z.clone(), z.clone(), z.clone()
        self.form = form
        """the alignment reward's form (``ALIGNMENT_REWARDS``); the counts do not depend on it."""

    def step(self, actions, access_before, type_rank, lam: "float | torch.Tensor") -> tuple[torch.Tensor, torch.Tensor]:
        """Count this step's fixes; returns (alignment reward (N,) float32, counted-fix mask (N,)). ``lam`` is one
        lambda or one per env (float64, as in a batch of workflows and unconditioned runs)."""
        c, v, nt = classify_fixes(actions, access_before, type_rank)
        before = ratio(self.compliant, self.violations)
        self.compliant += c
        self.violations += v
        self.neutral += nt
        counted = c | v
        if self.form == "violations":
            return (-(lam / VIOLATION_SCALE) * v).to(torch.float32), counted
        after = ratio(self.compliant, self.violations)
        return (lam * (after - before) * counted).to(torch.float32), counted

    def clear(self, done: torch.Tensor) -> None:
        """Restart the counters of the envs whose episode ended (``done`` mask), in place and without reading the
        mask on the host (no synchronisation; capturable): read the finished counts before."""
        for x in (self.compliant, self.violations, self.neutral):
            x.masked_fill_(done, 0)

    def state_dict(self) -> dict:
        return {"compliant": self.compliant, "violations": self.violations, "neutral": self.neutral}

    def load_state_dict(self, d: dict) -> None:
        for k in ("compliant", "violations", "neutral"):
            getattr(self, k).copy_(d[k])

    @staticmethod
    def check_state(d: dict, steps: int) -> None:
        """A ValueError unless ``d`` (a saved :meth:`state_dict`, its tensors' shapes checked by the caller) holds
        what ``steps`` steps of an episode can count: whole numbers >= 0, and at most one fix a step in all
        (``classify_fixes`` puts an action in one class at most). An edited count would steer the resumed
        alignment reward and the episode's compliance without a word."""
        counts = [torch.as_tensor(d[k], dtype=torch.float64) for k in ("compliant", "violations", "neutral")]
        if any(bool(((c < 0) | (c != c.round())).any()) for c in counts):
            raise ValueError("tracker holds counts that are not whole numbers >= 0")
        if bool((sum(counts) > steps).any()):
            raise ValueError(f"tracker counts more fixes than the {steps} steps the episodes have taken")


WINDOW_EPISODES = 20
"""Episodes per workflow in a run across workflows' per-workflow compliance (``WorkflowWindow``)."""


class WorkflowWindow:
    """Per workflow, the (compliant, violating) fix counts of its last ``WINDOW_EPISODES`` finished episodes: in a
    run across workflows an update finishes only a few episodes of each, too few to judge one workflow, so the
    worst workflow's compliance (log column ``compliance_worst``, the mixture's gate) pools each workflow's recent
    episodes instead. Plain ints, so a checkpoint holds it as lists (``state``)."""

    def __init__(self, workflows, state: dict | None = None):
        self.counts: dict[int, list[list[int]]] = {int(w): [] for w in workflows}
        for w, pairs in (state or {}).items():
            self.counts[int(w)] = [[int(c), int(v)] for c, v in pairs][-WINDOW_EPISODES:]

    def add(self, workflow_ids, compliant, violations) -> None:
        """Count finished episodes: each one's workflow index and its compliant and violating fixes; an episode
        played with no workflow (index -1: ``--none-share``) has no window and is skipped."""
        for w, c, v in zip(workflow_ids, compliant, violations):
            if w < 0:
                continue
            q = self.counts[int(w)]
            q.append([int(round(c)), int(round(v))])
            del q[:-WINDOW_EPISODES]

    def compliance(self, workflow: int) -> float:
        """One workflow's compliance over its window (NaN with no counted fix)."""
        c = sum(p[0] for p in self.counts[workflow])
        n = c + sum(p[1] for p in self.counts[workflow])
        return c / n if n else float("nan")

    def worst(self) -> tuple[int | None, float]:
        """(workflow index, compliance) of the least compliant workflow with a counted fix in its window; (None,
        NaN) before any."""
        scored = [(self.compliance(w), w) for w in self.counts]
        scored = [(c, w) for c, w in scored if c == c]
        if not scored:
            return None, float("nan")
        c, w = min(scored)
        return w, c

    def full(self) -> bool:
        """Whether every workflow has finished ``WINDOW_EPISODES`` episodes (the mixture's gate waits for it)."""
        return all(len(q) >= WINDOW_EPISODES for q in self.counts.values())

    def state(self) -> dict[int, list[list[int]]]:
        return {w: [list(p) for p in q] for w, q in self.counts.items()}
