"""An agent trained across workflows on real CybORG against the native engine, workflow by workflow (issue L's
target: return within 3 standard errors and compliance within 0.02 of native on the 100-step cell).

The CybORG side is any number of ``workflow-rl evaluate AGENT --workflow W --engine cyborg --out DIR`` folders (one
workflow each); the native side is ``workflow-rl evaluate AGENT --workflow all --out DIR``'s ``workflows.csv``. The
standard error of the difference is the two estimates' in quadrature (independent episodes); both are printed.

    PYTHONPATH=. python benchmarks/studies/engine_check.py --native runs/eval500/workflows.csv \
        --cyborg runs/cyborg-* --out benchmarks/results/recipe/cpu-ns50-s1/engine_check
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from pathlib import Path

from workflow_rl.search import feasible
from workflow_rl.workflow import Workflow

SE_LIMIT = 3.0
"""The return must lie within this many standard errors (of the difference) of native."""
COMPLIANCE_LIMIT = 0.02
"""The compliance must lie within this of native."""


def compare(native: list[dict], cyborg_rows: list[dict], length: int = 100) -> list[dict]:
    """One row per CybORG cell of ``length`` steps (each carrying its ``workflow``) beside the native row of the
    same workflow and red agent."""
    by_key = {(r["workflow"], r["red_agent"], r["length"]): r for r in native}
    out = []
    for c in cyborg_rows:
        if c["length"] != length:
            continue
        n = by_key.get((c["workflow"], c["red_agent"], length))
        if n is None:
            sys.exit(f"error: the native table has no row for {c['workflow']} against {c['red_agent']}: evaluate "
                     "the agent with --workflow all (or that workflow) on the native engine")
        se_c, se_n = c["std"] / math.sqrt(c["episodes"]), n["std"] / math.sqrt(n["episodes"])
        se = math.hypot(se_c, se_n)
        diff = c["mean"] - n["mean"]
        dcomp = (c["compliance"] - n["compliance"]
                 if c["compliance"] is not None and n["compliance"] is not None else None)
        out.append({"folder": c.get("folder"), "workflow": c["workflow"], "red_agent": c["red_agent"],
                    "length": length,
                    "cyborg_episodes": c["episodes"], "cyborg_mean": c["mean"], "cyborg_se": se_c,
                    "cyborg_compliance": c["compliance"], "native_episodes": n["episodes"], "native_mean": n["mean"],
                    "native_se": se_n, "native_compliance": n["compliance"], "diff": diff, "diff_se": se,
                    "diff_in_se": diff / se if se else float("nan"), "compliance_diff": dcomp,
                    "return_ok": abs(diff) <= SE_LIMIT * se,
                    "compliance_ok": dcomp is not None and abs(dcomp) <= COMPLIANCE_LIMIT})
    return out


def cyborg_cells(folders: list[Path]) -> list[dict]:
    rows = []
    for folder in folders:
        f = Path(folder) / "evaluation.json"
        if not f.is_file():
            sys.exit(f"error: {f} does not exist: run `workflow-rl evaluate AGENT --workflow W --engine cyborg "
                     f"--out {folder}` first")
        report = json.loads(f.read_text())
        if not report.get("workflow"):
            sys.exit(f"error: {f} was not evaluated under a workflow: give --workflow W to evaluate")
        wf = Workflow.parse(",".join(report["workflow"])).codes
        rows += [{**r, "workflow": wf, "folder": Path(folder).name} for r in report["results"]
                 if r["engine"] == "cyborg"]
    return rows


def markdown(rows: list[dict]) -> str:
    lines = [("| folder | workflow | red agent | CybORG (n) | native (n) | difference (SE) | "
              "CybORG / native compliance | within 3 SE | compliance within 0.02 |"),
             "|---|---|---|---:|---:|---:|---:|---|---|"]
    for r in rows:
        comp = ("n/a" if r["compliance_diff"] is None
                else f"{r['cyborg_compliance']:.3f} / {r['native_compliance']:.3f}")
        lines.append(f"| {r['folder']} | {r['workflow']} | {r['red_agent']} | "
                     f"{r['cyborg_mean']:.2f} ({r['cyborg_episodes']}) | "
                     f"{r['native_mean']:.2f} ({r['native_episodes']}) | {r['diff']:+.2f} ({r['diff_se']:.2f}; "
                     f"{r['diff_in_se']:+.1f} SE) | {comp} | {'yes' if r['return_ok'] else 'NO'} | "
                     f"{'yes' if r['compliance_ok'] else 'NO'} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--native", type=Path, required=True, help="workflows.csv of `evaluate AGENT --workflow all`")
    ap.add_argument("--cyborg", type=Path, nargs="+", required=True, help="CybORG evaluation folders")
    ap.add_argument("--out", type=Path, required=True, help="folder for engine_check.csv and engine_check.md")
    a = ap.parse_args(argv)
    if not a.native.is_file():
        sys.exit(f"error: {a.native} does not exist: give the workflows.csv of `evaluate AGENT --workflow all`")
    try:
        native = feasible.read_csv(a.native)
    except ValueError as e:
        sys.exit(f"error: {e}")
    rows = compare(native, cyborg_cells(a.cyborg))
    a.out.mkdir(parents=True, exist_ok=True)
    with open(a.out / "engine_check.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["workflow"])
        w.writeheader()
        w.writerows(rows)
    md = markdown(rows)
    (a.out / "engine_check.md").write_text(md)
    print(md + f"wrote {a.out / 'engine_check.csv'} and engine_check.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
