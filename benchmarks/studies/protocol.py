"""Which post-gate budget makes a workflow's value well defined? For each workflow and each ``--post-gate-episodes``
P, train K seeds from scratch (``workflow-rl train --seeds K``, the search's update frequency) and report the spread
of their held-out returns across seeds and the episodes it cost; resumable (a finished cell is skipped, an
interrupted one resumed).

    python benchmarks/studies/protocol.py --workflows E,U,D,OS,OH D,OS,E,OH,U U,OH,OS,E,D --post-gate 0 10 20 40 \
        --seeds 5 --out runs/protocol [train flags...]

The value is well defined when the seed std is small against the differences between workflows: choose the
smallest P at which the workflows' 95% intervals stop overlapping (or the std stops shrinking), and set it as the
search's ``post_gate_episodes`` default (``SEARCH_TRAINING_DEFAULTS``). Writes ``OUT/protocol.md`` and ``.csv``.
"""
from __future__ import annotations

import argparse
import csv
import itertools
import json
import sys
from pathlib import Path

from workflow_rl.cli import job
from workflow_rl.runs.train import train
from workflow_rl.search.config import SEARCH_TRAINING_DEFAULTS

COLUMNS = ["workflow", "post_gate_episodes", "seeds", "mean", "ci95", "std", "episodes_mean", "gate_episodes_mean",
           "eval_compliance_min"]


def cell(out: Path, workflow: str, post_gate: int, seeds: int, extra: list[str]) -> dict:
    """One (workflow, P) cell, trained unless its summary exists; its row."""
    if not (out / "summary.json").is_file():
        argv = ["train", "--workflow", workflow, "--seeds", str(seeds), "--post-gate-episodes", str(post_gate),
                "--update-every-steps", str(SEARCH_TRAINING_DEFAULTS["update_every_steps"]), "--out", str(out),
                *(["--resume"] if out.exists() else []), *extra]
        try:
            result = train(*job(argv))
        except ValueError as e:
            raise SystemExit(f"error: `workflow-rl {' '.join(argv)}`: {e}") from None
        if result.interrupted:   # Ctrl-C: the cell's runs are saved; this script resumes them when run again
            raise SystemExit("interrupted: rerun the same command to continue (finished cells are skipped)")
    s = json.loads((out / "summary.json").read_text())
    a, runs = s["across_seeds"], s["seeds"]
    gates = [r["gate_episodes"] for r in runs if r.get("gate_episodes") is not None]
    comp = [r["eval"]["compliance"] for r in runs if r["eval"]["compliance"] is not None]
    return {"workflow": workflow, "post_gate_episodes": post_gate, "seeds": a["n"], "mean": a["mean"],
            "ci95": a["ci95"], "std": a["std"], "episodes_mean": sum(r["episodes"] for r in runs) / len(runs),
            "gate_episodes_mean": sum(gates) / len(gates) if gates else None,
            "eval_compliance_min": min(comp) if comp else None}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--workflows", nargs="+", required=True)
    p.add_argument("--post-gate", nargs="+", type=int, default=[0, 10, 20, 40])
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--out", required=True)
    a, extra = p.parse_known_args(argv)
    out = Path(a.out)
    rows = [cell(out / f"{wf.replace(',', '-')}-pg{pg}", wf, pg, a.seeds, extra)
            for wf, pg in itertools.product(a.workflows, a.post_gate)]
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "protocol.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        w.writerows(rows)
    lines = ["| workflow | post-gate episodes / env | seeds | held-out return (95% t) | seed std | episodes | "
             "gate at | min eval compliance |", "|---|---:|---:|---|---:|---:|---:|---:|"]
    lines += [f"| {r['workflow']} | {r['post_gate_episodes']} | {r['seeds']} | {r['mean']:.2f} ± {r['ci95']:.2f} | "
              f"{r['std']:.2f} | {r['episodes_mean']:.0f} | {r['gate_episodes_mean'] or 'never'} | "
              f"{r['eval_compliance_min']} |" for r in rows]
    (out / "protocol.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
