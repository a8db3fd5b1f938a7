"""``python -m workflow_rl.cli``: the same command line as ``workflow-rl``."""
import sys

from workflow_rl.cli import main

sys.exit(main())
