"""Replay searches against a finished ground truth instead of training.

Each workflow a search proposes is answered from what the exhaustive run recorded for it, so thousands of search seeds
run in minutes and strategies can be compared with tight intervals.

What a replayed workflow observes: ``seeds_per_workflow`` of the ground truth's K seeds, drawn without replacement
(their held-out returns, training statuses and evaluated compliance, exactly as recorded); each costs the episodes
that seed cost from scratch (its gate plus the post-gate phase, or its cap), and a seed whose share of the claim is
smaller is ``budget_cut``. The real search loop chooses,
claims and decides (``WorkflowSearch.explore``); only the training is looked up.

What it leaves out: inheritance. A replayed workflow has the value and the cost it had from scratch. The protocol
makes the value independent of the starting weights by design (docs/search.md), but inheritance makes a
real workflow reach its gate sooner, so a real search sees somewhat more workflows for the same budget than its
replay. And the observation is one of the seeds the ground-truth mean is made of (for K = 3, a third of it): that does
*not* flatter every strategy alike. Where workflows differ little (the B_line ground truth: no evidence of any
difference among eligible workflows), picking the highest observed seed among many workflows picks a high share of
the ground-truth mean by construction, so plain regret rewards seeing many workflows once. Hence a second score,
``heldout_regret``: the answer is valued by the mean of its ground-truth seeds the search did *not* observe
(independent of what drove the choice), against the ground truth's best mean (a constant per file, so differences
between strategies are unbiased). Real searches (``benchmarks/studies/regret.py runs``) observe fresh seeds, inheritance
included; the replay is the cheap, many-seed comparison of the *choice* rules.
"""
from __future__ import annotations

import contextlib
import io
import tempfile
from pathlib import Path

import numpy as np

from workflow_rl.rl.evaluate import across_seeds
from workflow_rl.search.config import SearchConfig
from workflow_rl.search.executors import SerialExecutor
from workflow_rl.search.ground_truth import load_ground_truth, score_answer
from workflow_rl.search.outputs import answer_summary
from workflow_rl.search.records import Proposal, Record, SearchState
from workflow_rl.search.search import WorkflowSearch


def load_exhaustive(run_dir: str | Path) -> tuple[SearchConfig, dict[str, Record], Path]:
    """A finished ``search --exhaustive`` run: its settings, its records by workflow codes and its
    ``ground_truth.csv``; a ValueError naming the problem otherwise."""
    run_dir = Path(run_dir)
    state_path, csv_path = run_dir / "search_state.json", run_dir / "ground_truth.csv"
    if not state_path.is_file() or not csv_path.is_file():
        raise ValueError(f"{run_dir} is not a finished ground-truth run (needs search_state.json and "
                         "ground_truth.csv: `workflow-rl search --exhaustive --seeds-per-workflow 3 --out DIR`)")
    state = SearchState.load(state_path)
    records = {r.workflow: r for r in state.iterations}
    if len(records) < 120:
        raise ValueError(f"{run_dir} holds {len(records)} of 120 workflows: a search may propose any of them; "
                         f"finish it first (`workflow-rl search --resume {run_dir}`)")
    return SearchConfig.from_dict(state.config), records, csv_path


class ReplayExecutor(SerialExecutor):
    """The serial executor's queue, one proposal at a time, but each answered from ground-truth records."""

    def __init__(self, records: dict[str, Record], seeds: int, rng: np.random.Generator, post_gate_episodes: int,
                 n_envs: int):
        super().__init__()
        self.records, self.seeds, self.rng = records, seeds, rng
        self.costs = {w: seed_costs(r, post_gate_episodes, n_envs) for w, r in records.items()}
        self.observed: dict[str, list[int]] = {}   # workflow -> the ground-truth seeds the search saw

    def wait_one(self) -> tuple[Proposal, Record]:
        prop = self.queue.pop(0)
        truth = self.records[prop.workflow]
        pick = draw_seeds(len(truth.seed_rewards), self.seeds, self.rng)
        self.observed[prop.workflow] = pick
        return prop, replayed_record(prop, truth, self.seeds, self.rng, self.costs[prop.workflow], pick)

    def stats(self) -> dict:
        """What a replay reports beyond the search's answer (none here; subclasses that model time add theirs)."""
        return {}

    def heldout_value(self, workflow: str | None) -> float | None:
        """Mean of ``workflow``'s ground-truth seeds the search did not observe (None: none left, or not seen)."""
        if workflow not in self.observed:
            return None
        rest = [v for i, v in enumerate(self.records[workflow].seed_rewards) if i not in self.observed[workflow]]
        return float(np.mean(rest)) if rest else None


def draw_seeds(k: int, seeds: int, rng: np.random.Generator) -> list[int]:
    """``seeds`` of a ground truth's ``k`` seeds, without replacement, sorted."""
    if seeds > k:
        raise ValueError(f"the ground truth has {k} seeds per workflow: replay at most --seeds-per-workflow {k}")
    return sorted(rng.choice(k, size=seeds, replace=False).tolist())


