"""Score searches from a universal agent (``search --init-checkpoint AGENT`` / ``--universal-fraction F``, issue L
item 4) against a per-workflow ground truth and the universal agent's own evaluation.

    python benchmarks/studies/universal_search.py --ground-truth benchmarks/results/ground_truth/ground_truth.csv \
        --out DIR RUN_DIR [RUN_DIR ...] [--evaluation workflows.csv]

Per search (one row of ``OUT/universal_search.csv``, and ``OUT/universal_search.md``):

* how its eligibility calls (``screen.csv``: the fine-tuned record's where there is one, the universal agent's
  evaluation otherwise) agree with the universal agent's own evaluation (``--evaluation``: an ``evaluate AGENT
  --workflow all`` workflows.csv at the search's protocol; without it, the evaluation the search made itself) and
  with the ground truth's eligibility, listing the workflows where they differ from the ground truth (a search
  that trained its own universal agent, ``--universal-fraction``, always against its own evaluation);
* its 95% confidence set's size, whether it keeps any workflow it calls ineligible and whether it keeps the ground
  truth's best; and the same for the set this code computes from the search's saved observations (``_now``: a
  search run by an earlier version is re-scored with today's model);
* its answer's held-out value against the ground truth's best eligible value, and the answer's own ground-truth
  mean and eligibility (the simple regret is the difference of ground-truth means);
* episodes counted, fine-tuned workflows (and how many of them ended ineligible: budget spent on a workflow that
  cannot be the answer), the pick margin, where the screen came from (computed, cache, shipped; older searches:
  computed) with its seconds, and wall time.
"""
from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

from workflow_rl.search.ground_truth import read_ground_truth

COLUMNS = ["run", "strategy", "search_seed", "universal", "universal_episodes_counted", "episodes_used",
           "fine_tuned", "answer", "answer_value", "answer_ci95", "answer_eligible", "gt_best", "gt_best_value",
           "answer_minus_gt_best", "answer_gt_mean", "answer_gt_eligible", "regret", "calls_eligible",
           "agree_universal", "agree_ground_truth", "differ_from_ground_truth", "confidence_set_size",
           "confidence_set_keeps_ineligible", "confidence_set_keeps_gt_best", "confidence_set_size_now",
           "confidence_set_keeps_gt_best_now", "fine_tuned_ineligible", "pick_margin", "screen_source",
           "screen_s", "wall_time_s"]


def _true(x) -> bool:
    return str(x) == "True"


def score(run: Path, table: dict, evaluation: dict[tuple[str, str], bool] | None) -> dict:
    """One search's row (``COLUMNS``); ``evaluation``: (red agent, workflow) -> the universal agent's call."""
    summary = json.loads((run / "summary.json").read_text())
    state = json.loads((run / "search_state.json").read_text())
    with open(run / "screen.csv") as f:
        rows = list(csv.DictReader(f))
    calls = {r["workflow"]: _true(r["eligible"]) for r in rows}
    given = summary["universal"]["training_episodes_counted"] == 0   # from a given agent, not its own
    own = ({w: ok for (red, w), ok in evaluation.items() if red == summary["red_agent"]} if evaluation and given
           else {r["workflow"]: _true(r["universal_eligible"]) for r in rows})
    gt_ok = {w: _true(r["eligible"]) for w, r in table.items()}
    best = max((r for r in table.values() if _true(r["eligible"])), key=lambda r: float(r["mean"]))
    answer = summary["best_workflow_codes"]
    gt_answer = table.get(answer)
    differ = sorted(w for w in calls if w in gt_ok and calls[w] != gt_ok[w])
    u = summary["universal"]
    now = _set_now(run)
    return {
        "run": run.name, "strategy": summary["strategy"], "search_seed": state["config"]["seed"],
        "universal": u["agent"], "universal_episodes_counted": u["training_episodes_counted"],
        "episodes_used": summary["episodes_used"], "fine_tuned": u["fine_tuned"], "answer": answer,
        "answer_value": summary["best_reward"], "answer_ci95": summary["best_ci95"],
        "answer_eligible": summary["best_is_eligible"], "gt_best": best["workflow"],
        "gt_best_value": float(best["mean"]), "answer_minus_gt_best": summary["best_reward"] - float(best["mean"]),
        "answer_gt_mean": float(gt_answer["mean"]) if gt_answer else None,
        "answer_gt_eligible": _true(gt_answer["eligible"]) if gt_answer else None,
        "regret": float(best["mean"]) - float(gt_answer["mean"]) if gt_answer and _true(gt_answer["eligible"])
        else None,
        "calls_eligible": sum(calls.values()), "agree_universal": sum(calls[w] == own[w] for w in calls),
        "agree_ground_truth": sum(calls[w] == gt_ok[w] for w in calls if w in gt_ok),
        "differ_from_ground_truth": ";".join(differ),
        "confidence_set_size": summary["confidence_set_size"],
        "confidence_set_keeps_ineligible": u["confidence_set_keeps_ineligible"],
        "confidence_set_keeps_gt_best": best["workflow"] in summary["confidence_set"],
        "confidence_set_size_now": len(now), "confidence_set_keeps_gt_best_now": best["workflow"] in now,
        "fine_tuned_ineligible": sum(r["call_from"] == "fine-tuned" and not _true(r["eligible"]) for r in rows),
        "pick_margin": state["config"].get("pick_margin", 0.0),
        "screen_source": u.get("screen_source") or "computed", "screen_s": u.get("screen_seconds"),
        "wall_time_s": summary["wall_time_s"],
    }


