"""What the search writes down: its proposals, its records and the state that holds both.

A :class:`Proposal` (a workflow chosen, then dispatched with its budget claim), a :class:`Record` (a trained and
evaluated workflow) and the :class:`SearchState` that holds both.

They serialise to the JSON keys ``search_state.json`` has always used, so a search saved by an earlier version
resumes; a key that version lacked takes its default, and a key this version does not know is ignored.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from workflow_rl.checks import check_float, check_int, check_types, read_json

from workflow_rl.files import check_inside
from workflow_rl.files import atomic_write
from workflow_rl.ranges import RANGES, key as range_key
from workflow_rl.checks import check_return
from workflow_rl.workflow import Workflow


class SearchInterrupted(Exception):
    """Ctrl-C during a workflow's training: its checkpoint is saved and ``--resume`` continues it. Defined with the
    search's records (the lowest search module) so every phase of a search can raise it without an import cycle."""

STATUSES = ("compliant", "not_compliant", "budget_cut")
"""A trained workflow reached the compliance threshold, hit its episode cap, or was cut by the search budget."""


class _Saved:
    """A dataclass saved as a JSON object under its field names; keys it does not know are ignored on load, so a
    newer file still loads."""

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict):
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


@dataclass(kw_only=True)
class Proposal(_Saved):
    """A workflow the search chose, and why; :meth:`dispatched` adds where and from what it trains."""

    workflow: str
    """its codes, e.g. 'D,E,OS,OH,U'"""
    reason: str
    ucb: float | None = None
    """the GP-UCB score, mean, std and beta behind the choice (None outside UCB selection)"""
    mean: float | None = None
    std: float | None = None
    beta: float | None = None
    iteration: int = 0
    """1-based dispatch order; 0 until dispatched"""
    run_dir: str = ""
    """its folder, relative to the search's RUN_DIR"""
    parent: str | None = None
    """the workflow whose weights it starts from"""
    parent_checkpoint: str | None = None
    budget: int = 0
    """training episodes claimed (all its seeds together): a full cap (or what is left) at dispatch, lowered while
    it trains to what it can still use, or topped up (``WorkflowSearch._review``)"""
    seed_budgets: list[int] | None = None
    """each seed's claim once lowered or topped up (they differ: each seed passes its gate at its own time); None:
    ``budget`` shared out evenly"""

    def shares(self, seeds: int) -> list[int]:
        """Each of its ``seeds`` seeds' claim."""
        return list(self.seed_budgets) if self.seed_budgets is not None else split_budget(self.budget, seeds)

    def dispatched(self, iteration: int, parent: "Record | None", budget: int) -> "Proposal":
        return dataclasses.replace(
            self, iteration=iteration, run_dir=f"workflows/{iteration:03d}_{self.workflow.replace(',', '-')}",
            parent=parent.workflow if parent else None, parent_checkpoint=parent.checkpoint if parent else None,
            budget=budget)


