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
    a limit, a folder vanished; ``files.os_error_line``) or memory running out, status 2; a worker process or Ray task that failed (its own
    traceback is in the message), status 1. None for anything else."""
    from workflow_rl.envs.cyborg import CybORGUnavailable
    from workflow_rl.rl.checkpoint import CheckpointError

    if isinstance(e, (ValueError, CybORGUnavailable, FileNotFoundError, CheckpointError)):
        return str(e), 2
    if isinstance(e, MemoryError):
        return ("out of memory: this job needs more than the memory left to it (its memory limit or the machine's "
                "free memory); lower its sizes (--n-envs, --episodes, --workers, --plan-particles) or free memory and "
                "run again; a train or search run continues from its last checkpoint with --resume"), 2
    if isinstance(e, OSError):
        return os_error_line(e), 2
    if isinstance(e, RuntimeError):
        from workflow_rl.envs.cyborg_vector import EngineWorkerError
        from workflow_rl.search.ray_executor import SearchWorkerError

        if isinstance(e, (EngineWorkerError, SearchWorkerError)):
            return str(e), 1
    return None


def load_failure(e: BaseException) -> str:
    """The one line for a library that would not load as a command starts (torch's or numba's shared objects,
    ``e`` an ImportError, OSError or MemoryError): measured on the 2-core machine, under a virtual-memory limit
    (``ulimit -v``) of 800 MB numba's LLVM cannot map its code; 1.2 GB is enough for an evaluation."""
    first = (str(e).splitlines() or [type(e).__name__])[0][:200]
    return (f"a library workflow-rl computes with did not load ({type(e).__name__}: {first}): under a memory limit "
            "(ulimit -v) below about 1.2 GB, torch and numba cannot map their code, so raise it; otherwise reinstall "
            "(`make setup`)")
