"""``runs.failures``: what ends a job without being a bug (bad input, the machine, a worker gone), as one line.

``workflow-rl`` prints such a failure as one ``error: ...`` line with its exit status; a script that runs jobs
through ``workflow_rl.runs`` tells them from a bug (whose traceback is the report) with the same rule,
:func:`failure`.
"""
from __future__ import annotations

from workflow_rl.files import os_error_line


def failure(e: BaseException) -> tuple[str, int] | None:
    """The one line and exit status of ``e`` where it is no bug: a refused input (a ValueError, a missing file,
    CybORG unavailable, an unusable checkpoint) or the machine (any other OSError: the disk is full, a file grew past
    a limit, a folder vanished; ``files.os_error_line``), status 2; a worker process or Ray task that failed (its own
    traceback is in the message), status 1. None for anything else."""
    from workflow_rl.envs.cyborg import CybORGUnavailable
    from workflow_rl.rl.checkpoint import CheckpointError

    if isinstance(e, (ValueError, CybORGUnavailable, FileNotFoundError, CheckpointError)):
        return str(e), 2
    if isinstance(e, OSError):
        return os_error_line(e), 2
    if isinstance(e, RuntimeError):
        from workflow_rl.envs.cyborg_vector import EngineWorkerError
        from workflow_rl.search.ray_executor import SearchWorkerError

        if isinstance(e, (EngineWorkerError, SearchWorkerError)):
            return str(e), 1
    return None
