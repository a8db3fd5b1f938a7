"""The runs layer: every job of the command line, callable from Python, and the rules the jobs share.

One function per job (``train``, ``search``, ``evaluate``, ``replay``, ``demo``, ``expert_iterate``,
``parity_report``, ``compare_report``; ``bench.run`` and ``curves.run`` sit with their modules); the run folder
(``rundir``), the engines (``engines``), the settings a run takes from a recipe or checkpoint (``settings``) and the
failures that are no bug (``failures``). ``workflow_rl.cli`` only reads flags into their arguments.
"""
