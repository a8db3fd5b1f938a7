"""Moved to :mod:`workflow_rl.rl.planning.planner` (the planner now lives with its belief, ``workflow_rl.rl.planning``).

This module only re-exports it, so code written against the old path (``workflow_rl.rl.planner.make_act``, as the
README documented it) keeps working. Nothing in the package imports it (``tests/test_layers.py`` checks that, and
exempts it from the layer rule for that reason)."""
from workflow_rl.rl.planning.planner import (  # noqa: F401 - re-exported
    ActFn, Decision, PlanConfig, Planner, agent_acting, check_observation, check_step, fix_candidates, make_act, on_cpu,
    play_true_state)
