"""Ship a trained agent as a pretrained one: its slim checkpoint and its card in ``workflow_rl/pretrained/``.

The card is built from the run itself (episodes, env-steps, stop reason and workflow from the checkpoint) and from
the evaluation folders ``workflow-rl evaluate ... --out DIR`` wrote (their ``evaluation.json``), so no number on it
is typed by hand; the reproduce command, training time and machine are given, as only the person who ran it knows.

    PYTHONPATH=. python benchmarks/ship_agent.py cage2 runs/long-red/seed_0/checkpoints/latest.pt \
        --reproduce "workflow-rl train ..." --seconds 1500 --machine "..." --kind "..." --status "..." \
        --native runs/long-red/eval-s0 --cyborg runs/long-red/cyborg-s0 --eval-command "workflow-rl evaluate ..."
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from workflow_rl.rl import pretrained
from workflow_rl.rl.checkpoint import load_checkpoint
from workflow_rl.rundir import atomic_write


def results(folders: list[Path]) -> list[dict]:
    """The rows of the evaluation folders (each one's ``evaluation.json``), in order."""
    rows = []
    for folder in folders:
        f = Path(folder) / "evaluation.json"
        if not f.is_file():
            sys.exit(f"error: {f} does not exist: run `workflow-rl evaluate CHECKPOINT --out {folder}` first")
        rows += json.loads(f.read_text())["results"]
    return rows


def card(name: str, ck: dict, a: argparse.Namespace) -> dict:
    cfg, counters = ck["config"], ck["counters"]
    return {"name": name, "kind": a.kind, "status": a.status, "workflow": ck.get("workflow"),
            "reproduce": a.reproduce, "reproduce_env": a.reproduce_env,
            "episodes_trained": int(counters["total_episodes"]),
            "env_steps": int(counters["total_episodes"]) * int(cfg["episode_length"]),
            "stop_reason": counters["stop_reason"], "training_seconds": a.seconds, "machine": a.machine,
            "eval_native": results(a.native), "eval_cyborg": results(a.cyborg), "eval_commands": a.eval_command}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("name", help="the shipped name (pretrained:NAME)")
    ap.add_argument("checkpoint", type=Path)
    ap.add_argument("--reproduce", required=True, help="the exact command that trained it")
    ap.add_argument("--reproduce-env", default="default threads")
    ap.add_argument("--seconds", type=float, required=True, help="its training time")
    ap.add_argument("--machine", required=True)
    ap.add_argument("--kind", required=True)
    ap.add_argument("--status", required=True, help="how it was chosen and what it does not reach")
    ap.add_argument("--native", type=Path, nargs="+", default=[], help="evaluation folders on the native engine")
    ap.add_argument("--cyborg", type=Path, nargs="+", default=[], help="evaluation folders on real CybORG")
    ap.add_argument("--eval-command", nargs="+", default=[], help="the commands that made those folders")
    ap.add_argument("--dir", type=Path, default=pretrained.DIR, help="where to write (default: the package's)")
    a = ap.parse_args(argv)
    if not a.checkpoint.is_file():
        sys.exit(f"error: {a.checkpoint} does not exist: give a checkpoint file (RUN/checkpoints/latest.pt)")
    ck = load_checkpoint(a.checkpoint)
    c = card(a.name, ck, a)
    pretrained.save_slim(a.checkpoint, a.dir / f"{a.name}.pt")
    with atomic_write(a.dir / f"{a.name}.json", "w") as f:
        f.write(json.dumps(c, indent=2) + "\n")
    print(f"shipped {a.name}: {a.dir / a.name}.pt and .json ({len(c['eval_native'])} native and "
          f"{len(c['eval_cyborg'])} CybORG rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
