"""Decision-time planning: a particle belief over engine states and the planner that uses it.

The particle belief over native-engine states (:mod:`.belief`) and the planner that rolls the agent's own policy out
from it (:mod:`.planner`, with :func:`~.planner.make_act`, the one acting API).

Part of the ``rl`` layer (it plans with a trained agent, through ``rl.actor.Actor``; ``search`` and ``cli`` sit
above it), in its own subpackage: the belief is not an engine, and the planner is not training."""
