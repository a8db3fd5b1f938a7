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
    a limit, a folder vanished; ``files.os_error_line``; memory running out, :func:`out_of_memory`), status 2; a
    worker process or Ray task that failed (its own traceback is in the message), status 1. None for anything
    else."""
    from workflow_rl.envs.cyborg import CybORGUnavailable
    from workflow_rl.rl.checkpoint import CheckpointError

    if isinstance(e, (ValueError, CybORGUnavailable, FileNotFoundError, CheckpointError)):
        return str(e), 2
    if out_of_memory(e):
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


OOM_TEXT = ("can't allocate memory", "out of memory")
"""What torch's allocators say when an allocation fails (``DefaultCPUAllocator: can't allocate memory``, CUDA's
``out of memory``): a RuntimeError, not a MemoryError."""


def out_of_memory(e: BaseException) -> bool:
    """Whether ``e`` is memory running out: Python's or numpy's MemoryError, or torch's allocation failures
    (``torch.OutOfMemoryError`` on a GPU, a RuntimeError naming the failed allocation on the CPU)."""
    if isinstance(e, MemoryError):
        return True
    return isinstance(e, RuntimeError) and any(t in str(e) for t in OOM_TEXT)


def is_load_failure(e: BaseException) -> bool:
    """Whether ``e``, raised while the command line is parsed (which imports torch, numba and the package), is a
    library that could not load: a MemoryError, or an ImportError/OSError that is not the package's own (a missing
    ``workflow_rl`` module is a bug, whose traceback is the report)."""
    if isinstance(e, MemoryError):
        return True
    return isinstance(e, (ImportError, OSError)) and not (getattr(e, "name", None) or "").startswith("workflow_rl")


def load_failure(e: BaseException) -> str:
    """The one line for a library that would not load as a command starts (torch's or numba's shared objects,
    ``e`` an ImportError, OSError or MemoryError): measured on the 2-core machine, under a virtual-memory limit
    (``ulimit -v``) of 800 MB numba's LLVM cannot map its code; 1.2 GB is enough for an evaluation."""
    first = (str(e).splitlines() or [type(e).__name__])[0][:200]
    return (f"a library workflow-rl computes with did not load ({type(e).__name__}: {first}): under a memory limit "
            "(ulimit -v) below about 1.2 GB, torch and numba cannot map their code, so raise it; otherwise reinstall "
            "(`make setup`)")
