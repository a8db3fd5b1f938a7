"""The feasible set of one network: per workflow and red agent, the compliance and return it reaches.

Per workflow and red agent, the compliance and return an agent reaches (``evaluate AGENT --workflow all``), as
``workflows.csv`` and a figure, and beside a per-workflow ground truth (``search --exhaustive``): the difference to its
mean and whether the two eligibility calls agree.

Eligible here means what it means in a ground truth's evaluation: evaluated compliance >= the threshold (the
ground truth's own ``compliance_threshold``; 0.95 without one). A ground truth's eligibility also needs the
training gate, which a single evaluated agent has no counterpart of.
"""
from __future__ import annotations

import csv
import math
from pathlib import Path

from workflow_rl.search.ground_truth import read_ground_truth

COLUMNS = ["workflow", "red_agent", "engine", "mode", "length", "episodes", "compliance", "fixes", "mean", "ci95",
           "std", "eligible"]
GT_COLUMNS = ["gt_mean", "gt_ci95", "gt_eligible", "diff", "diff_ci95", "agree"]
"""With a ground truth: its mean and 95% interval, its eligibility, our mean minus its mean with the interval of
that difference (the two half-widths in quadrature: independent estimates), and whether the calls agree."""
DEFAULT_THRESHOLD = 0.95


def workflow_rows(results: list[tuple[str, object]], engine: str, mode: str,
                  threshold: float = DEFAULT_THRESHOLD) -> list[dict]:
    """One row per (workflow, red agent, length) of ``rl.evaluate.evaluate_workflows``' results."""
    return [{"workflow": w, "red_agent": r.red_agent, "engine": engine, "mode": mode, "length": r.length,
             "episodes": r.episodes, "compliance": r.compliance, "fixes": r.fixes, "mean": r.mean, "ci95": r.ci95,
             "std": r.std, "eligible": r.compliance is not None and r.compliance >= threshold} for w, r in results]


def ground_truths(paths: list[str | Path]) -> dict[tuple[str, int], tuple[dict, float]]:
    """{(red agent, evaluation length): ({workflow: row}, compliance threshold)} of ground_truth.csv files, one
    per red agent and length (a second file for the same pair is refused)."""
    out = {}
    for path in paths:
        table, rows = read_ground_truth(path)
        keys = {(r["red_agent"], int(r["eval_length"])) for r in rows}
        thresholds = {float(r["compliance_threshold"]) for r in rows}
        if len(keys) != 1 or len(thresholds) != 1:
            raise ValueError(f"--ground-truth {path} mixes protocols (red agents, lengths or thresholds): use one "
                             "search's ground_truth.csv")
        key = keys.pop()
        if key in out:
            raise ValueError(f"--ground-truth: two files for {key[0]} at length {key[1]}: give one per red agent")
        out[key] = (table, thresholds.pop())
    return out


def compare(rows: list[dict], truths: dict[tuple[str, int], tuple[dict, float]]) -> None:
    """Add the ground-truth columns (``GT_COLUMNS``) to the rows a ground truth covers (same red agent and
    length, the workflow in it), with eligibility at that ground truth's threshold."""
    for row in rows:
        gt = truths.get((row["red_agent"], row["length"]))
        truth = gt[0].get(row["workflow"]) if gt else None
        if truth is None:
            continue
        row["eligible"] = row["compliance"] is not None and row["compliance"] >= gt[1]
        gt_ci = float(truth["ci95"]) if truth["ci95"] not in ("", "nan") else float("nan")
        row.update(gt_mean=truth["mean"], gt_ci95=gt_ci, gt_eligible=truth["eligible"],
                   diff=row["mean"] - truth["mean"], diff_ci95=math.hypot(row["ci95"], gt_ci),
                   agree=row["eligible"] == truth["eligible"])


def summarise(rows: list[dict]) -> list[dict]:
    """Per (engine, mode, red agent, length): workflows, pooled compliance (all their counted fixes), the worst
    workflow's, the mean return over workflows and its range, how many are eligible, and with a ground truth how
    many calls agree, how many of its eligible workflows are at or above its mean, and the mean difference."""
    out = []
    for key in dict.fromkeys((r["engine"], r["mode"], r["red_agent"], r["length"]) for r in rows):
        rs = [r for r in rows if (r["engine"], r["mode"], r["red_agent"], r["length"]) == key]
        counted = [r for r in rs if r["compliance"] is not None]
        fixes = sum(r["fixes"] for r in counted)
        worst = min(counted, key=lambda r: r["compliance"], default=None)
        s = {"engine": key[0], "mode": key[1], "red_agent": key[2], "length": key[3], "workflows": len(rs),
             "pooled_compliance": sum(r["compliance"] * r["fixes"] for r in counted) / fixes if fixes else None,
             "worst_compliance": worst["compliance"] if worst else None,
             "worst_workflow": worst["workflow"] if worst else None,
             "mean_return": sum(r["mean"] for r in rs) / len(rs), "min_return": min(r["mean"] for r in rs),
             "max_return": max(r["mean"] for r in rs), "eligible": sum(r["eligible"] for r in rs)}
        gt = [r for r in rs if "gt_mean" in r]
        if gt:
            ok = [r for r in gt if r["gt_eligible"]]
            s.update(compared=len(gt), agree=sum(r["agree"] for r in gt), gt_eligible=len(ok),
                     gt_eligible_eligible=sum(r["eligible"] for r in ok),
                     gt_eligible_at_or_above=sum(r["diff"] >= 0 for r in ok),
                     gt_eligible_mean_diff=sum(r["diff"] for r in ok) / len(ok) if ok else None)
        out.append(s)
    return out


