"""``workflow-rl expert-iterate``: the network trained towards the planner's choices, round after round.

Its flags are :class:`~workflow_rl.rl.expert_iteration.ExpertConfig`'s fields (``cli.flags``) and the planner's
``--plan-*`` flags (``cli.plan``); the job is ``workflow_rl.runs.expert_iteration``.
"""
from __future__ import annotations

import dataclasses

from workflow_rl.cli.flags import OVERWRITE_HELP, add_flags, config_from, settings
from workflow_rl.cli.plan import add_plan_flags, plan_settings


def add_expert(sub) -> None:
    from workflow_rl.rl.expert_iteration import ExpertConfig
    from workflow_rl.runs.expert_iteration import ExpertRun

    p = sub.add_parser("expert-iterate", help="expert iteration: play planned episodes, train the network towards "
                                              "the planner's choices, repeat with the better network")
    names = add_flags(p.add_argument_group("expert iteration (rl/expert_iteration.py)"), ExpertConfig,
                      {k: v for k, v in ExpertConfig().to_dict().items() if k != "plan"})
    add_plan_flags(p, switch=False)
    run = add_flags(p, ExpertRun, dataclasses.asdict(ExpertRun()), skip=("threads",),
                    notes={"overwrite": OVERWRITE_HELP.format(out="--out")})
    p.set_defaults(func=cmd_expert, config_names=names, run_names=run)


def expert_job(args):
    """The parsed flags as the ``(ExpertConfig, ExpertRun)`` that ``runs.expert_iteration.expert_iterate`` takes."""
    from workflow_rl.rl.expert_iteration import ExpertConfig
    from workflow_rl.runs.expert_iteration import ExpertRun

    cfg = ExpertConfig(**settings(args, args.config_names), plan=plan_settings(args)).validate()
    return cfg, config_from(ExpertRun, args, args.run_names, threads=args.threads)


def cmd_expert(args) -> int:
    from workflow_rl.runs.expert_iteration import expert_iterate

    return expert_iterate(*expert_job(args)).exit_code
