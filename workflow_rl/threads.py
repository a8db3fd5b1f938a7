"""How many threads torch, numba and numpy's BLAS compute with: one policy, applied at each command's start.

One policy (:func:`pick`), applied at each command's start (the command line) and in every worker process
(:func:`configure`); a library call (``make_act``) leaves them alone.

Why: torch's and numba's thread pools default to one thread per core, and their threads meet at the end of every
parallel operation. Beside another busy process the thread that lands on its core runs only in the scheduler's
time slices, and every operation waits for it; the waiting threads spin meanwhile, so beside one busy process a
thread per core makes a run several times slower (docs/reliability.md). Our networks are small and the engine's steps cheap, so
an operation is short next to a time slice, and a second thread pays only where its share of one operation lasts
tens of milliseconds. So torch gets a thread per :data:`MACS_PER_THREAD` multiply-adds of the largest matrix
product the run computes at once, numba one per :data:`ENVS_PER_THREAD` envs stepped at once, each at least 1 and
at most the cores this process may use (``resources.usable_cores``); acting one env at a time (the planner,
an episode worker) gets one thread of each. On a quiet many-core machine a large native batch then
steps on fewer threads than it could: ``--threads N`` (or ``WORKFLOW_RL_THREADS=N``) gives it N.

Overrides, strongest first: ``--threads`` (the computing commands), then ``WORKFLOW_RL_THREADS`` (N, or ``off``:
leave both libraries at their own defaults, one thread per core), then
``OMP_NUM_THREADS`` (torch) and ``NUMBA_NUM_THREADS`` (numba) where set: a library the user sized is left alone.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from workflow_rl.ranges import MAX_THREADS, RANGES  # noqa: F401 (MAX_THREADS: the bound, named where it was)
from workflow_rl.resources import usable_cores

ENV_VAR = "WORKFLOW_RL_THREADS"
"""The environment variable that overrides the policy: a thread count, ``auto`` (the policy) or ``off``."""
MACS_PER_THREAD = 2**29
"""Multiply-adds of one matrix product per torch thread: about 27 ms of one core (20 GMAC/s measured on the 2-core
CPU), longer than the waits a thread without a core of its own costs each operation (~20 ms measured)."""
ENVS_PER_THREAD = 16_384
"""Native envs stepped at once per numba thread: about 20 ms of one core (1.2 us per env and step measured), for
the same reason."""
BLAS_VARS = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
"""Where the user sized numpy's and scipy's BLAS, which otherwise takes torch's count: its default, a thread per core,
spin-waits beside a busy process as torch's does (the search's GP fits, scikit-learn's, were 25-200x slower for it
beside another job in the test suite)."""
LIBRARY_VARS = {"torch": "OMP_NUM_THREADS", "numba": "NUMBA_NUM_THREADS"}
"""The variable each library reads for its own thread count: where the user set it, the policy leaves it alone."""


@dataclass(frozen=True)
class Work:
    """What a run computes at once, as far as threads go: the multiply-adds of its largest matrix product (a
    training minibatch through its widest layer, all runs of a batch together) and the envs it steps in one call.
    The default is acting one env at a time."""

    macs: int = 0
    envs: int = 1


@dataclass(frozen=True)
class Threads:
    """Threads for torch and numba; None leaves that library as it is."""

    torch: int | None
    numba: int | None


def parse_threads(text) -> int | str:
    """A ``--threads`` or ``WORKFLOW_RL_THREADS`` value: a thread count >= 1, ``auto`` or ``off`` (ValueError
    otherwise, naming what it takes)."""
    value = str(text).strip().lower()
    if value in ("auto", "off"):
        return value
    r = RANGES["threads"]
    if not value.isdigit() or not r.contains(int(value)):
        raise ValueError(f"threads must be a count >= {r.lo} (at most {r.hi}), 'auto' (pick from the work and the "
                         f"cores) or 'off' (the libraries' own defaults), got {text!r}")
    return int(value)


def _share(amount: int, per_thread: int, cores: int) -> int:
    """One thread per ``per_thread`` of ``amount``, at least 1 and at most ``cores``."""
    return max(1, min(cores, amount // per_thread))


def pick(work: Work = Work(), cores: int = 1, override=None, environ=None) -> Threads:
    """The policy (see the module docstring): threads for ``work`` on ``cores`` cores, ``override`` (``--threads``)
    first, then ``environ``'s (default ``os.environ``) ``WORKFLOW_RL_THREADS``, then its library variables."""
    environ = os.environ if environ is None else environ
    if override is not None:
        choice = parse_threads(override)
    else:
        try:
            choice = parse_threads(environ.get(ENV_VAR, "auto"))
        except ValueError as e:
            raise ValueError(f"{ENV_VAR}: {e} (unset it or give a count)") from None
    if choice == "off":
        return Threads(None, None)
    if isinstance(choice, int):
        return Threads(choice, choice)
    want = {"torch": _share(work.macs, MACS_PER_THREAD, cores), "numba": _share(work.envs, ENVS_PER_THREAD, cores)}
    return Threads(**{lib: None if environ.get(var) else want[lib] for lib, var in LIBRARY_VARS.items()})


def apply(threads: Threads) -> None:
    """Size torch's intra-op (and, while it still can be, inter-op) pool and numba's; numba never beyond the
    threads it launched (``NUMBA_NUM_THREADS``, fixed at its import); numpy's and scipy's BLAS as torch (unless
    :data:`BLAS_VARS` sized it)."""
    if threads.torch is not None:
        import torch

        torch.set_num_threads(threads.torch)
        try:
            torch.set_num_interop_threads(threads.torch)
        except RuntimeError:   # settable once, before any inter-op work: the first call's value stays
            pass
        if not any(os.environ.get(v) for v in BLAS_VARS):
            from threadpoolctl import threadpool_limits

            threadpool_limits(threads.torch, user_api="blas")
    if threads.numba is not None:
        import numba

        numba.set_num_threads(min(threads.numba, numba.config.NUMBA_NUM_THREADS))


def configure(work: Work = Work(), override=None, cores: int | None = None) -> Threads:
    """Pick and apply the threads for ``work`` (``cores``: default the cores this process may use); returns
    them."""
    threads = pick(work, usable_cores() if cores is None else cores, override)
    apply(threads)
    return threads
