"""The price of compliance of one network evaluated across workflows (issue L's target: on every workflow a ground
truth holds eligible, within 1.0 point of the unconstrained ``cage2`` on the 100-step cell and within 0.5 on
average), and, with ``--base``, the same agent's change against another evaluated on the same episodes.

Both folders are ``workflow-rl evaluate AGENT --workflow all --ground-truth ... --out DIR`` outputs with the same
``--episodes`` and episode seed: env slots, hence episodes, follow the workflow's place in the list, so the two agents
meet the same red-agent and environment draws and the comparison pairs by workflow (the mean over the eligible
workflows of the per-workflow difference, with a Student-t 95% interval across workflows).

    PYTHONPATH=. python benchmarks/studies/price.py runs/new-eval --base runs/shipped-eval \
        --held-out runs/new/config.json --out benchmarks/results/compliance_price/price.md
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from workflow_rl.checks import fail
from workflow_rl.rl.evaluate import across_seeds
from workflow_rl.search import feasible

REFERENCE = {"B_lineAgent": -13.35, "RedMeanderAgent": -17.41}
"""The unconstrained ``cage2``'s native greedy 100-step return per red agent: the issue's yardstick."""
WITHIN = 1.0
"""Largest gap to the reference a single eligible workflow may have (the target's per-workflow bound)."""
LENGTH = 100


def _eligible(rows: list[dict], red: str) -> list[dict]:
    """The 100-step rows of ``red`` that its ground truth holds eligible."""
    return [r for r in rows if r["red_agent"] == red and r["length"] == LENGTH and r.get("gt_eligible")]


def price_summary(rows: list[dict], held_out: set[str], reference: dict[str, float] = REFERENCE) -> list[dict]:
    """Per red agent (100-step rows of ``feasible.read_csv``): compliance (pooled over all counted fixes, the
    worst workflow), how many ground-truth-eligible workflows reach the 0.95 gate (held-out ones apart), how many
    ineligible ones do, the eligible workflows' mean return, its gap to ``reference`` (mean, largest, how many within
    ``WITHIN``) and how many are at or above the ground truth's mean."""
    out = []
    for red in dict.fromkeys(r["red_agent"] for r in rows if r["length"] == LENGTH):
        rs = [r for r in rows if r["red_agent"] == red and r["length"] == LENGTH]
        counted = [r for r in rs if r["compliance"] is not None]
        fixes = sum(r["fixes"] for r in counted)
        worst = min(counted, key=lambda r: r["compliance"])
        el = _eligible(rows, red)
        inel = [r for r in rs if "gt_eligible" in r and not r["gt_eligible"]]
        gaps = [reference[red] - r["mean"] for r in el]
        ok = [r for r in el if r["compliance"] is not None and r["compliance"] >= feasible.DEFAULT_THRESHOLD]
        out.append({
            "red_agent": red, "episodes": rs[0]["episodes"], "workflows": len(rs),
            "pooled_compliance": sum(r["compliance"] * r["fixes"] for r in counted) / fixes,
            "worst_compliance": worst["compliance"], "worst_workflow": worst["workflow"],
            "eligible": len(el), "eligible_ok": len(ok),
            "held_out_eligible": sum(r["workflow"] in held_out for r in el),
            "held_out_eligible_ok": sum(r["workflow"] in held_out for r in ok),
            "ineligible": len(inel), "ineligible_ok": sum(r["eligible"] for r in inel),
            "agree": sum(r["agree"] for r in rs if "agree" in r),
            "eligible_mean_return": sum(r["mean"] for r in el) / len(el), "reference": reference[red],
            "gap_mean": sum(gaps) / len(gaps), "gap_max": max(gaps), "within": sum(g <= WITHIN for g in gaps),
            "at_or_above_gt": sum(r["diff"] >= 0 for r in el)})
    return out


def paired(new: list[dict], base: list[dict]) -> list[dict]:
    """Per red agent, over the workflows both tables hold and the ground truth holds eligible: the new table's
    return minus the base's, workflow by workflow, as a mean with its Student-t 95% interval across workflows (the
    workflows are the samples), the largest and smallest per-workflow change and how many lose at most ``WITHIN``
    (with the unconstrained ``cage2`` as base: the price of compliance measured on the same episodes); likewise for
    compliance."""
    out = []
    for red in dict.fromkeys(r["red_agent"] for r in new if r["length"] == LENGTH):
        b = {r["workflow"]: r for r in _eligible(base, red)}
        pairs = [(r, b[r["workflow"]]) for r in _eligible(new, red) if r["workflow"] in b]
        if not pairs:
            continue
        ret = across_seeds([n["mean"] - o["mean"] for n, o in pairs])
        comp = across_seeds([n["compliance"] - o["compliance"] for n, o in pairs])
        out.append({"red_agent": red, "workflows": len(pairs), "return_diff": ret["mean"],
                    "return_diff_ci95": ret["ci95"], "return_diff_min": min(ret["values"]),
                    "return_diff_max": max(ret["values"]),
                    "within": sum(d >= -WITHIN for d in ret["values"]), "compliance_diff": comp["mean"],
                    "compliance_diff_ci95": comp["ci95"]})
    return out


def markdown(summaries: dict[str, list[dict]], pairs: list[dict]) -> str:
    """The summaries of each labelled table side by side (one column per table and red agent), then the paired
    changes."""
    cols = [(label, s) for label, ss in summaries.items() for s in ss]
    head = "| | " + " | ".join(f"{s['red_agent']}: {label} ({s['episodes']} ep.)" for label, s in cols) + " |"
    lines = [head, "|---" * (len(cols) + 1) + "|"]
    spec = [("pooled compliance", lambda s: f"{s['pooled_compliance']:.3f}"),
            ("worst workflow's compliance", lambda s: f"{s['worst_compliance']:.3f} ({s['worst_workflow']})"),
            ("ground-truth-eligible at >= 0.95 (held out)",
             lambda s: f"{s['eligible_ok']}/{s['eligible']} ({s['held_out_eligible_ok']}/{s['held_out_eligible']})"),
            ("ground-truth-ineligible at >= 0.95", lambda s: f"{s['ineligible_ok']}/{s['ineligible']}"),
            ("eligibility calls agreeing with the ground truth", lambda s: f"{s['agree']}/{s['workflows']}"),
            ("mean return, eligible workflows", lambda s: f"{s['eligible_mean_return']:.2f}"),
            ("gap to cage2: mean, largest", lambda s: f"{s['gap_mean']:.2f}, {s['gap_max']:.2f}"),
            (f"eligible workflows within {WITHIN} of cage2", lambda s: f"{s['within']}/{s['eligible']}"),
            ("eligible workflows at or above their ground-truth mean",
             lambda s: f"{s['at_or_above_gt']}/{s['eligible']}")]
    lines += [f"| {name} | " + " | ".join(f(s) for _, s in cols) + " |" for name, f in spec]
    if pairs:
        lines += ["", "| paired by workflow (eligible ones), new minus base | workflows | return | per-workflow range "
                  f"| within {WITHIN} | compliance |", "|---|---:|---:|---:|---:|---:|"]
        lines += [f"| {p['red_agent']} | {p['workflows']} | {p['return_diff']:+.2f} ± {p['return_diff_ci95']:.2f} | "
                  f"{p['return_diff_min']:+.2f} .. {p['return_diff_max']:+.2f} | {p['within']}/{p['workflows']} | "
                  f"{p['compliance_diff']:+.4f} ± {p['compliance_diff_ci95']:.4f} |" for p in pairs]
    return "\n".join(lines) + "\n"


def _table(folder: str) -> list[dict]:
    path = Path(folder) / "workflows.csv"
    if not path.is_file():
        fail(f"{path} not found: give a folder written by `workflow-rl evaluate AGENT --workflow all "
             "--ground-truth GT.csv --out DIR`")
    try:
        rows = feasible.read_csv(path)
    except ValueError as e:
        fail(str(e))
    if not any(r.get("gt_eligible") for r in rows if r["length"] == LENGTH):
        fail(f"{path} has no 100-step row a ground truth holds eligible: evaluate with --lengths 100 "
             "and --ground-truth")
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("new", help="evaluation folder (workflows.csv) of the agent measured")
    ap.add_argument("--base", help="evaluation folder of the agent to compare with, on the same episodes")
    ap.add_argument("--held-out", help="the training run's config.json (its hold_out list)")
    ap.add_argument("--out", help="write the markdown tables and a JSON of the numbers here (FILE.md, FILE.json)")
    args = ap.parse_args(argv)
    held: set[str] = set()
    if args.held_out:
        try:
            held = set(filter(None, (json.loads(Path(args.held_out).read_text()).get("hold_out") or "").split(";")))
        except (OSError, ValueError) as e:
            fail(f"--held-out {args.held_out}: not a training run's config.json ({e})")
    tables = {"new": _table(args.new)}
    if args.base:
        tables["base"] = _table(args.base)
    summaries = {label: price_summary(rows, held) for label, rows in tables.items()}
    pairs = paired(tables["new"], tables["base"]) if args.base else []
    md = markdown(summaries, pairs)
    print(md, end="")
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(md)
        out.with_suffix(".json").write_text(json.dumps({"summaries": summaries, "paired": pairs}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
