"""``workflow-rl replay``: its flags, read into a :class:`~workflow_rl.runs.replay.ReplayConfig`.

The job (a few episodes of an agent, written as one HTML page to watch) is :func:`workflow_rl.runs.replay.replay`;
each flag's help is its field's docstring there.
"""
from __future__ import annotations

import dataclasses

from workflow_rl.cli.evaluate import AGENT_HELP, DEVICE_HELP
from workflow_rl.cli.flags import add_flags, config_from
from workflow_rl.cli.plan import add_plan_flags, plan_settings
from workflow_rl.cli.train import add_cyborg_flags
from workflow_rl.runs.replay import ReplayConfig

OWN = ("agent", "device", "vectorization", "parallel_start_method", "scenario", "plan")
"""ReplayConfig's settings whose flags are not generated: the positional agent and flags shared with evaluate."""


def replay_config(args) -> ReplayConfig:
    """The parsed flags as a :class:`~workflow_rl.runs.replay.ReplayConfig` (``--mode planned`` plays with the
    ``--plan-*`` settings)."""
    return config_from(ReplayConfig, args, args.config_names, agent=args.checkpoint, device=args.device,
                       vectorization=args.vectorization, parallel_start_method=args.parallel_start_method,
                       scenario=args.scenario, plan=plan_settings(args, planned=args.mode == "planned"))


def cmd_replay(args) -> int:
    from workflow_rl.runs.replay import replay

    result = replay(replay_config(args))
    print(result.text)
    print(f"wrote {result.out} (open it in a browser)")
    return 0


def add_replay(sub) -> None:
    r = sub.add_parser("replay", help="play episodes of an agent and write them as one HTML page to watch")
    r.add_argument("checkpoint", help=AGENT_HELP)
    names = add_flags(r, ReplayConfig, dataclasses.asdict(ReplayConfig("")), skip=OWN, check=True, command="replay")
    r.add_argument("--device", default="cpu", help=DEVICE_HELP)
    add_cyborg_flags(r, "sync")
    add_plan_flags(r)
    r.set_defaults(func=cmd_replay, config_names=names)
