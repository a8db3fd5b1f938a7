"""``workflow-rl evaluate``: the CAGE2 protocol for a checkpoint or a scripted baseline."""
from __future__ import annotations

import json
from pathlib import Path

from workflow_rl.checks import check_out_dir
from workflow_rl.cli.numbers import positive_int, seed_int
from workflow_rl.cli.train import add_cyborg_flags, engine_opts
from workflow_rl.envs.names import ENGINES

BASELINES = ("sleep", "random", "greedy_workflow", "restore_compromised")


def cmd_evaluate(args) -> int:
    """CAGE2 protocol for a checkpoint (or a baseline): lengths x red agents, mean ± 95% CI, compliance."""
    from workflow_rl import parse_red_agent
    from workflow_rl.rl.evaluate import (agent_act, evaluate_policy, greedy_workflow_act, result_dict,
                                         scripted_act)
    from workflow_rl.rl.checkpoint import agent_from_checkpoint, load_checkpoint
    from workflow_rl.rl.config import check_device_available
    from workflow_rl.workflow import Workflow, parse_workflow_arg

    check_device_available(args.device)
    if args.out:
        check_out_dir("--out", args.out)
    reds = [parse_red_agent(r) for r in args.red_agents]
    lengths = args.lengths
    workflow = parse_workflow_arg(args.workflow)
    if args.checkpoint not in BASELINES and not Path(args.checkpoint).exists():
        raise ValueError(f"no checkpoint at {args.checkpoint} and no baseline of that name: pass a checkpoint file "
                         f"or one of the baselines {', '.join(BASELINES)}")
    if args.checkpoint in BASELINES:
        if args.checkpoint == "greedy_workflow":
            if workflow is None:
                raise ValueError("the greedy_workflow baseline needs --workflow")
            acts = {"greedy": greedy_workflow_act(workflow)}
        else:
            acts = {"greedy": scripted_act(args.checkpoint, args.seed)}
        label = args.checkpoint
    else:
        ck = load_checkpoint(Path(args.checkpoint))
        agent = agent_from_checkpoint(ck)
        if workflow is None and ck.get("workflow"):
            workflow = Workflow.parse(ck["workflow"])
        import torch

        gen = torch.Generator().manual_seed(args.seed)
        acts = {}
        if args.mode in ("greedy", "both"):
            acts["greedy"] = agent_act(agent, workflow, greedy=True)
        if args.mode in ("sampled", "both"):
            acts["sampled"] = agent_act(agent, workflow, greedy=False, generator=gen)
        label = args.checkpoint
    results = []
    for mode, act in acts.items():
        for red in reds:
            for length in lengths:
                r = evaluate_policy(act, red, length, args.episodes, engine=args.engine, workflow=workflow,
                                    device=args.device,
                                    **engine_opts(args.vectorization, args.parallel_start_method, args.scenario,
                                                  args.engine))
                results.append({"mode": mode, **result_dict(r)})
    report = {"policy": label, "workflow": workflow.names if workflow else None, "engine": args.engine,
              "results": results}
    lines = [f"# Evaluation of {label}", "",
             f"engine {args.engine}, {args.episodes} episodes per cell, workflow "
             f"{workflow.codes if workflow else 'none'}", "",
             "| mode | red agent | length | mean | 95% CI | compliance |", "|---|---|---:|---:|---:|---:|"]
    for r in results:
        comp = "n/a" if r["compliance"] is None else f"{r['compliance']:.3f}"
        lines.append(f"| {r['mode']} | {r['red_agent']} | {r['length']} | {r['mean']:.2f} | ± {r['ci95']:.2f} | "
                     f"{comp} |")
    md = "\n".join(lines) + "\n"
    print(md)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "evaluation.json").write_text(json.dumps(report, indent=2))
        (out / "evaluation.md").write_text(md)
        print(f"wrote {out / 'evaluation.json'} and {out / 'evaluation.md'}")
    return 0


def add_evaluate(sub) -> None:
    e = sub.add_parser("evaluate", help="CAGE2 evaluation of a checkpoint or a baseline")
    e.add_argument("checkpoint", help=f"a checkpoint file, or a baseline: {', '.join(BASELINES)}")
    e.add_argument("--workflow", default=None, help="workflow for compliance (default: the checkpoint's)")
    e.add_argument("--engine", default="native", choices=ENGINES)
    e.add_argument("--red-agents", nargs="+", default=["B_lineAgent", "RedMeanderAgent", "SleepAgent"])
    e.add_argument("--lengths", nargs="+", type=positive_int, default=[30, 50, 100])
    e.add_argument("--episodes", type=positive_int, default=1000)
    e.add_argument("--mode", default="both", choices=["greedy", "sampled", "both"])
    e.add_argument("--device", default="cpu")
    e.add_argument("--seed", type=seed_int, default=0)
    add_cyborg_flags(e, "shared_memory")
    e.add_argument("--out", default=None, help="folder for evaluation.json and evaluation.md")
    e.set_defaults(func=cmd_evaluate)
