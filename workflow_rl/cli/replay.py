"""``workflow-rl replay``: its flags, read into a :class:`~workflow_rl.runs.replay.ReplayConfig`.

The job (a few episodes of an agent, written as one HTML page to watch) is :func:`workflow_rl.runs.replay.replay`.
"""
from __future__ import annotations

from pathlib import Path

from workflow_rl.cli.evaluate import DEVICE_HELP
from workflow_rl.cli.numbers import positive_int, seed_int
from workflow_rl.cli.plan import add_plan_flags, plan_settings
from workflow_rl.cli.train import add_cyborg_flags
from workflow_rl.envs.names import ENGINES
from workflow_rl.runs.evaluate import BASELINES
from workflow_rl.runs.replay import MODES


def replay_config(args):
    """The parsed flags as a :class:`~workflow_rl.runs.replay.ReplayConfig` (``--mode planned`` plays with the
    ``--plan-*`` settings)."""
    from workflow_rl.runs.replay import ReplayConfig

    return ReplayConfig(
        agent=args.checkpoint, workflow=args.workflow, red_agent=args.red_agent, engine=args.engine,
        episodes=args.episodes, length=args.length, mode=args.mode, seed=args.seed, device=args.device,
        vectorization=args.vectorization, parallel_start_method=args.parallel_start_method, scenario=args.scenario,
        plan=plan_settings(args, planned=args.mode == "planned"), out=args.out)


def cmd_replay(args) -> int:
    from workflow_rl.runs.replay import replay

    result = replay(replay_config(args))
    print(result.text)
    print(f"wrote {result.out} (open it in a browser)")
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
    r.add_argument("--mode", default="greedy", choices=MODES,
                   help="how a trained agent acts (planned: with the planner, settings --plan-*)")
    r.add_argument("--seed", type=seed_int, default=0, help="seed of the episodes (and of sampling)")
    r.add_argument("--device", default="cpu", help=DEVICE_HELP)
    add_cyborg_flags(r, "sync")
    add_plan_flags(r)
    r.add_argument("--out", type=Path, default=Path("runs/replay.html"), help="the HTML file to write")
    r.set_defaults(func=cmd_replay)
