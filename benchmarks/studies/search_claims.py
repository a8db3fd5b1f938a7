"""How much the claim rule shortens a batched search (issue H's 100k search target).

A batched search (``--batch-workflows Q``) runs workflows side by side, each holding a claim on the search budget
(``--claims``, docs/search.md): ``whole`` (a full cap until finished), ``lowered`` (a full cap, lowered at
the gate to what it can still use) or ``elastic`` (the default: a new workflow starts once a typical workflow's cost is
unclaimed; claims grow while training; a workflow at its claim waits). This runs the same search once per rule in
one process and reports for each:

* ``rounds``: episode rounds the batch ran (every round steps all slots 100 steps and updates them 4 times). On a
  GPU a round costs about the same whatever the number of workflows in it (the loop is launch-bound), so rounds
  are the device-independent measure of a batched search's wall time there;
* the most workflows in flight, workflows trained, wall time on this machine, and the answer.

    PYTHONPATH=. python benchmarks/studies/search_claims.py --total-episodes 100000 --batch-workflows 16 \
        --out runs/claims

One real search per rule is one sample (the runs' GP picks diverge once their timing does). ``--replay GT_RUN``
instead replays ``--search-seeds`` searches per rule against a finished exhaustive run (``search.ground_truth_replay``): the real
search loop, with a batch modelled round by round — every running seed trains ``n_envs`` episodes per round, passes
its gate at the episode count the ground truth recorded for that seed and stops at its recorded cost — so the rules
are compared on the same searches in seconds, on rounds and on the answers' regret (paired by search seed).
``oracle`` (replay only) is a bound no rule can beat at dispatch: every workflow claims exactly what it will use. The
replay trains from scratch (no inheritance: real inherited workflows pass their gates sooner).

    PYTHONPATH=. python benchmarks/studies/search_claims.py --replay runs/gt-bline-pg40 --search-seeds 100 \
        --out runs/claims

Results: BENCHMARKS.md ("Search: how workflows share the budget").
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

import numpy as np
from scipy import stats

from workflow_rl.search.batched_executor import BatchedExecutor
from workflow_rl.search.config import CLAIMS
from workflow_rl.search.ground_truth_replay import ReplayExecutor, draw_seeds, replay_search, replayed_record
from workflow_rl.search.search import SearchConfig, SearchInterrupted, WorkflowSearch
from workflow_rl.search.stats import median_interval


class CountingExecutor(BatchedExecutor):
    """The batched executor, counting episode rounds and the most workflows in flight."""

    def __init__(self, workflows: int):
        super().__init__(workflows)
        self.rounds, self.most = 0, 0

    def submit(self, prop) -> None:
        super().submit(prop)
        self.most = max(self.most, len(self.props))
        if not hasattr(self.trainer, "_counted"):
            orig = self.trainer.run_round

            def counted():
                self.rounds += 1
                return orig()

            self.trainer.run_round, self.trainer._counted = counted, True


TINY = dict(n_envs=8, max_episodes=4, post_gate_episodes=2, min_episodes=1, min_fixes=1, compliance_threshold=0.01,
            eval_episodes=8, update_epochs=1, num_minibatches=2)
"""``--tiny``: gates that fire in the first episodes, caps of 48, one PPO epoch of two minibatches an update (a smoke
test of this script's rounds and claims, not a measurement)."""


class RoundsReplay(ReplayExecutor):
    """A batched executor replayed: ``Q`` slots, each running seed ``n_envs`` episodes further per round, its gate
    and its end where the ground truth recorded them. As ``BatchedExecutor``: claims reported lowered at the gate,
    an early return on a lowered claim with a slot free and, with elastic claims, seeds that wait at their claims,
    ``needs``/``extend`` for top-ups, and a stall (every running workflow waiting) returned once, then the newest
    cut. ``oracle``: every workflow reports exactly what it will use from dispatch."""

    q, oracle = 16, False   # set per run by ``replay_rows``

    def __init__(self, *args):
        super().__init__(*args)
        self.n = args[-1]
        self.live: dict[int, dict] = {}
        self.done: list = []
        self.rounds = self.most = self.cuts = 0
        self.elastic = self._stalled = False
        self._known: set[int] = set()   # (oracle) workflows whose exact claims the search has seen

    def open(self, job) -> None:
        super().open(job)
        self.elastic, self.cap = job.cfg.claims == "elastic", job.cfg.train.budget

    def free(self) -> int:
        return 0 if self.done else self.q - len(self.live)

    def running(self) -> int:
        return len(self.live) + len(self.done)

    def submit(self, prop) -> None:
        truth, costs = self.records[prop.workflow], self.costs[prop.workflow]
        pick = draw_seeds(len(truth.seed_rewards), self.seeds, self.rng)
        self.observed[prop.workflow] = pick
        gates = [truth.gate_episodes[i] if i < len(truth.gate_episodes) and truth.seed_status[i] == "compliant"
                 else None for i in pick]
        self.live[prop.iteration] = {
            "prop": prop, "truth": truth, "pick": pick, "cost": [costs[i] for i in pick], "trained": [0] * self.seeds,
            "gates": gates, "cut": False}
        self._set_shares(prop.iteration, prop.shares(self.seeds))
        self.most = max(self.most, len(self.live))
        self._stalled = False

    def _set_shares(self, it: int, shares: list[int]) -> None:
        w = self.live[it]
        w["shares"], w["ends"] = list(shares), [min(c, s) for c, s in zip(w["cost"], shares)]

    def needs(self) -> dict[int, list[int]] | None:
        """Per running workflow, per seed, what it will use in all once its gate passed (its cost), else its cap."""
        if not self.elastic:
            return None
        return {it: [c if (g is not None and d >= g) or d >= c else self.cap
                     for d, c, g in zip(w["trained"], w["cost"], w["gates"])] for it, w in self.live.items()}

    def extend(self, it: int, shares: list[int]) -> None:
        self._set_shares(it, shares)
        self._stalled = False

    def _finished(self, w: dict) -> bool:
        return w["trained"] == w["ends"] and (w["ends"] == w["cost"] or w["cut"] or not self.elastic)

    def _complete(self, it: int) -> None:
        w = self.live.pop(it)
        self.cuts += w["ends"] != w["cost"]
        prop = dataclasses.replace(w["prop"], budget=sum(w["ends"]), seed_budgets=list(w["ends"]))
        self.done.append((w["prop"], replayed_record(prop, w["truth"], self.seeds, self.rng,
                                                     self.costs[prop.workflow], w["pick"])))

    def claims(self) -> dict[int, list[int]]:
        if self.oracle:   # a bound on any claim rule: every workflow claims exactly what it will use, from dispatch
            return {it: list(w["ends"]) for it, w in self.live.items()}
        return {it: [e if d >= e or (g is not None and d >= g) else s
                     for d, e, g, s in zip(w["trained"], w["ends"], w["gates"], w["shares"])]
                for it, w in self.live.items()}

    def wait_one(self):
        claimed = lambda: sum(map(sum, self.claims().values()))  # noqa: E731
        fresh = [it for it in self.live if it not in self._known]
        if self.oracle and fresh and self.free() > 0:   # the oracle's claims hold from dispatch: report them at once
            self._known.update(fresh)
            return None
        before = claimed()
        while not self.done:
            if self.elastic and all(w["trained"] == w["ends"] for w in self.live.values()):
                if not self._stalled:       # every running workflow waits at its claim: let the search top up
                    self._stalled = True
                    return None
                newest = max(self.live)                    # it could not: the newest is cut where it stands
                self.live[newest]["cut"] = True
                self._complete(newest)
                continue
            self.rounds += 1
            for it, w in list(self.live.items()):
                w["trained"] = [min(d + self.n, e) for d, e in zip(w["trained"], w["ends"])]
                if self._finished(w):
                    self._complete(it)
            if not self.done and self.free() > 0 and claimed() < before:
                return None
        return self.done.pop(0)

    def stats(self) -> dict:
        return {"rounds": self.rounds, "most_in_flight": self.most, "cut": self.cuts}


def replay_rows(args) -> list[dict]:
    """Per mode, ``--search-seeds`` replayed searches: rounds, most in flight and regret per search, with medians;
    each mode's regrets compared with the first mode's on the same search seeds (paired)."""
    rows = []
    for mode in args.modes:
        RoundsReplay.q, RoundsReplay.oracle = args.batch_workflows, mode == "oracle"
        runs = [replay_search(args.replay, seed, executor_class=RoundsReplay, total_episodes=args.total_episodes,
                              claims="lowered" if mode == "oracle" else mode, batch_workflows=args.batch_workflows,
                              strategy=args.strategy)
                for seed in range(args.search_seeds)]
        rounds = np.array([r["rounds"] for r in runs])
        regrets = [r["regret"] for r in runs]
        _, lo, hi = median_interval(rounds)
        rows.append({"mode": mode, "searches": len(runs), "median_rounds": float(np.median(rounds)),
                     "median_rounds_95": [lo, hi], "mean_rounds": float(rounds.mean()),
                     "median_most_in_flight": float(np.median([r["most_in_flight"] for r in runs])),
                     "median_workflows": float(np.median([r["workflows_evaluated"] for r in runs])),
                     "mean_cut": float(np.mean([r["cut"] for r in runs])), "max_cut": int(max(r["cut"] for r in runs)),
                     "median_regret": float(np.median([g for g in regrets if g is not None])),
                     "no_regret_scored": sum(g is None for g in regrets),
                     **paired_regret(regrets, rows[0]["regrets"] if rows else None),
                     "rounds": rounds.tolist(), "regrets": regrets})
        print(json.dumps({k: v for k, v in rows[-1].items() if k not in ("rounds", "regrets")}), flush=True)
    return rows


def paired_regret(regrets: list, base: list | None) -> dict:
    """Regret minus the first mode's on the same search seeds (both scored): mean with its 95% t interval and the
    Wilcoxon signed-rank p (two-sided); {} for the first mode."""
    if base is None:
        return {}
    d = np.array([a - b for a, b in zip(regrets, base) if a is not None and b is not None])
    if len(d) < 2:
        return {}
    half = float(stats.t.ppf(0.975, len(d) - 1) * d.std(ddof=1) / np.sqrt(len(d)))
    p = float(stats.wilcoxon(d).pvalue) if np.any(d != 0) else 1.0
    return {"regret_vs_first": {"mean": float(d.mean()), "ci95": [float(d.mean()) - half, float(d.mean()) + half],
                                "wilcoxon_p": p, "pairs": len(d), "same_answer": int(np.sum(d == 0))}}


def run(mode: str, args) -> dict:
    cfg = SearchConfig(total_episodes=args.total_episodes, batch_workflows=args.batch_workflows, seed=args.seed,
                       red_agent=args.red_agent, device=args.device, claims=mode,
                       **({"n_envs": args.n_envs} if args.n_envs else {}), **(TINY if args.tiny else {}))
    ex = CountingExecutor(args.batch_workflows)
    t0 = time.perf_counter()
    s = WorkflowSearch(cfg, Path(args.out) / mode, progress=False)
    if args.cprofile:   # where the search's wall time goes, Python's view (a GPU's waits show as sync calls)
        import cProfile
        import pstats

        prof = cProfile.Profile()
        summary = prof.runcall(s.run, ex)
        prof.dump_stats(Path(args.out) / mode / "search.prof")
        with open(Path(args.out) / f"profile_{mode}.txt", "w") as f:
            pstats.Stats(prof, stream=f).sort_stats("cumulative").print_stats(60)
            pstats.Stats(prof, stream=f).sort_stats("tottime").print_stats(40)
    else:
        summary = s.run(ex)
    return {"mode": mode, "rounds": ex.rounds, "most_in_flight": ex.most,
            "workflows": len(s.state.iterations), "episodes_used": summary["episodes_used"],
            "wall_s": round(time.perf_counter() - t0, 1), "answer": summary["best_workflow_codes"]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--total-episodes", type=int, default=100_000)
    p.add_argument("--batch-workflows", type=int, default=16)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--red-agent", default="B_lineAgent")
    p.add_argument("--device", default="cpu")
    p.add_argument("--n-envs", type=int, help="envs per workflow (default: the search's; fewer make a CPU check "
                                               "affordable but change the protocol, so compare rules, not values)")
    p.add_argument("--modes", nargs="+", default=["elastic", "lowered", "whole"], choices=[*CLAIMS, "oracle"],
                   help="claim rules (--claims of the search); with --replay also 'oracle' (every workflow claims "
                        "exactly what it will use from dispatch: a bound)")
    p.add_argument("--tiny", action="store_true", help="a smoke test at toy scale (tests/test_benchmarks.py)")
    p.add_argument("--replay", metavar="GT_RUN", help="replay searches against this finished exhaustive run instead")
    p.add_argument("--search-seeds", type=int, default=100, help="with --replay: searches per mode")
    p.add_argument("--strategy", default="gp-ucb", help="with --replay: the searches' strategy")
    p.add_argument("--cprofile", action="store_true", help="run each search under cProfile: OUT/profile_MODE.txt "
                                                            "(its wall time is then inflated; compare shares)")
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    if a.replay:
        rows = replay_rows(a)
    else:
        rows = []
        for mode in a.modes:
            try:
                rows.append(run(mode, a))
            except SearchInterrupted:
                print(f"interrupted during mode {mode}: rows so far are in {a.out}/claims.json", file=sys.stderr)
                break
            print(json.dumps(rows[-1]), flush=True)
    Path(a.out).mkdir(parents=True, exist_ok=True)
    (Path(a.out) / "claims.json").write_text(json.dumps({"args": vars(a), "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
