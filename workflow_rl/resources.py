"""Machine resources a command may ask for: cores, worker processes and memory.

The cores this process may use (affinity, cgroup quota), worker counts within them, and memory within every limit on
this process (physical, cgroup, ulimit). Checked where a request enters, so an oversized one is one line naming the
limit and the fix, not the OOM killer an hour in.
"""
from __future__ import annotations

import math
import os
import resource
from pathlib import Path

from workflow_rl.checks import check_int


WORKERS_PER_CORE = 4
"""Most worker processes per core a command may start (``curves --workers``, ``evaluate --workers``, episode
workers, Ray workers): a worker is a process that computes, so past a few per core the extra ones only queue for a
core (1,000 workers on 2 cores drove the load average to 226 and finished nothing), and each holds its own
copy of the engine and libraries in memory."""


def usable_cores() -> int:
    """The cores this process may run on: its CPU affinity (``taskset``, a container's cpuset), further limited by
    a cgroup CPU quota (``docker --cpus``), which the affinity does not show. ``os.cpu_count()`` counts the
    machine's cores, more than a pinned or throttled process gets."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):   # not Linux
        cores = os.cpu_count() or 1
    quota = _cgroup_cpu_quota()
    return max(1, min(cores, math.ceil(quota)) if quota else cores)


def _cgroup_cpu_quota() -> float | None:
    """CPUs' worth of time a cgroup quota grants this process (cgroup v2 ``cpu.max``, v1 ``cpu.cfs_quota_us``),
    None where there is none."""
    v2 = (_read("/sys/fs/cgroup/cpu.max") or "").split()
    v1 = [(_read(f"/sys/fs/cgroup/cpu/cpu.cfs_{k}_us") or "").strip() for k in ("quota", "period")]
    for quota, period in (v2[:2] if len(v2) >= 2 else ("", ""), v1):
        if quota.isdigit() and period.isdigit() and int(quota) > 0 and int(period) > 0:
            return int(quota) / int(period)
    return None


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text()
    except (OSError, ValueError):
        return None


def check_workers(name: str, value) -> int:
    """A count of worker processes: an integer >= 1 and at most :data:`WORKERS_PER_CORE` per usable core."""
    from workflow_rl.ranges import RANGES

    check_int(name, value, RANGES["workers"].lo)
    cap = min(WORKERS_PER_CORE * usable_cores(), RANGES["workers"].hi)
    if value > cap:
        raise ValueError(f"{name} {value:,} starts that many processes, more than {WORKERS_PER_CORE} per core of the "
                         f"{usable_cores()} this process may use: the extra ones would only wait for a core; use at "
                         f"most {cap} (one per core is fastest)")
    return value


def physical_memory() -> int | None:
    """Bytes of physical memory of this machine (None where the OS does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def check_memory(what: str, need: int, fix: str, limit: int | None = None, where: str = "this machine's") -> None:
    """Refuse a request whose estimated memory ``need`` exceeds ``limit`` (``where`` names whose it is: a GPU's),
    or by default any limit on this process's memory (:func:`memory_limits`), with the estimate and the limit,
    instead of dying of MemoryError, an allocator traceback or the OOM killer once allocated."""
    limits = memory_limits() if limit is None else [(limit, f"{where} {gib(limit)}", "")]
    for room, whose, raise_it in limits:
        if need > room:
            raise ValueError(f"{what} would need about {gib(need)} of memory, more than {whose}: {fix}{raise_it}")


def memory_limits() -> list[tuple[int, str, str]]:
    """(bytes a request may still take, whose limit that is, how to raise it) for every limit on this process's
    memory: the machine's physical memory, a container's memory limit (cgroup), and the address-space and
    data-size limits (``ulimit -v``, ``ulimit -d``). The last two count what the process has already mapped: a
    torch and numba process maps far more than it uses (its libraries, its threads' reserved stacks and heaps:
    about 0.8 GiB before any work), and the limit holds every mapping, so a request gets only what is left."""
    out = []
    phys = physical_memory()
    if phys is not None:
        out.append((phys, f"this machine's {gib(phys)}", ""))
    cgroup = cgroup_memory_limit()
    if cgroup is not None and (phys is None or cgroup < phys):
        out.append((cgroup, f"this container's memory limit (cgroup), {gib(cgroup)}", ""))
    for res, field, name, opt in ((resource.RLIMIT_AS, "VmSize", "address-space", "-v"),
                                  (resource.RLIMIT_DATA, "VmData", "data-size", "-d")):
        soft = resource.getrlimit(res)[0]
        if soft != resource.RLIM_INFINITY and soft >= 0:
            used = process_memory(field) or 0
            out.append((max(0, soft - used), f"the {gib(max(0, soft - used))} the {name} limit leaves (ulimit {opt}: "
                        f"{gib(soft)}, of which this process already maps {gib(used)})",
                        f"; or raise the limit (ulimit {opt})"))
    return out


def cgroup_memory_limit() -> int | None:
    """Bytes this process's cgroup may use (v2 ``memory.max``, v1 ``memory.limit_in_bytes``), None where
    unlimited or unknown: a container's limit, which the machine's physical memory does not show."""
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        text = (_read(path) or "").strip()
        if text.isdigit():
            return int(text)
    return None


def process_memory(field: str) -> int | None:
    """Bytes of this process's ``field`` in /proc/self/status (``VmSize``: its address space; ``VmData``: its
    data and private writable mappings), None where the OS does not say."""
    for line in (_read("/proc/self/status") or "").splitlines():
        key, _, value = line.partition(":")
        if key == field and value.split() and value.split()[0].isdigit():
            return int(value.split()[0]) * 1024
    return None


def gib(n: int) -> str:
    """A byte count as people read it: GiB, or MiB below one GiB."""
    return f"{n / 2**30:,.1f} GiB" if n >= 2**30 else f"{n / 2**20:,.0f} MiB"
