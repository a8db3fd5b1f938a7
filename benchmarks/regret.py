"""Does the search beat random search? S independent search seeds x strategies x budgets, each scored against a
ground truth; resumable (a finished run is skipped, an interrupted one continued with ``--resume``).

    # 1. the ground truth (all 120 workflows, K seeds each, the search's protocol):
    python benchmarks/regret.py ground-truth --seeds-per-workflow 3 --out runs/gt-bline [search flags...]
    # 2. the regret runs against it:
    python benchmarks/regret.py runs --ground-truth runs/gt-bline/ground_truth.csv --strategies gp-ucb random \
        --budgets 60000 100000 --search-seeds 5 --out runs/regret-bline [search flags...]

Any further flags go to every ``workflow-rl search`` unchanged (e.g. ``--red-agent RedMeanderAgent --n-envs 100
--batch-workflows 4``); use the same ones for both steps, or the search refuses the ground truth (another protocol).
``runs`` writes ``OUT/regret.csv`` (one row per search) and ``OUT/regret.md``: per strategy and budget, median
simple regret with its distribution-free 95% interval, mean with its 95% t interval, how often the answer is in the
ground truth's top set (not distinguishable from its best), how often the ground truth holds the answer ineligible
(no regret is scored for those: counted apart), and how often two search seeds return the same answer.
"""
from __future__ import annotations

import argparse
import csv
import itertools
import json
import math
import sys
from pathlib import Path

import numpy as np

from workflow_rl.cli import main as workflow_rl
from workflow_rl.rl.evaluate import across_seeds
from workflow_rl.search.stats import median_interval

COLUMNS = ["strategy", "budget", "search_seed", "answer", "regret", "answer_rank", "answer_in_top_set",
           "answer_eligible_in_ground_truth", "confidence_set_size", "workflows_evaluated", "episodes_used",
           "wall_time_s"]


def run_search(out: Path, args: list[str]) -> dict:
    """One search into ``out``: skipped if finished, resumed if interrupted; returns its summary."""
    summary = out / "summary.json"
    if not summary.is_file():
        argv = ["search", "--resume", str(out)] if (out / "search_state.json").is_file() else \
            ["search", "--out", str(out), *args]
        rc = workflow_rl(argv + ["--no-progress"])
        if rc == 130:   # Ctrl-C: the search saved its state; run_search resumes it when run again
            raise SystemExit("interrupted: rerun the same command to continue (finished searches are skipped)")
        if rc != 0:
            raise SystemExit(f"error: `workflow-rl {' '.join(argv)}` exited with {rc}")
    return json.loads(summary.read_text())


def regret_runs(a, extra: list[str]) -> list[dict]:
    rows = []
    for strategy, budget, seed in itertools.product(a.strategies, a.budgets, range(a.search_seeds)):
        out = Path(a.out) / f"{strategy}-{budget}-seed{seed}"
        s = run_search(out, ["--strategy", strategy, "--total-episodes", str(budget), "--seed", str(seed),
                             "--ground-truth", a.ground_truth, *extra])
        rows.append({"strategy": strategy, "budget": budget, "search_seed": seed,
                     "answer": s["best_workflow_codes"], **{k: s.get(k) for k in COLUMNS[4:]}})
    return rows


def agreement(answers: list[str]) -> float:
    """Fraction of pairs of search seeds that return the same answer."""
    pairs = list(itertools.combinations(answers, 2))
    return sum(a == b for a, b in pairs) / len(pairs) if pairs else math.nan


def table(rows: list[dict]) -> str:
    """The markdown table: one line per (strategy, budget)."""
    lines = ["| strategy | budget | searches | median regret [95%] | mean regret ± 95% | answer in top set | "
             "answer ineligible in ground truth | two seeds agree | mean confidence-set size |",
             "|---|---:|---:|---|---|---:|---:|---:|---:|"]
    groups = {}
    for r in rows:
        groups.setdefault((r["strategy"], r["budget"]), []).append(r)
    for (strategy, budget), rs in groups.items():
        reg = [r["regret"] for r in rs if r["regret"] is not None]
        if reg:
            med, lo, hi = median_interval(reg)
            spread = across_seeds(reg)
            med_s, mean_s = f"{med:.2f} [{lo:.2f}, {hi:.2f}]", f"{spread['mean']:.2f} ± {spread['ci95']:.2f}"
        else:
            med_s = mean_s = "n/a"
        top = [r["answer_in_top_set"] for r in rs if r["answer_in_top_set"] is not None]
        ineligible = sum(r.get("answer_eligible_in_ground_truth") is False for r in rs)
        lines.append(f"| {strategy} | {budget:,} | {len(rs)} ({len(reg)} scored) | {med_s} | {mean_s} | "
                     f"{sum(top)}/{len(top)} | {ineligible} | {agreement([r['answer'] for r in rs]):.2f} | "
                     f"{sum(r['confidence_set_size'] for r in rs) / len(rs):.1f} |")
    return "\n".join(lines) + "\n"


