"""``python -m workflow_rl.cli``: the same command line as ``workflow-rl``."""
from workflow_rl.cli import run

run()