def _set_now(run: Path) -> list[str]:
    """The 95% confidence set this code computes from the search's saved observations."""
    from workflow_rl.search.answer import confidence_set
    from workflow_rl.search.records import SearchState

    state = SearchState.load(run / "search_state.json")
    cfg = state.config
    return confidence_set(state.iterations, cfg["compliance_threshold"], cfg["seed"], state.screen)["workflows"]


def markdown(rows: list[dict]) -> str:
    header = ("| run | universal agent | counted | answer | value | vs GT best | answer in GT | calls eligible | "
              "agree (universal) | agree (GT) | CS size | CS keeps ineligible | CS keeps GT best | CS now | "
              "fine-tuned (ineligible) | margin | screen | wall s |")
    lines = [header, "|---|---|---:|---|---:|---:|---|---:|---:|---:|---:|---:|---|---|---:|---:|---|---:|"]
    for r in rows:
        gt = ("not in GT" if r["answer_gt_mean"] is None else
              f"{r['answer_gt_mean']:.2f}, {'eligible' if r['answer_gt_eligible'] else 'INELIGIBLE'}")
        lines.append(f"| {r['run']} | {r['universal']} | {r['universal_episodes_counted']:,} | {r['answer']} | "
                     f"{r['answer_value']:.2f} ± {r['answer_ci95']:.2f} | {r['answer_minus_gt_best']:+.2f} | {gt} | "
                     f"{r['calls_eligible']} | {r['agree_universal']}/120 | {r['agree_ground_truth']}/120 | "
                     f"{r['confidence_set_size']} | {r['confidence_set_keeps_ineligible']} | "
                     f"{'yes' if r['confidence_set_keeps_gt_best'] else 'no'} | {r['confidence_set_size_now']}, GT best "
                     f"{'in' if r['confidence_set_keeps_gt_best_now'] else 'out'} | {r['fine_tuned']} "
                     f"({r['fine_tuned_ineligible']}) | {r['pick_margin']:g} | {r['screen_source']}"
                     + ("" if r["screen_s"] is None else f", {r['screen_s']:.0f} s") + f" | {r['wall_time_s']:.0f} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+", type=Path, help="finished search folders (RUN_DIR)")
    p.add_argument("--ground-truth", required=True, help="ground_truth.csv of `search --exhaustive`")
    p.add_argument("--evaluation", default=None,
                   help="workflows.csv of `evaluate AGENT --workflow all` (the given universal agent's own calls: "
                        "for searches with --init-checkpoint AGENT; one that trains its own is scored against its "
                        "own screen)")
    p.add_argument("--out", required=True, type=Path)
    a = p.parse_args(argv)
    table, _ = read_ground_truth(a.ground_truth)
    evaluation = None
    if a.evaluation:
        with open(a.evaluation) as f:
            evaluation = {(r["red_agent"], r["workflow"]): _true(r["eligible"]) for r in csv.DictReader(f)}
    rows = [score(run, table, evaluation) for run in a.runs]
    a.out.mkdir(parents=True, exist_ok=True)
    with open(a.out / "universal_search.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        for r in rows:
            w.writerow({k: "" if r[k] is None else r[k] for k in COLUMNS})
    md = markdown(rows)
    (a.out / "universal_search.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
