"""Does the search beat random search? S independent search seeds x strategies x budgets, each scored against a
ground truth; resumable (a finished run is skipped, an interrupted one continued with ``--resume``).

    # 1. the ground truth (all 120 workflows, K seeds each, the search's protocol):
    python benchmarks/studies/regret.py ground-truth --seeds-per-workflow 3 --out runs/gt-bline [search flags...]
    # 2. the regret runs against it:
    python benchmarks/studies/regret.py runs --ground-truth runs/gt-bline/ground_truth.csv --strategies gp-ucb random \
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

from workflow_rl.cli import job
from workflow_rl.runs.search import search
from workflow_rl.rl.evaluate import across_seeds
from workflow_rl.search.ground_truth import eligible_seeds
from workflow_rl.search.stats import median_interval, pooled_variance

COLUMNS = ["strategy", "budget", "search_seed", "answer", "regret", "answer_rank", "answer_in_top_set",
           "answer_eligible_in_ground_truth", "confidence_set_size", "workflows_evaluated", "episodes_used",
           "wall_time_s", "heldout_regret"]


def run_search(out: Path, args: list[str]) -> dict:
    """One search into ``out``: skipped if finished, resumed if interrupted; returns its summary."""
    summary = out / "summary.json"
    if not summary.is_file():
        argv = ["search", "--resume", str(out)] if (out / "search_state.json").is_file() else \
            ["search", "--out", str(out), *args]
        try:
            rc = search(*job(argv + ["--no-progress"])).exit_code
        except ValueError as e:
            raise SystemExit(f"error: `workflow-rl {' '.join(argv)}`: {e}") from None
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


def _median_cell(values: list[float]) -> str:
    if not values:
        return "n/a"
    med, lo, hi = median_interval(values)
    return f"{med:.2f} [{lo:.2f}, {hi:.2f}]"


def table(rows: list[dict]) -> str:
    """The markdown table: one line per (strategy, budget); replayed rows also get the held-out regret (the answer
    valued by the ground-truth seeds the search did not see: ``workflow_rl.search.ground_truth_replay``)."""
    heldout = any(r.get("heldout_regret") is not None for r in rows)
    lines = ["| strategy | budget | searches | median regret [95%] | mean regret ± 95% | "
             + ("median held-out regret [95%] | " if heldout else "") + "answer in top set | "
             "answer ineligible in ground truth | two seeds agree | distinct answers | mean confidence-set size |",
             "|---|---:|---:|---|---|" + ("---|" if heldout else "") + "---:|---:|---:|---:|---:|"]
    groups = {}
    for r in rows:
        groups.setdefault((r["strategy"], r["budget"]), []).append(r)
    for (strategy, budget), rs in groups.items():
        reg = [r["regret"] for r in rs if r["regret"] is not None]
        mean_s = "n/a"
        if reg:
            spread = across_seeds(reg)
            mean_s = f"{spread['mean']:.2f} ± {spread['ci95']:.2f}"
        held = ([r["heldout_regret"] for r in rs if r.get("heldout_regret") is not None],) if heldout else ()
        top = [r["answer_in_top_set"] for r in rs if r["answer_in_top_set"] is not None]
        ineligible = sum(r.get("answer_eligible_in_ground_truth") is False for r in rs)
        lines.append(f"| {strategy} | {budget:,} | {len(rs)} ({len(reg)} scored) | {_median_cell(reg)} | {mean_s} | "
                     + "".join(f"{_median_cell(h)} | " for h in held) +
                     f"{sum(top)}/{len(top)} | {ineligible} | {agreement([r['answer'] for r in rs]):.2f} | "
                     f"{len({r['answer'] for r in rs})} | "
                     f"{sum(r['confidence_set_size'] for r in rs) / len(rs):.1f} |")
    return "\n".join(lines) + "\n"


def replay_runs(a) -> list[dict]:
    from workflow_rl.search.ground_truth_replay import replay_search

    variants = [(s, {"strategy": s}) for s in a.strategies]
    variants += [(f"gp-ucb beta={b:g}", {"strategy": "gp-ucb", "gp_beta": b}) for b in a.gp_betas]
    if a.design_start is not None:   # random search has no design: its rows keep their name
        variants = [(n if s["strategy"].startswith("random") else f"{n} start={a.design_start}",
                     {**s, "design_start": a.design_start}) for n, s in variants]
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


def against_random(rows: list[dict], key: str = "regret", baseline: str = "random") -> str:
    """Per budget, each strategy's ``key`` (regret, or the replay's held-out regret) against random search's (or the
    ``baseline`` row's): the
    difference of medians and a two-sided Mann-Whitney U test (unpaired: the search seeds of two strategies share
    nothing); and the answers the ground truth holds ineligible, with Fisher's exact test against random's."""
    from scipy.stats import fisher_exact, mannwhitneyu

    what = "median regret" if key == "regret" else "median held-out regret"
    lines = []
    for budget in sorted({r["budget"] for r in rows}):
        at = [r for r in rows if r["budget"] == budget and r.get(key) is not None]
        base = [r[key] for r in at if r["strategy"] == baseline]
        for name in dict.fromkeys(r["strategy"] for r in at if r["strategy"] != baseline):
            reg = [r[key] for r in at if r["strategy"] == name]
            if len(base) < 2 or len(reg) < 2:
                continue
            p = mannwhitneyu(reg, base, alternative="two-sided").pvalue
            diff = float(np.median(reg) - np.median(base))
            n = [sum(r["strategy"] == s for r in rows if r["budget"] == budget) for s in (name, baseline)]
            bad = [sum(r.get("answer_eligible_in_ground_truth") is False for r in rows
                       if r["budget"] == budget and r["strategy"] == s) for s in (name, baseline)]
            fisher = fisher_exact([[bad[0], n[0] - bad[0]], [bad[1], n[1] - bad[1]]]).pvalue
            lines.append(f"- budget {budget:,}: {name} {what} {np.median(reg):.2f} vs {baseline} "
                         f"{np.median(base):.2f} (difference {diff:+.2f}; Mann-Whitney U two-sided p = {p:.3g}, "
                         f"{len(reg)} vs {len(base)} scored searches); answers the ground truth holds ineligible: "
                         f"{bad[0]}/{n[0]} vs {bad[1]}/{n[1]} (Fisher exact p = {fisher:.3g})")
    return "\n".join(lines) + ("\n" if lines else "")


def score_weights(row: dict, seeds: dict[str, list[float]], best: float, key: str) -> dict[tuple[str, int], float]:
    """The ground-truth seed values a search's score is made of, as weights: plain regret is best minus the mean of
    the answer's K seeds (each weight 1/K); the replay's held-out regret is best minus the mean of the seeds the
    search did not see (recovered here as the seed left out whose removal gives the recorded value; equal seeds
    give equal values whichever is taken)."""
    vals = seeds[row["answer"]]
    if key == "regret":
        return {(row["answer"], s): 1 / len(vals) for s in range(len(vals))}
    seen = min(range(len(vals)), key=lambda j: abs(best - np.mean([v for i, v in enumerate(vals) if i != j])
                                                    - row[key]))
    return {(row["answer"], s): 1 / (len(vals) - 1) for s in range(len(vals)) if s != seen}


def against_random_noise_aware(rows: list[dict], gt_csv: str | Path, baseline: str = "random",
                               key: str = "regret") -> str:
    """Mean ``key`` (regret, or the replay's held-out regret) against random's (or the ``baseline`` row's),
    counting the ground truth's own noise.

    Why: every search that answers workflow i is scored by the same ground-truth seeds, whose errors are shared. A
    strategy that keeps answering the same few workflows inherits those few errors, so a U test over its searches,
    which treats them as independent, overstates the evidence (its effective sample is the number of distinct
    answers, not of searches). Each search's score is best minus a weighted sum of seed values x (``score_weights``;
    best is one constant per file), so mean score_A - mean score_B = sum (w_B - w_A) x over the strategies' mean
    weights, whose variance is the ground truth's, pooled seed variance x sum (w_A - w_B)^2, plus the searches' own,
    var_A / n_A + var_B / n_B; a two-sided z test on that. For plain regret this is the difference of answer
    frequencies times each answer's mean, with variance seed variance / K per answer."""
    from scipy.stats import norm

    with open(gt_csv, newline="") as f:
        seeds = eligible_seeds(list(csv.DictReader(f)))
    pooled = pooled_variance(seeds) or 0.0
    if seeds and not pooled:
        return ("- (no comparison counting the ground truth's noise: it has one seed per workflow, or seeds that "
                "agree exactly, so that noise cannot be estimated)\n")
    best = max((float(np.mean(v)) for v in seeds.values()), default=0.0)
    what = "mean regret" if key == "regret" else "mean held-out regret"
    lines = []
    for budget in sorted({r["budget"] for r in rows}):
        scored = {}
        for r in rows:
            if r["budget"] == budget and r["answer"] in seeds and (key == "regret" or r.get(key) is not None):
                scored.setdefault(r["strategy"], []).append(r)
        base = scored.get(baseline, [])
        for name, runs in scored.items():
            if name == baseline or len(runs) < 2 or len(base) < 2:
                continue
            per_run = [[score_weights(r, seeds, best, key) for r in rs] for rs in (runs, base)]
            wa, wb = (mean_weights(ws) for ws in per_run)
            cells = set(wa) | set(wb)
            diff = sum((wb.get(c, 0) - wa.get(c, 0)) * seeds[c[0]][c[1]] for c in cells)   # score_A - score_B
            v_gt = pooled * sum((wa.get(c, 0) - wb.get(c, 0)) ** 2 for c in cells)
            v_search = sum(np.var([sum(v * seeds[c[0]][c[1]] for c, v in w.items()) for w in ws], ddof=1) / len(ws)
                           for ws in per_run)
            if v_gt + v_search == 0:
                continue   # both strategies always answered one and the same workflow: nothing to compare
            z = diff / math.sqrt(v_gt + v_search)
            lines.append(f"- budget {budget:,}: {name} {what} minus {baseline}'s {diff:+.2f} ± "
                         f"{1.96 * math.sqrt(v_gt + v_search):.2f} (95%, the ground truth's noise included: "
                         f"{len({r['answer'] for r in runs})} vs {len({r['answer'] for r in base})} distinct "
                         f"answers), z {z:+.2f}, two-sided p = {2 * norm.sf(abs(z)):.3g}")
    return "\n".join(lines) + ("\n" if lines else "")


def mean_weights(weights: list[dict]) -> dict:
    """The mean of a strategy's per-search ``score_weights``: how much each ground-truth seed counts in its mean
    score."""
    out: dict[tuple[str, int], float] = {}
    for w in weights:
        for c, v in w.items():
            out[c] = out.get(c, 0.0) + v / len(weights)
    return out


def comparisons(rows: list[dict], gt_csv: str | Path | None = None, baseline: str = "random") -> str:
    """The U tests on regret, on held-out regret where the rows have it (a replay), and, given the ground truth's
    file, the comparison of mean regrets that counts its noise; each row against ``baseline``'s."""
    text = against_random(rows, baseline=baseline)
    if any(r.get("heldout_regret") is not None for r in rows):
        text += against_random(rows, "heldout_regret", baseline)
    if gt_csv is not None:
        text += against_random_noise_aware(rows, gt_csv, baseline)
        if any(r.get("heldout_regret") is not None for r in rows):
            text += against_random_noise_aware(rows, gt_csv, baseline, "heldout_regret")
    return text


def read_rows(path: str | Path) -> list[dict]:
    """The rows of a regret.csv or replay.csv written by this script, typed back."""
    flags = {"True": True, "False": False, "": None}
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        r["budget"], r["confidence_set_size"] = int(r["budget"]), int(r["confidence_set_size"])
        for k in ("regret", "heldout_regret"):
            r[k] = float(r[k]) if r.get(k) not in (None, "") else None
        for k in ("answer_in_top_set", "answer_eligible_in_ground_truth"):
            r[k] = flags.get(r[k], r[k])
    return rows


def write(rows: list[dict], out: Path, name: str, gt_csv: str | Path | None = None) -> None:
    with open(out / f"{name}.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
        w.writeheader()
        w.writerows({k: "" if v is None else v for k, v in r.items()} for r in rows)
    (out / f"{name}.md").write_text(table(rows) + "\n" + comparisons(rows, gt_csv))


def figure(rows: list[dict], gt_csv: str | Path, path: str | Path) -> None:
    """The reproducibility figure: left, the ground truth (every workflow's mean with its 95% t interval, eligible
    ones first, best first; the rest grey) - the plateau the searches choose on; right, per strategy and budget,
    the regret of every search's answer (a box per row, the number of distinct answers above it)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with open(gt_csv, newline="") as f:
        gt = list(csv.DictReader(f))
    gt.sort(key=lambda r: (r["eligible"] != "True", -float(r["mean"])))
    fig, (a, b) = plt.subplots(1, 2, figsize=(14, 5), gridspec_kw={"width_ratios": [1, 1]})
    for i, r in enumerate(gt):
        ok = r["eligible"] == "True"
        a.errorbar(i, float(r["mean"]), yerr=float(r["ci95"] or 0), fmt="o", ms=3, lw=0.8,
                   color="tab:blue" if ok else "0.6")
    a.set(xlabel="workflow (eligible first, best first; grey: not eligible)", ylabel="held-out return, 95% t over seeds",
          title="ground truth: each workflow's value")
    groups = {}
    for r in rows:
        if r["regret"] is not None:
            groups.setdefault(f"{r['strategy']} {r['budget'] // 1000}k", []).append(r)
    names = list(groups)
    b.boxplot([[r["regret"] for r in groups[n]] for n in names], showfliers=True)
    b.set_xticks(range(1, len(names) + 1), names, fontsize=8, rotation=35, ha="right")
    top = max(r["regret"] for g in groups.values() for r in g)
    for i, n in enumerate(names, 1):
        b.text(i, top * 1.05, str(len({r["answer"] for r in groups[n]})), ha="center", fontsize=8)
    b.set_ylim(top=top * 1.12)
    b.set(ylabel="simple regret of the answer (ground-truth points)",
          title="searches: regret per search seed (number above: distinct answers)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


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
    y.add_argument("--design-start", help="the searches' --design-start (rows get ' start=S'); default: the search's")
    y.add_argument("--out", required=True)
    t = sub.add_parser("table", help="the table and tests again, from a regret.csv or replay.csv already written")
    t.add_argument("rows", nargs="+", help="OUT/regret.csv or OUT/replay.csv (several: their rows together)")
    t.add_argument("--ground-truth", required=True, help="the ground_truth.csv they were scored against")
    t.add_argument("--figure", help="also draw the reproducibility figure (ground truth and regrets) to this PNG")
    t.add_argument("--baseline", default="random", help="the row every other row is tested against")
    a, extra = p.parse_known_args(argv)
    if a.step == "table":
        rows = [r for path in a.rows for r in read_rows(path)]
        print(table(rows) + "\n" + comparisons(rows, a.ground_truth, a.baseline))
        if a.figure:
            figure(rows, a.ground_truth, a.figure)
        return 0
    if a.step == "ground-truth":
        s = run_search(Path(a.out), ["--exhaustive", "--seeds-per-workflow", str(a.seeds_per_workflow), *extra])
        print(s.get("ground_truth_statement"))
        return 0
    Path(a.out).mkdir(parents=True, exist_ok=True)
    if a.step == "replay":
        if extra:
            p.error(f"replay takes no search flags (the protocol is the ground truth's): {' '.join(extra)}")
        rows, gt_csv = replay_runs(a), Path(a.ground_truth_run) / "ground_truth.csv"
    else:
        rows, gt_csv = regret_runs(a, extra), a.ground_truth
    write(rows, Path(a.out), a.step if a.step == "replay" else "regret", gt_csv)
    print(table(rows) + "\n" + comparisons(rows, gt_csv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