def split_budget(claim: int, seeds: int) -> list[int]:
    """A workflow's episode claim shared out over its seeds as evenly as possible (earlier seeds get the rest)."""
    return [claim // seeds + (1 if i < claim % seeds else 0) for i in range(seeds)]


@dataclass(kw_only=True)
class Record(_Saved):
    """A trained and evaluated workflow: one row of the GP log, one observation of the GP."""

    iteration: int
    workflow: str
    reason: str
    ucb_score: float | None = None
    posterior_mean: float | None = None
    posterior_std: float | None = None
    beta: float | None = None
    parent: str | None = None
    observed_reward: float
    """mean held-out return (over seeds, with several)"""
    observed_ci95: float
    compliance: float | None = None
    """training compliance at the end (mean over seeds); None without counted fixes"""
    eval_compliance: float | None = None
    episodes_trained: int
    budget_left: int | None = None
    """the search's budget left once this finished (set by the search when it records it)"""
    status: str
    """one of STATUSES"""
    wall_time: float
    started_at: float
    finished_at: float
    run_dir: str
    checkpoint: str
    """the kept policy (the best compliant seed's), relative to RUN_DIR"""
    seed_rewards: list[float] = field(default_factory=list)
    seed_status: list[str] = field(default_factory=list)
    seed_eval_compliance: list[float | None] = field(default_factory=list)
    gate_episodes: list[int | None] = field(default_factory=list)
    """per seed: its training episodes when the compliance gate fired (None: it never did)"""

    def eligible(self, threshold: float) -> bool:
        """Whether this workflow may be the answer: it passed the gate (and its post-gate phase) on every seed and
        its greedy policy's evaluated compliance is >= ``threshold`` (None: no fix was counted in evaluation, so no
        violation either)."""
        return self.status == "compliant" and (self.eval_compliance is None or self.eval_compliance >= threshold)


@dataclass(kw_only=True)
class Screened(_Saved):
    """A workflow's low-fidelity observation: the universal agent's held-out evaluation under it (no training)."""

    workflow: str
    observed_reward: float
    observed_ci95: float
    eval_compliance: float | None = None
    """evaluated compliance (None: no fix counted, so no violation either)"""
    fixes: int = 0

    def eligible(self, threshold: float) -> bool:
        """The universal agent's eligibility call: its evaluated compliance under the workflow >= ``threshold``."""
        return self.eval_compliance is None or self.eval_compliance >= threshold


SCREEN_SOURCES = ("computed", "cache", "shipped")
"""Where a search's screen came from (``search.screen_cache``)."""
PHASES = ("universal", "screen", "fine-tune")
"""A search that uses a universal agent (``search.universal``): training its own one (``--universal-fraction``),
evaluating it under every workflow, then fine-tuning the workflows the GP picks. None: an ordinary search."""


@dataclass
class SearchState:
    """Everything ``resume`` needs; saved atomically after every change."""

    config: dict
    """the SearchConfig's flat form"""
    iterations: list[Record] = field(default_factory=list)
    """finished workflows, in order of completion."""
    episodes_used: int = 0
    pending: list[Proposal] = field(default_factory=list)
    """dispatched, not yet finished proposals (each holds its budget claim)."""
    dispatched: int = 0
    finished: bool = False
    phase: str | None = None
    """one of PHASES for a search that uses a universal agent; None for an ordinary one"""
    screen: list[Screened] = field(default_factory=list)
    """the low-fidelity observations of all 120 workflows (phase 'fine-tune')"""
    universal_episodes: int = 0
    """training episodes of the search's own universal agent (part of ``episodes_used``)"""
    screen_source: str | None = None
    """where ``screen`` came from: 'computed', 'cache' or 'shipped' (``search.screen_cache``)"""
    screen_seconds: float | None = None
    """the wall time of getting ``screen`` (its evaluation, or reading it)"""
    wall_seconds: float = 0.0
    """the search's wall time up to its last save, over all its sessions: a resumed search's ``wall_time_s``
    goes on from it (what ran after the last save before a kill is redone, and counted once)"""

    def to_dict(self) -> dict:
        return {"config": self.config, "iterations": [r.to_dict() for r in self.iterations],
                "episodes_used": self.episodes_used, "pending": [p.to_dict() for p in self.pending],
                "dispatched": self.dispatched, "finished": self.finished, "phase": self.phase,
                "screen": [x.to_dict() for x in self.screen], "universal_episodes": self.universal_episodes,
                "screen_source": self.screen_source, "screen_seconds": self.screen_seconds,
                "wall_seconds": self.wall_seconds}

    @classmethod
    def from_dict(cls, d: dict) -> "SearchState":
        return cls(config=d["config"], iterations=[Record.from_dict(r) for r in d["iterations"]],
                   episodes_used=d["episodes_used"], pending=[Proposal.from_dict(p) for p in d["pending"]],
                   dispatched=d["dispatched"], finished=d.get("finished", False), phase=d.get("phase"),
                   screen=[Screened.from_dict(x) for x in d.get("screen", [])],
                   universal_episodes=d.get("universal_episodes", 0), screen_source=d.get("screen_source"),
                   screen_seconds=d.get("screen_seconds"), wall_seconds=d.get("wall_seconds", 0.0))

    def save(self, path: Path) -> None:
        atomic_json(self.to_dict(), path)

    @classmethod
    def load(cls, path: Path) -> "SearchState":
        """The state in ``path``, checked field by field; a ValueError naming the fix if it is missing, damaged or
        edited into something no search could have written."""
        if not path.is_file():
            raise ValueError(f"no search to resume in {path.parent} (missing {path.name}): start one with "
                             f"`workflow-rl search --out {path.parent}`")
        try:
            state = cls.from_dict(read_json(path.read_text()))
            state.check()
        except (json.JSONDecodeError, KeyError, TypeError, AttributeError, ValueError) as e:
            why = str(e) if isinstance(e, ValueError) and not isinstance(e, json.JSONDecodeError) else \
                type(e).__name__
            raise ValueError(f"{path} is damaged ({why}); start a new search in another folder") from None
        return state

    def check(self) -> None:
        """Types, ranges and consistency of a loaded state: what ``resume`` relies on (the episodes used are the
        sum of the recorded workflows', every dispatch is recorded or pending once)."""
        if not isinstance(self.config, dict):
            raise ValueError("config is not an object")
        check_saved_numbers(self.config)
        spell = "{}".format
        check_types(self, spell)
        for item in (*self.iterations, *self.pending, *self.screen):
            check_types(item, spell)
        if self.phase is not None and self.phase not in PHASES:
            raise ValueError(f"phase {self.phase!r} is not one of {', '.join(PHASES)}")
        check_int("universal_episodes", self.universal_episodes, 0)
        if self.screen_source is not None and self.screen_source not in SCREEN_SOURCES:
            raise ValueError(f"screen_source {self.screen_source!r} is not one of {', '.join(SCREEN_SOURCES)}")
        if self.screen_seconds is not None:
            check_float("screen_seconds", self.screen_seconds, 0.0)
        check_float("wall_seconds", self.wall_seconds, 0.0)
        check_int("episodes_used", self.episodes_used, 0)
        check_int("dispatched", self.dispatched, 0)
        for r in self.iterations:
            check_int("episodes_trained", r.episodes_trained, 0)
            if r.status not in STATUSES:
                raise ValueError(f"status {r.status!r} is not one of {', '.join(STATUSES)}")
        for p in self.pending:
            check_int("budget", p.budget, 0)
        if self.episodes_used != self.universal_episodes + sum(r.episodes_trained for r in self.iterations):
            raise ValueError(f"episodes_used {self.episodes_used} is not the sum of the recorded workflows' "
                             "episodes_trained (and universal_episodes)")
        numbers = [x.iteration for x in (*self.iterations, *self.pending)]
        if len(set(numbers)) != len(numbers) or any(not 1 <= n <= self.dispatched for n in numbers):
            raise ValueError(f"iteration numbers {sorted(numbers)} do not fit dispatched = {self.dispatched}")

    def check_against(self, cfg, out: Path, candidates: int) -> None:
        """What :meth:`check` cannot see alone, checked against the search's settings ``cfg`` (a SearchConfig) and
        its folder ``out``: counters within what the budget and the ``candidates`` workflows allow, every
        workflow valid and trained once, every path inside ``out``, and ``finished`` only on a search that is done.
        Run before a resumed search writes anything."""
        cap, seeds, total = cfg.workflow_cap, cfg.seeds_per_workflow, cfg.total_episodes
        check_int("dispatched", self.dispatched, 0, min(candidates, cfg.max_iterations or candidates))
        items = [*self.iterations, *self.pending]
        codes = [Workflow.parse(x.workflow).codes for x in items]
        if len(set(codes)) != len(codes):
            raise ValueError("a workflow is recorded or pending twice (each is trained once)")
        dirs = [check_inside("run_dir", x.run_dir, out) for x in items]
        if len(set(dirs)) != len(dirs):
            raise ValueError("two workflows share a run_dir")
        for r in self.iterations:
            check_int("episodes_trained", r.episodes_trained, 0, cap)
            check_inside("checkpoint", r.checkpoint, out)
            if r.budget_left is not None:
                check_int("budget_left", r.budget_left, 0, total)
            for name in ("compliance", "eval_compliance"):
                if getattr(r, name) is not None:
                    check_float(name, getattr(r, name), 0.0, 1.0)
            check_float("observed_ci95", r.observed_ci95, 0.0)
            check_float("wall_time", r.wall_time, 0.0)
            for v in [r.observed_reward, *r.seed_rewards]:   # returns of --eval-length steps (1e308 is finite)
                check_return(f"observed_reward of iteration {r.iteration}", v, cfg.eval_length)
            lists = (r.seed_rewards, r.seed_status, r.seed_eval_compliance, r.gate_episodes)
            if any(len(v) > seeds for v in lists):
                raise ValueError(f"iteration {r.iteration} lists more than {seeds} seed(s)")
            if any(x not in STATUSES for x in r.seed_status):
                raise ValueError(f"seed_status of iteration {r.iteration} is not one of {', '.join(STATUSES)}")
            for g in r.gate_episodes:
                if g is not None:
                    check_int("gate_episodes", g, 0, r.episodes_trained)
            if r.parent is not None:
                Workflow.parse(r.parent)
        for p in self.pending:
            check_int("budget", p.budget, 0, cap)
            if p.seed_budgets is not None:
                for b in p.seed_budgets:
                    check_int("seed_budgets", b, 0)
                if len(p.seed_budgets) != seeds or sum(p.seed_budgets) != p.budget:
                    raise ValueError(f"seed_budgets of iteration {p.iteration} are not {seeds} claim(s) summing to "
                                     f"its budget {p.budget}")
            if p.parent is not None:
                Workflow.parse(p.parent)
            if p.parent_checkpoint is not None:
                check_inside("parent_checkpoint", p.parent_checkpoint, out)
        for x in self.screen:
            check_return(f"the screen's mean of {x.workflow}", x.observed_reward, cfg.eval_length)
        claimed = sum(p.budget for p in self.pending)
        if self.episodes_used + claimed > total:
            raise ValueError(f"episodes_used {self.episodes_used} and the pending claims {claimed} exceed "
                             f"total_episodes {total}")
        if self.finished:
            more = (self.episodes_used < total and self.dispatched < candidates
                    and (cfg.max_iterations is None or self.dispatched < cfg.max_iterations))
            if self.pending or more:
                raise ValueError("finished is true but the search is not done (" + (
                    f"{len(self.pending)} workflow(s) pending" if self.pending else
                    f"{total - self.episodes_used} episodes and untried workflows left") + ")")


def atomic_json(obj, path: Path) -> None:
    """Write ``obj`` so that a crash leaves either the old file or the new one, never half of one."""
    with atomic_write(path, "w") as f:
        json.dump(obj, f, indent=2, default=_json_default)


def _json_default(x):
    if isinstance(x, (np.floating, np.integer)):
        return x.item()
    raise TypeError(type(x))


ALWAYS_SAVED = ("total_episodes", "inherit", "gp_beta", "n_init", "eval_episodes", "eval_length", "workflows",
                "max_iterations", "red_agent", "n_envs", "seed")
"""Settings every ``search_state.json`` ever written holds (the first version's own, which every version since kept):
one missing is a damaged file, not an old one, and taking today's default for it would resume another search (a
missing ``total_episodes`` became 100,000 episodes). Settings added since (``init_checkpoint``, ``batch_workflows``,
``seeds_per_workflow``...) are filled from ``search.config.LEGACY_SETTINGS`` or their default, which is how the
searches that predate them ran."""


def check_saved_numbers(config: dict) -> None:
    """Every setting every state file holds there (:data:`ALWAYS_SAVED`), and every number a state file's
    ``config`` holds within its range (``workflow_rl/ranges.py``), named as the file names it: a bad value there is
    a damaged file, not a flag the user typed (settings a resume changes are checked as flags, by the command
    line)."""
    missing = [name for name in ALWAYS_SAVED if name not in config]
    if missing:
        raise ValueError(f"its settings lack {', '.join(missing)}")
    for name, value in config.items():
        try:
            r = RANGES[range_key(name, "search")]
        except KeyError:   # not a number, or no setting of this version: the config's own checks see to it
            continue
        for v in value if isinstance(value, list) else () if value is None else (value,):
            r.check(name, v)
