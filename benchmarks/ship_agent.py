"""Ship a trained agent as a pretrained one: its slim checkpoint and its card in ``workflow_rl/pretrained/``.

The card is built from the run itself (episodes, env-steps, stop reason and workflow from the checkpoint) and from
the evaluation folders ``workflow-rl evaluate ... --out DIR`` wrote (their ``evaluation.json``), so no number on it
is typed by hand; the reproduce command, training time and machine are given, as only the person who ran it knows.
An agent trained across workflows (``train --workflow all``) also gets the folders ``evaluate AGENT --workflow all
--out DIR`` wrote (``--workflows DIR...``: every workflow's row of ``workflows.csv`` and the summaries of
``workflows.json``), its held-out list from the checkpoint, and ``eval_workflow``, the one workflow its CAGE2 cells
(``--native``, ``--cyborg``) were played under, or "none" when they were played unconstrained (``evaluate AGENT
--workflow none``, an agent trained with ``--none-share``); the cards of the other agents: their own workflow, or
None.

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
from workflow_rl.files import atomic_write
from workflow_rl.search import feasible
from workflow_rl.workflow import Workflow, is_workflow_list, parse_workflow_list


def _read(folder: Path, name: str) -> Path:
    f = Path(folder) / name
    if not f.is_file():
        sys.exit(f"error: {f} does not exist: run `workflow-rl evaluate CHECKPOINT --out {folder}` first")
    return f


def results(folders: list[Path], tag: bool = False) -> list[dict]:
    """The rows of the evaluation folders (each one's ``evaluation.json``), in order; with ``tag`` each row also
    names the workflow it was played under (its codes; None: unconstrained)."""
    rows = []
    for folder in folders:
        report = json.loads(_read(folder, "evaluation.json").read_text())
        wf = Workflow.parse(",".join(report["workflow"])).codes if report.get("workflow") else None
        rows += [{**r, "workflow": wf} if tag else r for r in report["results"]]
    return rows


def cells_workflow(folders: list[Path]) -> list[str] | None:
    """The one workflow the CAGE2 cells of ``--native`` were played under (its unit-type names, as a card's
    ``workflow``); two different ones exit with an error."""
    seen = {tuple(json.loads(_read(f, "evaluation.json").read_text()).get("workflow") or ()) for f in folders}
    if len(seen) > 1:
        sys.exit(f"error: the --native folders were evaluated under {len(seen)} different workflows: give folders "
                 "of one workflow (the card's CAGE2 cells)")
    names = seen.pop() if seen else ()
    return list(names) or None


def workflow_tables(folders: list[Path]) -> dict:
    """The evaluations across workflows (``evaluate --workflow all --out DIR``): every row of each folder's
    ``workflows.csv`` (typed, ``feasible.read_csv``) and the summaries and ground truths of its ``workflows.json``."""
    rows, summary, truths = [], [], []
    for folder in folders:
        report = json.loads(_read(folder, "workflows.json").read_text())
        rows += feasible.read_csv(_read(folder, "workflows.csv"))
        summary += report["summary"]
        truths += [t for t in report["ground_truth"] if t not in truths]
    return {"ground_truth": truths, "summary": summary, "rows": rows}


def card(name: str, ck: dict, a: argparse.Namespace) -> dict:
    cfg, counters = ck["config"], ck["counters"]
    episodes = int(counters["total_episodes"]) + a.earlier_episodes
    c = {"name": name, "kind": a.kind, "status": a.status, "workflow": ck.get("workflow"),
         "reproduce": a.reproduce, "reproduce_env": a.reproduce_env,
         "episodes_trained": episodes, "env_steps": episodes * int(cfg["episode_length"]),
         "stop_reason": counters["stop_reason"], "training_seconds": a.seconds, "machine": a.machine}
    if not is_workflow_list(cfg.get("workflow")):
        return {**c, "eval_native": results(a.native), "eval_cyborg": results(a.cyborg),
                "eval_commands": a.eval_command}
    if not a.workflows:
        sys.exit(f"error: {a.checkpoint} was trained across workflows: give its evaluation across workflows with "
                 "--workflows DIR (from `workflow-rl evaluate CHECKPOINT --workflow all --out DIR`)")
    held = cfg.get("hold_out")
    return {**c, "train_workflows": cfg["workflow"],
            "held_out": [w.codes for w in parse_workflow_list(held, "hold_out")] if held else [],
            "eval_workflow": cells_workflow(a.native) or "none", "eval_native": results(a.native, tag=True),
            "eval_cyborg": results(a.cyborg, tag=True), "eval_workflows": workflow_tables(a.workflows),
            "eval_commands": a.eval_command}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("name", help="the shipped name (pretrained:NAME)")
    ap.add_argument("checkpoint", type=Path)
    ap.add_argument("--reproduce", required=True, help="the exact command that trained it")
    ap.add_argument("--reproduce-env", default="default threads")
    ap.add_argument("--seconds", type=float, required=True, help="its training time")
    ap.add_argument("--earlier-episodes", type=int, default=0, metavar="N",
                    help="episodes of earlier runs this checkpoint continued (its counters start at its own run; "
                         "a card states the whole training beyond its starting agent)")
    ap.add_argument("--machine", required=True)
    ap.add_argument("--kind", required=True)
    ap.add_argument("--status", required=True, help="how it was chosen and what it does not reach")
    ap.add_argument("--native", type=Path, nargs="+", default=[], help="evaluation folders on the native engine")
    ap.add_argument("--cyborg", type=Path, nargs="+", default=[], help="evaluation folders on real CybORG")
    ap.add_argument("--workflows", type=Path, nargs="+", default=[],
                    help="an agent trained across workflows: folders of `evaluate AGENT --workflow all --out DIR`")
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
          f"{len(c['eval_cyborg'])} CybORG rows"
          + (f", {len(c['eval_workflows']['rows'])} workflow rows)" if "eval_workflows" in c else ")"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
