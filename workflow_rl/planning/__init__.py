"""Decision-time planning: the particle belief over native-engine states (:mod:`.belief`) and the planner that
rolls the agent's own policy out from it (:mod:`.planner`, with :func:`~.planner.make_act`, the one acting API).

A layer of its own, above ``rl`` (it plans with a trained agent, through ``rl.policy.Policy``) and below ``search``
and ``cli``: the belief is not an engine, and the planner is not training."""