def seed_costs(truth: Record, post_gate_episodes: int, n_envs: int) -> list[int]:
    """What each of ``truth``'s seeds cost: a seed that passed the gate its gate plus the post-gate phase, the others
    (which ran to their cap) share the rest of the recorded total equally."""
    k = len(truth.seed_rewards)
    gates = list(truth.gate_episodes) + [None] * (k - len(truth.gate_episodes))
    passed = {i: gates[i] + post_gate_episodes * n_envs for i in range(k)
              if truth.seed_status[i] == "compliant" and gates[i] is not None}
    rest = [i for i in range(k) if i not in passed]
    left = truth.episodes_trained - sum(passed.values())
    return [passed[i] if i in passed else left // len(rest) + (1 if rest.index(i) < left % len(rest) else 0)
            for i in range(k)]


def replayed_record(prop: Proposal, truth: Record, seeds: int, rng: np.random.Generator,
                    costs: list[int] | None = None, pick: list[int] | None = None) -> Record:
    """What training ``prop`` with ``seeds`` seeds would have recorded: ``seeds`` of ``truth``'s seeds at random, each
    at its own cost (``costs``, per ground-truth seed; default: the total shared equally); a seed whose share of the
    claim is smaller than its cost is cut there (``budget_cut``: it counts, but cannot be the answer). ``pick``: which
    seeds (default: drawn from ``rng``)."""
    k = len(truth.seed_rewards)
    costs = costs or [truth.episodes_trained // k] * k
    pick = draw_seeds(k, seeds, rng) if pick is None else pick
    values = [truth.seed_rewards[i] for i in pick]
    statuses, episodes = [], 0
    for i, share in zip(pick, prop.shares(seeds)):
        cut = costs[i] > share
        statuses.append("budget_cut" if cut else truth.seed_status[i])
        episodes += share if cut else costs[i]
    eval_comp = [c for c in (truth.seed_eval_compliance[i] for i in pick) if c is not None]
    status = ("compliant" if all(s == "compliant" for s in statuses) else
              "budget_cut" if "budget_cut" in statuses else "not_compliant")
    return Record(
        iteration=prop.iteration, workflow=prop.workflow, reason=prop.reason, ucb_score=prop.ucb,
        posterior_mean=prop.mean, posterior_std=prop.std, beta=prop.beta, parent=prop.parent,
        observed_reward=float(np.mean(values)),
        observed_ci95=across_seeds(values)["ci95"] if seeds > 1 else 0.0,   # one seed's episode interval: not kept
        compliance=truth.compliance, eval_compliance=float(np.mean(eval_comp)) if eval_comp else None,
        episodes_trained=episodes, status=status, wall_time=0.0, started_at=0.0, finished_at=0.0,
        run_dir=prop.run_dir, checkpoint="", seed_rewards=values, seed_status=statuses,
        seed_eval_compliance=[truth.seed_eval_compliance[i] for i in pick],
        gate_episodes=[truth.gate_episodes[i] if i < len(truth.gate_episodes) else None for i in pick])


def replay_search(ground_truth_run: str | Path, seed: int, executor_class=ReplayExecutor, **settings) -> dict:
    """One search replayed against ``ground_truth_run`` (a finished exhaustive run) with the search settings given
    (``strategy``, ``total_episodes``, ``seeds_per_workflow`` (default 1), ``n_init``, ...; the protocol is the ground
    truth's); its answer, confidence-set size and score against the ground truth. ``executor_class``: a
    :class:`ReplayExecutor` (sub)class (its constructor's arguments); whatever its ``stats()`` returns joins the
    result."""
    base, records, csv_path = load_exhaustive(ground_truth_run)
    cfg = SearchConfig.from_dict({**base.to_dict(), "workflows": None, "batch_workflows": 1, "max_iterations": None,
                                  "init_checkpoint": None, "ground_truth": str(csv_path), "seed": seed,
                                  "device": "cpu", "cuda_graphs": False,   # nothing is trained
                                  "seeds_per_workflow": 1, "design_start": SearchConfig().design_start,   # today's
                                  "claims": SearchConfig().claims, **settings})
    table = load_ground_truth(csv_path, cfg)
    with tempfile.TemporaryDirectory() as tmp, contextlib.redirect_stdout(io.StringIO()):
        search = WorkflowSearch(cfg, tmp, progress=False)
        executor = executor_class(records, cfg.seeds_per_workflow, np.random.default_rng([seed, 7]),
                                  cfg.train.post_gate_episodes, cfg.train.n_envs)
        search.explore(executor)
        summary = answer_summary(search)
    answer = summary["best_workflow_codes"]
    score = score_answer(table, answer)
    heldout = executor.heldout_value(answer)
    best = max((r["mean"] for r in table.values() if r["eligible"]), default=None)
    return {"answer": answer, "confidence_set_size": summary["confidence_set_size"],
            "workflows_evaluated": len(search.state.iterations), "episodes_used": search.state.episodes_used,
            **score, "heldout_regret": None if score["regret"] is None or heldout is None else best - heldout,
            **executor.stats()}