def replay_runs(a) -> list[dict]:
    from workflow_rl.search.replay import replay_search

    variants = [(s, {"strategy": s}) for s in a.strategies]
    variants += [(f"gp-ucb beta={b:g}", {"strategy": "gp-ucb", "gp_beta": b}) for b in a.gp_betas]
    rows = []
    for (name, settings), budget in itertools.product(variants, a.budgets):
        for seed in range(a.search_seeds):
            r = replay_search(a.ground_truth_run, seed, total_episodes=budget, seeds_per_workflow=a.seeds_per_workflow,
                              **settings)
            rows.append({"strategy": name, "budget": budget, "search_seed": seed,
                         **{k: r.get(k) for k in COLUMNS[3:]}})
        print(table([r for r in rows if (r["strategy"], r["budget"]) == (name, budget)]).splitlines()[-1],
              flush=True)
    return rows


def against_random(rows: list[dict]) -> str:
    """Per budget, each strategy's regrets against random search's: the difference of medians and a two-sided
    Mann-Whitney U test (unpaired: the search seeds of two strategies share nothing)."""
    from scipy.stats import mannwhitneyu

    lines = []
    for budget in sorted({r["budget"] for r in rows}):
        at = [r for r in rows if r["budget"] == budget and r["regret"] is not None]
        base = [r["regret"] for r in at if r["strategy"] == "random"]
        for name in dict.fromkeys(r["strategy"] for r in at if r["strategy"] != "random"):
            reg = [r["regret"] for r in at if r["strategy"] == name]
            if len(base) < 2 or len(reg) < 2:
                continue
            p = mannwhitneyu(reg, base, alternative="two-sided").pvalue
            diff = float(np.median(reg) - np.median(base))
            bad = [sum(r.get("answer_eligible_in_ground_truth") is False for r in rows
                       if r["budget"] == budget and r["strategy"] == s) for s in (name, "random")]
            lines.append(f"- budget {budget:,}: {name} median regret {np.median(reg):.2f} vs random "
                         f"{np.median(base):.2f} (difference {diff:+.2f}; Mann-Whitney U two-sided p = {p:.3g}, "
                         f"{len(reg)} vs {len(base)} scored searches; answers the ground truth holds ineligible: "
                         f"{bad[0]} vs {bad[1]})")
    return "\n".join(lines) + ("\n" if lines else "")


def write(rows: list[dict], out: Path, name: str) -> None:
    with open(out / f"{name}.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
        w.writeheader()
        w.writerows({k: "" if v is None else v for k, v in r.items()} for r in rows)
    (out / f"{name}.md").write_text(table(rows) + "\n" + against_random(rows))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="step", required=True)
    g = sub.add_parser("ground-truth", help="all 120 workflows, K seeds each")
    g.add_argument("--seeds-per-workflow", type=int, default=3)
    g.add_argument("--out", required=True)
    r = sub.add_parser("runs", help="search seeds x strategies x budgets against a ground truth")
    r.add_argument("--ground-truth", required=True)
    r.add_argument("--strategies", nargs="+", default=["gp-ucb", "random"])
    r.add_argument("--budgets", nargs="+", type=int, default=[60_000, 100_000])
    r.add_argument("--search-seeds", type=int, default=5)
    r.add_argument("--out", required=True)
    y = sub.add_parser("replay", help="many search seeds replayed against a finished ground-truth run")
    y.add_argument("--ground-truth-run", required=True, help="the folder of a finished `search --exhaustive`")
    y.add_argument("--strategies", nargs="+", default=["gp-ucb", "random"])
    y.add_argument("--budgets", nargs="+", type=int, default=[60_000, 100_000])
    y.add_argument("--search-seeds", type=int, default=200)
    y.add_argument("--seeds-per-workflow", type=int, default=1)
    y.add_argument("--gp-betas", nargs="*", type=float, default=[],
                   help="also replay GP-UCB with each of these fixed betas (rows 'gp-ucb beta=B')")
    y.add_argument("--out", required=True)
    a, extra = p.parse_known_args(argv)
    if a.step == "ground-truth":
        s = run_search(Path(a.out), ["--exhaustive", "--seeds-per-workflow", str(a.seeds_per_workflow), *extra])
        print(s.get("ground_truth_statement"))
        return 0
    Path(a.out).mkdir(parents=True, exist_ok=True)
    if a.step == "replay":
        if extra:
            p.error(f"replay takes no search flags (the protocol is the ground truth's): {' '.join(extra)}")
        rows = replay_runs(a)
    else:
        rows = regret_runs(a, extra)
    write(rows, Path(a.out), a.step if a.step == "replay" else "regret")
    print(table(rows) + "\n" + against_random(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
