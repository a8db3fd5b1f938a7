"""What a search leaves in RUN_DIR besides its state: logs, printed lines and its final files.

The GP log, the combined training log, one printed line per workflow, and at the end summary.json, best_workflow.json,
best_policy.pt, report.md (and ground_truth.csv for a fixed workflow list).
"""
from __future__ import annotations

import csv
import io
import shutil
from pathlib import Path

from workflow_rl.envs.names import parse_red_agent
from workflow_rl.search.answer import confidence_set
from workflow_rl.search.ground_truth import (best_set_statement, eligible_effect, load_ground_truth, score_answer,
                                             write_ground_truth)
from workflow_rl.files import atomic_write
from workflow_rl.search.records import Record, atomic_json
from workflow_rl.workflow import Workflow, all_workflows

GP_LOG_COLUMNS = ["iteration", "workflow", "reason", "ucb_score", "posterior_mean", "posterior_std", "beta",
                  "parent", "observed_reward", "observed_ci95", "compliance", "episodes_trained", "budget_left",
                  "status", "wall_time"]
BEST_WORKFLOW_KEYS = ("workflow", "observed_reward", "observed_ci95", "compliance", "status", "iteration",
                      "episodes_trained")


def append_logs(out: Path, r: Record) -> None:
    """One row in gp_sampling_log.csv; the workflow's training log rows (every seed's) in training_log.csv."""
    gp, train = out / "gp_sampling_log.csv", out / "training_log.csv"
    gp_text, train_text = _log_texts(out, r, not gp.exists(), not train.exists() or train.stat().st_size == 0)
    for path, text in ((gp, gp_text), (train, train_text)):
        with open(path, "a", newline="") as f:
            f.write(text)


