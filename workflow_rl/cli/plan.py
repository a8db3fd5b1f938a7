"""The ``--plan`` flag group of ``workflow-rl evaluate``, made from the planner's settings.

``--plan`` and one ``--plan-NAME`` flag per :class:`~workflow_rl.rl.planning.planner.PlanConfig` setting, whose
default, type, help and checks are the dataclass's own.
"""
from __future__ import annotations

import dataclasses

from workflow_rl.cli.flags import add_flags

PREFIX = "plan_"


def add_plan_flags(parser, switch: bool = True) -> None:
    """Add the group to ``parser`` (its values are read back by :func:`plan_settings`); ``switch``: with the
    ``--plan`` flag itself (``evaluate``'s; a command that always plans, ``expert-iterate``, has none)."""
    from workflow_rl.rl.planning.planner import PlanConfig

    g = parser.add_argument_group("planning (belief + rollouts with the native engine as the model; "
                                  "planning/planner.py)")
    if switch:
        g.add_argument("--plan", action="store_true",
                       help="also play the agent planned at each step (a 'planned' mode beside greedy/sampled); the "
                            "planner is not told the episode's length, as CAGE2's own evaluation loop tells an agent "
                            "nothing")
    add_flags(g, PlanConfig, dataclasses.asdict(PlanConfig()), prefix=PREFIX, note=" (default %(default)s)")


def plan_settings(args, planned: bool = False):
    """The validated PlanConfig of the parsed flags, or None without ``--plan`` (or ``planned``: the command plays
    planned anyway, as ``replay --mode planned`` does) (a ValueError naming the flag for a bad setting: 0
    particles, a top-k above 145, a negative horizon...); always the config where the parser has no ``--plan``
    switch."""
    from workflow_rl.rl.planning.planner import PlanConfig

    config = PlanConfig(**{f.name: getattr(args, PREFIX + f.name) for f in dataclasses.fields(PlanConfig)})
    config.validate()   # checked even without --plan: a typo'd setting is not silently unused
    return config if planned or getattr(args, "plan", True) else None
