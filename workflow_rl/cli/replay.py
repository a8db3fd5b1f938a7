"""``workflow-rl replay``: watch an agent defend.

Plays a few episodes of a checkpoint, a shipped agent or a baseline (resolved exactly as ``evaluate`` resolves them) and
writes one self-contained HTML page that replays them step by step: the 13 hosts in their subnets with red's access,
both sides' actions, the reward, and compliance under the workflow (``rl.viewer``).
"""
from __future__ import annotations

from pathlib import Path

from workflow_rl.checks import check_replay_steps

from workflow_rl.files import check_out_file
from workflow_rl.cli.evaluate import (BASELINES, DEVICE_HELP, agent_policies, check_devices, read_files)
from workflow_rl.cli.numbers import positive_int, seed_int
from workflow_rl.cli.plan import add_plan_flags
from workflow_rl.cli.train import add_cyborg_flags
from workflow_rl.runs.engines import engine_device, engine_opts
from workflow_rl.envs.names import ENGINES
from workflow_rl.files import atomic_write


def cmd_replay(args) -> int:
    from workflow_rl import parse_red_agent
    from workflow_rl.rl import viewer
    from workflow_rl.workflow import parse_workflow_arg

    check_replay_steps(args.episodes, args.length)
    out = check_out_file("--out", args.out, read_files(args), mine="replay")
    red = parse_red_agent(args.red_agent)
    check_devices(args.device, args.engine)
    args.plan = args.plan or args.mode == "planned"   # --mode planned is the planner's play (planning/planner.py)
    acts, label, workflow = agent_policies(args, parse_workflow_arg(args.workflow), [args.length])
    act = acts.get(args.mode) or acts["greedy"]   # a baseline acts one way whatever the mode
    act = act[args.length] if isinstance(act, dict) else act   # planned: told the episode's length
    episodes = viewer.record_episodes(act, red, args.episodes, args.length, engine=args.engine,
                                      seed=args.seed, workflow=workflow,
                                      device=engine_device(args.engine, args.device),
                                      **engine_opts(args.vectorization, args.parallel_start_method, args.scenario,
                                                    args.engine))
    meta = {"agent": label, "workflow": workflow.codes if workflow else None, "red_agent": red,
            "engine": args.engine, "mode": "scripted" if args.checkpoint in BASELINES else args.mode,
            "seed": args.seed, "length": args.length}
    for ep in episodes:
        s = ep["summary"]
        comp = "n/a" if s["compliance"] is None else f"{s['compliance']:.3f}"
        print(f"episode {ep['index'] + 1}: return {s['return']:.2f}, compliance {comp}")
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(out, "w", encoding="utf-8") as f:   # replaces the file (checked above), never writes through it
        f.write(viewer.html(episodes, meta))
    print(f"wrote {out} (open it in a browser)")
    return 0


def add_replay(sub) -> None:
    r = sub.add_parser("replay", help="play episodes of an agent and write them as one HTML page to watch")
    r.add_argument("checkpoint", help=f"a checkpoint file, pretrained:NAME (the shipped agent: pretrained:universal), "
                                      f"or a baseline: {', '.join(BASELINES)}")
    r.add_argument("--workflow", default=None, help="workflow for compliance (default: the checkpoint's)")
    r.add_argument("--red-agent", default="B_lineAgent", help="red agent or mixture (e.g. meander, mix)")
    r.add_argument("--engine", default="native", choices=ENGINES)
    r.add_argument("--episodes", type=positive_int, default=3, help="episodes in the page (a chooser picks one)")
    r.add_argument("--length", type=positive_int, default=100, help="steps per episode")
    r.add_argument("--mode", default="greedy", choices=["greedy", "sampled", "planned"],
                   help="how a trained agent acts (planned: with the planner, settings --plan-*)")
    r.add_argument("--seed", type=seed_int, default=0, help="seed of the episodes (and of sampling)")
    r.add_argument("--device", default="cpu", help=DEVICE_HELP)
    add_cyborg_flags(r, "sync")
    add_plan_flags(r)
    r.add_argument("--out", type=Path, default=Path("runs/replay.html"), help="the HTML file to write")
    r.set_defaults(func=cmd_replay)