def summary_lines(summaries: list[dict]) -> list[str]:
    """One line per summary of :func:`summarise`, for the terminal and the markdown."""
    def f(x, spec=".3f"):
        return "n/a" if x is None else format(x, spec)

    lines = []
    for s in summaries:
        text = (f"{s['engine']} {s['mode']} {s['red_agent']} {s['length']} steps, {s['workflows']} workflows: "
                f"pooled compliance {f(s['pooled_compliance'])}, worst {f(s['worst_compliance'])} "
                f"({s['worst_workflow']}); return {s['mean_return']:.2f} mean over workflows "
                f"({s['min_return']:.2f} .. {s['max_return']:.2f}); {s['eligible']} eligible")
        if "compared" in s:
            text += (f"; vs the ground truth ({s['compared']} workflows): eligibility agrees on {s['agree']}, "
                     f"{s['gt_eligible_eligible']} of its {s['gt_eligible']} eligible are eligible here, "
                     f"{s['gt_eligible_at_or_above']} at or above its mean (mean difference "
                     f"{f(s['gt_eligible_mean_diff'], '+.2f')})")
        lines.append(text)
    return lines


def write_csv(rows: list[dict], path: Path) -> None:
    columns = COLUMNS + (GT_COLUMNS if any("gt_mean" in r for r in rows) else [])
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns)
        w.writeheader()
        for r in rows:
            w.writerow({c: "" if r.get(c) is None else r.get(c, "") for c in columns})


_INTS = ("length", "episodes", "fixes")
_FLOATS = ("compliance", "mean", "ci95", "std", "gt_mean", "gt_ci95", "diff", "diff_ci95")
_BOOLS = ("eligible", "gt_eligible", "agree")


def read_csv(path: Path) -> list[dict]:
    """The rows :func:`write_csv` wrote, typed back (what ``benchmarks/ship_agent.py --workflows`` puts on a card):
    an empty cell is None (compliance with no fix counted), and a row the ground truth did not cover has no
    ground-truth keys, as :func:`compare` left it."""
    def typed(name: str, text: str):
        if text == "":
            return None
        if name in _INTS:
            return int(text)
        if name in _FLOATS:
            return float(text)
        return text == "True" if name in _BOOLS else text

    try:
        with open(path, newline="", encoding="utf-8-sig") as f:   # a spreadsheet's byte-order mark is no column name
            rows = [{k: typed(k, v) for k, v in r.items()} for r in csv.DictReader(f)]
    except (ValueError, TypeError, csv.Error) as e:   # a word for a number, a row cut short, bytes that are not text
        raise ValueError(f"{path} is not a workflows.csv that `workflow-rl evaluate --workflow all` wrote "
                         f"({type(e).__name__}: {e}): evaluate again") from None
    for r in rows:
        if r.get("gt_mean") is None:
            for c in GT_COLUMNS:
                r.pop(c, None)
    return rows


def plot(rows: list[dict], path: Path, label: str) -> None:
    """Per (red agent, length, engine, mode): the workflows sorted by return, return with its 95% interval above
    and compliance below; ground-truth eligible workflows filled, the others hollow (all filled without one)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = list(dict.fromkeys((r["red_agent"], r["length"], r["engine"], r["mode"]) for r in rows))
    fig, axes = plt.subplots(2, len(panels), figsize=(max(6.0, 5.5 * len(panels)), 6.5), squeeze=False,
                             sharex="col", gridspec_kw={"height_ratios": [3, 2]})
    for j, key in enumerate(panels):
        rs = sorted((r for r in rows if (r["red_agent"], r["length"], r["engine"], r["mode"]) == key),
                    key=lambda r: r["mean"])
        x = range(len(rs))
        marked = [r.get("gt_eligible", True) for r in rs]
        top, bottom = axes[0][j], axes[1][j]
        top.errorbar(x, [r["mean"] for r in rs], yerr=[r["ci95"] for r in rs], fmt="none", ecolor="0.6", lw=0.8)
        bottom.axhline(DEFAULT_THRESHOLD, color="0.5", lw=0.8, ls="--")
        for on, style in ((True, {"color": "C0"}), (False, {"facecolors": "none", "edgecolors": "C3"})):
            idx = [i for i in x if marked[i] == on]
            name = ("eligible in the ground truth" if on else "ineligible in the ground truth") \
                if any("gt_mean" in r for r in rs) else None
            top.scatter(idx, [rs[i]["mean"] for i in idx], s=12, label=name, **style)
            bottom.scatter(idx, [rs[i]["compliance"] if rs[i]["compliance"] is not None else math.nan for i in idx],
                           s=12, **style)
        top.set_title(f"{key[0]}, {key[1]} steps ({key[2]}, {key[3]})", fontsize=10)
        top.set_ylabel("return (mean, 95% CI)")
        bottom.set_ylabel("compliance")
        bottom.set_xlabel(f"workflows, sorted by return ({len(rs)})")
        if any("gt_mean" in r for r in rs):
            top.legend(fontsize=8, loc="lower right")
    fig.suptitle(f"{label} across workflows", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
