"""Collect workflow searches against several attackers and ask whether the best workflow depends on the attacker
(issue Y item 4; ``workflow_rl.search.per_attacker`` says how).

    python benchmarks/studies/per_attacker.py RUNS/* --out benchmarks/results/per_attacker

Copies each finished search's ``summary.json`` (with its seed, from ``search_state.json`` where an older search's
summary lacks it) and ``screen.csv`` into OUT as ``NAME-summary.json`` and ``NAME-screen.csv`` (a folder without
``summary.json`` is skipped and named), then writes ``per_attacker.json`` (per starting agent,
``per_attacker.summarise`` over everything collected in OUT). ``make results`` renders it into docs/results.md.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from workflow_rl.search.per_attacker import collected, summarise


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="*", type=Path, help="search folders (workflow-rl search --out)")
    p.add_argument("--out", type=Path, required=True, help="the results folder")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for run in args.runs:
        if not run.is_dir():
            continue
        if not (run / "summary.json").is_file():
            print(f"skipping {run}: not finished (no summary.json)")
            continue
        summary = json.loads((run / "summary.json").read_text())
        if "seed" not in summary:   # a search from before summary.json named its seed: its saved config's
            summary["seed"] = json.loads((run / "search_state.json").read_text())["config"]["seed"]
        (args.out / f"{run.name}-summary.json").write_text(json.dumps(summary, indent=1) + "\n")
        shutil.copyfile(run / "screen.csv", args.out / f"{run.name}-screen.csv")
    found = collected(args.out)
    if not found:
        p.exit(2, f"error: no NAME-summary.json with its NAME-screen.csv in {args.out}: give finished search "
                  "folders\n")
    summary = {agent: summarise(screens, answers) for agent, (screens, answers) in found.items()}
    (args.out / "per_attacker.json").write_text(json.dumps(summary, indent=1) + "\n")
    for agent, one in summary.items():
        for red, a in one["attackers"].items():
            print(f"{agent} vs {red}: {a['followable']} followable, best {a['best']} {a['best_mean']:.2f} ± "
                  f"{a['best_ci95']:.2f}, 95% set {len(a['confidence_set'])}, workflow matters p = "
                  f"{a['p_workflow_matters']:.3g}")
    print(f"wrote {args.out / 'per_attacker.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
