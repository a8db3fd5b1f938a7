"""``workflow-rl evaluate``: the CAGE2 protocol for a checkpoint, a shipped agent or a scripted baseline, on the
native engine and/or real CybORG."""
from __future__ import annotations

import json
import time
from pathlib import Path

from workflow_rl.checks import check_out_dir
from workflow_rl.cli.numbers import positive_int, seed_int
from workflow_rl.cli.plan import add_plan_flags, plan_settings
from workflow_rl.cli.train import add_cyborg_flags, engine_opts
from workflow_rl.envs.names import ENGINES

BASELINES = ("sleep", "random", "greedy_workflow", "restore_compromised")


def _policies(args, workflow):
    """{mode: acting function}, the label, and the workflow (a checkpoint's own unless --workflow is given)."""
    from workflow_rl.rl.evaluate import agent_act, greedy_workflow_act, scripted_act

    plan = plan_settings(args)
    if plan is not None and args.checkpoint in BASELINES:
        raise ValueError(f"--plan searches with an agent's own policy: give a checkpoint or pretrained:NAME, not "
                         f"the baseline {args.checkpoint}")
    if args.checkpoint in BASELINES:
        if args.checkpoint == "greedy_workflow":
            if workflow is None:
                raise ValueError("the greedy_workflow baseline needs --workflow")
            return {"greedy": greedy_workflow_act(workflow)}, args.checkpoint, workflow
        return {"greedy": scripted_act(args.checkpoint, args.seed)}, args.checkpoint, workflow
    import torch

    from workflow_rl.rl.checkpoint import agent_from_checkpoint, load_checkpoint
    from workflow_rl.workflow import Workflow

    if args.checkpoint.startswith("pretrained:"):
        from workflow_rl.rl import pretrained

        file = pretrained.path(args.checkpoint)
    else:
        file = Path(args.checkpoint)
        if not file.exists():
            raise ValueError(f"no checkpoint at {args.checkpoint} and no baseline of that name: pass a checkpoint "
                             f"file, pretrained:NAME or one of the baselines {', '.join(BASELINES)}")
    ck = load_checkpoint(file)
    agent = agent_from_checkpoint(ck)
    if workflow is None and ck.get("workflow"):
        workflow = Workflow.parse(ck["workflow"])
    gen = torch.Generator().manual_seed(args.seed)
    acts = {}
    if args.mode in ("greedy", "both"):
        acts["greedy"] = agent_act(agent, workflow, greedy=True)
    if args.mode in ("sampled", "both"):
        acts["sampled"] = agent_act(agent, workflow, greedy=False, generator=gen)
    if plan is not None:
        from workflow_rl.rl.planner import agent_acting

        acts["planned"] = agent_acting(agent, workflow, plan, args.seed)
    return acts, args.checkpoint, workflow


def cmd_evaluate(args) -> int:
    """CAGE2 protocol: red agents x lengths (one episode of the longest length per red agent gives every length's
    running return), per engine and mode; mean ± 95% CI, compliance, and the leaderboard winner's cells."""
    from workflow_rl import parse_red_agent
    from workflow_rl.rl.config import check_device_available
    from workflow_rl.rl.evaluate import EVAL_SEED, evaluate_cells, result_dict
    from workflow_rl.workflow import parse_workflow_arg

    check_device_available(args.device)
    if args.out:
        check_out_dir("--out", args.out)
    reds = [parse_red_agent(r) for r in args.red_agents]
    lengths = sorted(set(args.lengths))
    engines = list(dict.fromkeys(args.engine))
    acts, label, workflow = _policies(args, parse_workflow_arg(args.workflow))
    results = []
    for engine in engines:
        episodes = args.cyborg_episodes if engine == "cyborg" and args.cyborg_episodes else args.episodes
        start = time.monotonic()
        for i, (mode, act) in enumerate(acts.items()):
            t0 = time.monotonic()   # the time limit is shared evenly by the modes: each gets its rounds
            deadline = (start + args.time_limit * (i + 1) / len(acts) if args.time_limit and engine == "cyborg"
                        else None)
            cells = evaluate_cells(act, reds, lengths, episodes, engine=engine, workflow=workflow,
                                   seed=EVAL_SEED if args.episode_seed is None else args.episode_seed,
                                   device=args.device, workers=args.workers, deadline=deadline,
                                   **engine_opts(args.vectorization, args.parallel_start_method, args.scenario,
                                                 engine))
            took = time.monotonic() - t0
            results += [{"engine": engine, "mode": mode, **result_dict(r), "seconds": took} for r in cells]
            print(f"{engine} {mode}: {len(cells)} cells, {took:.1f} s", flush=True)
    report = {"policy": label, "workflow": workflow.names if workflow else None, "engines": engines,
              "results": results}
    md = evaluation_markdown(label, workflow, results)
    print(md)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "evaluation.json").write_text(json.dumps(report, indent=2))
        (out / "evaluation.md").write_text(md)
        print(f"wrote {out / 'evaluation.json'} and {out / 'evaluation.md'}")
    return 0


