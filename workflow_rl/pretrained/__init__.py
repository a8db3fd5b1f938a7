"""Package data: the shipped pretrained agents (``NAME.pt`` slim checkpoints and ``NAME.json`` cards).

No code lives here; load them with :mod:`workflow_rl.rl.pretrained` (``workflow_rl.rl.pretrained.load("universal")``).
"""