def _log_texts(out: Path, r: Record, gp_header: bool, train_header: bool) -> tuple[str, str]:
    """What ``append_logs`` adds for ``r`` to the GP log and to the combined training log (with their headers
    where the files are new)."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=GP_LOG_COLUMNS, extrasaction="ignore")
    if gp_header:
        w.writeheader()
    w.writerow(r.to_dict())
    run = out / r.run_dir
    sources = [run / "training_log.csv"] if (run / "training_log.csv").exists() else sorted(
        run.glob("seed_*/training_log.csv"), key=lambda f: int(f.parent.name.split("_")[1]))
    train = ""
    for src in sources:
        rows = src.read_text().splitlines()
        train += "\n".join(rows if train_header and not train else rows[1:]) + "\n"
    return buf.getvalue(), train


def catch_up_logs(out: Path, records: list[Record]) -> None:
    """(resume) Finish the logs of a search killed after it saved a finished workflow's record but before its log
    rows were all written: each log is rewritten as the recorded workflows make it, where what it holds is the
    start of that (a log that differs otherwise, e.g. of an older version, is left as it is)."""
    gp = train = ""
    for i, r in enumerate(records):   # the combined log's header comes with the first rows, whichever workflow's
        g, t = _log_texts(out, r, i == 0, not train)
        gp, train = gp + g, train + t
    for name, want in (("gp_sampling_log.csv", gp), ("training_log.csv", train)):
        path = out / name
        have = path.read_bytes().decode(errors="replace") if path.exists() else ""
        if have != want and want.startswith(have):
            with atomic_write(path, "w", newline="") as f:
                f.write(want)


def progress_line(r: Record, best: Record, episodes_used: int, total_episodes: int) -> str:
    comp = "n/a" if r.compliance is None else f"{r.compliance:.3f}"
    return (f"[{r.iteration:3d}] {r.workflow:14s} {r.status:13s} compliance {comp} | eval "
            f"{r.observed_reward:8.2f} ± {r.observed_ci95:.2f} | episodes {r.episodes_trained:6d} | "
            f"budget {episodes_used}/{total_episodes} | best {best.workflow} {best.observed_reward:.2f} | "
            f"{r.reason}")


def answer_summary(search) -> dict:
    """The answer with how sure it is: its interval, the 95% confidence set and, with ``ground_truth``, its simple
    regret and rank there."""
    cfg, best = search.cfg, search.best()
    threshold = cfg.train.compliance_threshold
    cs = confidence_set(search.state.iterations, threshold, cfg.train.seed, search.state.screen)
    out = {
        "best_workflow": Workflow.parse(best.workflow).names if best else None,
        "best_workflow_codes": best.workflow if best else None,
        "best_reward": best.observed_reward if best else None,
        "best_ci95": best.observed_ci95 if best else None,
        "best_seeds": len(best.seed_rewards) if best else None,
        "best_interval_source": None if best is None else (
            f"95% Student-t across {len(best.seed_rewards)} seeds" if len(best.seed_rewards) > 1 else
            f"95% over {cfg.eval_episodes} evaluation episodes of one seed (seed noise not included)"),
        "best_is_compliant": bool(best and best.status == "compliant"),
        "best_is_eligible": bool(best and best.eligible(threshold)),
        "best_eval_compliance": best.eval_compliance if best else None,
        "confidence_set": cs["workflows"], "confidence_set_size": len(cs["workflows"]),
        "confidence_set_method": cs["method"], "strategy": cfg.strategy,
        "post_gate_episodes": cfg.train.post_gate_episodes,
    }
    if cfg.ground_truth:
        table = load_ground_truth(cfg.ground_truth, cfg)
        out.update({"ground_truth": str(cfg.ground_truth), **score_answer(table, out["best_workflow_codes"])})
    return out


def listing(codes: list[str], n: int = 8) -> str:
    """The first ``n`` workflows, then how many more (all of them are in summary.json)."""
    return ", ".join(codes[:n]) + (f", ... (+{len(codes) - n}; all in summary.json)" if len(codes) > n else "")


def answer_line(summary: dict) -> str:
    """The last line a search prints: the answer, its interval (and what the interval spans), and its 95% confidence
    set - listed as the workflows it excludes when it holds more than half of them, since those are the news."""
    if summary["best_workflow_codes"] is None:
        return "no workflow trained"
    cs = summary["confidence_set"]
    flag = "" if summary["best_is_eligible"] else " (NOT eligible: no workflow complied in training and evaluation)"
    every = [w.codes for w in all_workflows()]
    if len(cs) > len(every) // 2:
        kept = set(cs)
        out = [w for w in every if w not in kept]
        shown = f"all but {len(out)}" + (f": {listing(out)}" if out else "")
    else:
        shown = listing(cs)
    span = " (one seed's episodes)" if summary.get("best_seeds") == 1 else ""
    line = (f"answer: {summary['best_workflow_codes']} {summary['best_reward']:.2f} ± {summary['best_ci95']:.2f}"
            f"{span}{flag} | 95% confidence set: {len(cs)} of 120 workflow(s), {shown}")
    if "regret" in summary:
        regret = f"{summary['regret']:.2f}" if summary["regret"] is not None else (
            "n/a (the ground truth holds the answer ineligible)" if summary.get("answer_eligible_in_ground_truth")
            is False else "n/a (answer not in the ground truth)")
        line += f" | regret {regret}, rank {summary['answer_rank'] or 'n/a'}"
    return line


def card_note(spec: str) -> str:
    """For a shipped agent, its training as its card states it ('' for any other checkpoint)."""
    from workflow_rl.rl import pretrained

    if not spec.startswith(pretrained.PREFIX):
        return ""
    name = pretrained.path(spec).stem
    c = pretrained.card(name)
    start = "on top of what it started from" if "--init-checkpoint" in c["reproduce"] else "from random weights"
    return (f"{c['episodes_trained']:,} episodes, {c['training_seconds']:,.0f} s, {start}: "
            f"its card, workflow_rl/pretrained/{name}.json")


def wall_note(own: bool, source: str | None) -> str:
    """What a universal search's ``wall_time_s`` leaves out: the starting agent's training (unless the search
    trained it: ``own``) and, when the screen was reused (``source`` 'cache' or 'shipped'), its computation."""
    trained = ("includes training the search's own universal agent" if own
               else "does not include the starting agent's training")
    if source in ("cache", "shipped"):
        where = "the cache" if source == "cache" else "the file shipped with the agent"
        return f"wall_time_s {trained}, nor its screen (read from {where}, not recomputed)"
    return f"wall_time_s {trained}; it includes computing its screen"


def mode_line(summary: dict) -> str | None:
    """The line a search from a universal agent prints before its answer: which mode, and what neither its budget
    nor its wall time counts (None for an ordinary search)."""
    u = summary.get("universal")
    if u is None:
        return None
    source = u.get("screen_source") or "computed"
    if u["training_episodes_counted"]:
        head = (f"mode: trained its own universal agent ({u['training_episodes_counted']:,} episodes of the budget), "
                "then fine-tuned the GP's picks from it")
        left = []
    else:
        head = f"mode: fine-tuned the GP's picks from the universal agent {u['agent']}"
        card = card_note(u["agent"])
        left = [f"its training ({card})" if card else "its training"]
    if source in ("cache", "shipped"):
        left.append(f"its screen of all 120 workflows ({'shipped with it' if source == 'shipped' else 'cached'})")
        screen = ""
    else:
        secs = u.get("screen_seconds")
        screen = "; its screen of all 120 workflows computed here" + (f" ({secs:.0f} s)" if secs else "")
    return head + screen + (f"; not counted in budget or wall time: {' and '.join(left)}" if left else "")


def finalize(search, wall: float) -> dict:
    """Write the end-of-search artefacts of a ``WorkflowSearch`` and return its summary."""
    cfg, state, best = search.cfg, search.state, search.best()
    summary = {
        "red_agent": parse_red_agent(cfg.train.red_agent), "engine": cfg.train.engine, "seed": cfg.train.seed,
        **answer_summary(search),
        "episodes_used": state.episodes_used, "total_episodes": cfg.total_episodes,
        "workflows_evaluated": len(state.iterations),
        "n_compliant": sum(r.status == "compliant" for r in state.iterations),
        "n_eligible": sum(r.eligible(cfg.train.compliance_threshold) for r in state.iterations),
        "batch_workflows": cfg.batch_workflows,
        "wall_time_s": wall,
    }
    if state.phase is not None:
        summary["universal"] = universal_summary(search, summary["confidence_set"])
    if cfg.workflows is not None and state.iterations:
        rows = write_ground_truth(state.iterations, cfg, search.out / "ground_truth.csv")
        summary["eligible_workflow_effect"] = effect = eligible_effect(rows)
        summary["ground_truth_statement"] = best_set_statement(rows, effect)
    if best:
        shutil.copyfile(search.out / best.checkpoint, search.out / "best_policy.pt")
        record = best.to_dict()
        atomic_json({**{k: record[k] for k in BEST_WORKFLOW_KEYS}, "names": Workflow.parse(best.workflow).names,
                     "checkpoint": "best_policy.pt", "confidence_set": summary["confidence_set"]},
                    search.out / "best_workflow.json")
    atomic_json(summary, search.out / "summary.json")
    try:
        from workflow_rl.search.report import write_report

        write_report(search, summary)
    except Exception as e:  # noqa: BLE001 - a plotting failure must not lose the search results
        (search.out / "report.md").unlink(missing_ok=True)   # an earlier finish's report would describe another run
        print(f"warning: report not written ({type(e).__name__}: {e}); the results are in summary.json")
    return summary


def universal_summary(search, kept: list[str]) -> dict:
    """(a search from a universal agent) Where the universal agent came from and whether its training was counted,
    the eligibility calls (how many from its evaluation, how many ineligible and whether the confidence set keeps
    any of those); ``screen.csv`` holds them per workflow."""
    from workflow_rl.search import universal

    cfg, state = search.cfg, search.state
    threshold = cfg.train.compliance_threshold
    rows = universal.screen_rows(state.iterations, state.screen, threshold, kept)
    with open(search.out / "screen.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["workflow"])
        w.writeheader()
        for row in rows:
            w.writerow({k: "" if v is None else v for k, v in row.items()})
    own = cfg.universal_fraction is not None
    ineligible = [r["workflow"] for r in rows if not r["eligible"]]
    return {
        "agent": f"trained by this search ({universal.UNIVERSAL_CHECKPOINT})" if own else cfg.init_checkpoint,
        "training_episodes_counted": state.universal_episodes,
        "budget_note": (f"the universal agent's {state.universal_episodes:,} training episodes are part of the "
                        "budget" if own else "the starting agent's own training is not counted in the budget (only the "
                        "fine-tuning is)"),
        "screen_source": state.screen_source, "screen_seconds": state.screen_seconds,
        "wall_note": wall_note(own, state.screen_source),
        "universal_eligible": sum(r["universal_eligible"] for r in rows),
        "fine_tuned": len(state.iterations),
        "calls_eligible": len(rows) - len(ineligible), "calls_ineligible": len(ineligible),
        "calls_from_universal": sum(r["call_from"] == "universal" for r in rows),
        "confidence_set_keeps_ineligible": sum(r["in_confidence_set"] for r in rows if not r["eligible"]),
    }