def evaluation_markdown(label: str, workflow, results: list[dict]) -> str:
    """Two tables: every cell (engine, mode, red agent, length) with its episodes, mean, 95% CI and compliance; and
    the CAGE2 cells side by side per engine and mode, with the leaderboard winner's row."""
    from workflow_rl.rl.evaluate import CAGE2_WINNER

    lines = [f"# Evaluation of {label}", "", f"workflow {workflow.codes if workflow else 'none'}; fixed evaluation "
             "seeds; each length's return is the running return of the same episodes (see evaluate_cells)", "",
             "| engine | mode | red agent | length | episodes | mean | 95% CI | compliance |",
             "|---|---|---|---:|---:|---:|---:|---:|"]
    for r in results:
        comp = "n/a" if r["compliance"] is None else f"{r['compliance']:.3f}"
        lines.append(f"| {r['engine']} | {r['mode']} | {r['red_agent']} | {r['length']} | {r['episodes']} | "
                     f"{r['mean']:.2f} | ± {r['ci95']:.2f} | {comp} |")
    cells = [c for c in CAGE2_WINNER if any((r["red_agent"], r["length"]) == c for r in results)]
    if cells:
        short = {"B_lineAgent": "B_line", "RedMeanderAgent": "Meander"}
        lines += ["", "| engine | mode | " + " | ".join(f"{short[red]} {n}" for red, n in cells) + " | sum |",
                  "|---|---|" + "---:|" * (len(cells) + 1)]
        for engine, mode in dict.fromkeys((r["engine"], r["mode"]) for r in results):
            row = {(r["red_agent"], r["length"]): r for r in results if (r["engine"], r["mode"]) == (engine, mode)}
            vals = [row.get(c) for c in cells]
            total = sum(v["mean"] for v in vals) if all(vals) else float("nan")
            lines.append(f"| {engine} | {mode} | " + " | ".join(
                f"{v['mean']:.2f} ± {v['ci95']:.2f} (n={v['episodes']})" if v else "" for v in vals)
                + f" | {total:.2f} |")
        lines.append("| CAGE2 winner | | " + " | ".join(f"{CAGE2_WINNER[c]:.2f}" for c in cells)
                     + f" | {sum(CAGE2_WINNER[c] for c in cells):.2f} |")
    return "\n".join(lines) + "\n"


def add_evaluate(sub) -> None:
    e = sub.add_parser("evaluate", help="CAGE2 evaluation of a checkpoint, a shipped agent or a baseline")
    e.add_argument("checkpoint", help=f"a checkpoint file, pretrained:NAME (a shipped agent, e.g. pretrained:cage2), "
                                      f"or a baseline: {', '.join(BASELINES)}")
    e.add_argument("--workflow", default=None, help="workflow for compliance (default: the checkpoint's)")
    e.add_argument("--engine", nargs="+", default=["native"], choices=ENGINES,
                   help="one or both engines (e.g. --engine native cyborg)")
    e.add_argument("--red-agents", nargs="+", default=["B_lineAgent", "RedMeanderAgent", "SleepAgent"])
    e.add_argument("--lengths", nargs="+", type=positive_int, default=[30, 50, 100])
    e.add_argument("--episodes", type=positive_int, default=1000, help="episodes per red agent (each gives every "
                                                                       "length's cell)")
    e.add_argument("--cyborg-episodes", type=positive_int, default=None,
                   help="episodes per red agent on real CybORG (default: --episodes)")
    e.add_argument("--workers", type=positive_int, default=None,
                   help="real CybORG: env processes playing episodes in parallel (default: the CPU cores)")
    e.add_argument("--time-limit", type=positive_int, default=None, metavar="SECONDS",
                   help="real CybORG: start no new round of episodes after this many seconds (shared evenly by "
                        "the modes); each cell reports the episodes it finished (at least one round)")
    e.add_argument("--mode", default="both", choices=["greedy", "sampled", "both"])
    e.add_argument("--device", default="cpu")
    e.add_argument("--seed", type=seed_int, default=0, help="sampling seed (the evaluation episodes' seeds are fixed)")
    e.add_argument("--episode-seed", type=seed_int, default=None,
                   help="seed of the evaluation episodes (default: the fixed held-out evaluation seed; another one "
                        "gives a separate set, e.g. to select among agents before evaluating the chosen one)")
    add_cyborg_flags(e, "shared_memory")
    add_plan_flags(e)
    e.add_argument("--out", default=None, help="folder for evaluation.json and evaluation.md")
    e.set_defaults(func=cmd_evaluate)
