"""The value checks every layer shares: one helper per kind of check (type, finite range, seed, output folder,
memory), so a setting is refused the same way, naming its flag and the fix, wherever it enters (the command line,
a config dataclass, ``make_vector_env``, a state file). Below every other layer: it imports nothing of the package.
"""
from __future__ import annotations

import dataclasses
import math
import os
import resource
import stat
import sys
import tempfile
import types
import typing
from pathlib import Path

MAX_SEED = 2**63 - 1
"""Seeds are 64-bit signed integers in torch and numpy: larger ones overflow deep inside a generator."""
MAX_EPISODE_LENGTH = 2**31 - 1
"""The native engine counts an episode's steps in int32 (``sim.native.SimState.t``, its kernels' length argument):
a longer episode overflows inside the kernel, so every episode length (training, evaluation) is checked against it
where it enters."""
MAX_EPISODES = 10_000_000
"""Most episodes an evaluation may ask for per cell (``evaluate --episodes``). Ten million 100-step episodes are
10**9 env-steps per red agent (tens of minutes on the native engine, years on real CybORG) and their per-episode
results (``rl.evaluate.Episodes``: a return and two fix counts) take 240 MB per cell: the protocol asks for
hundreds to thousands, and a mistyped count (10**19) would otherwise start rounds that never end."""
MAX_REPLAY_STEPS = 100_000
"""Most steps (episodes x length) one replay page holds: each step is about 240 bytes of the page, so 100,000 steps
are a page of about 25 MB, about what a browser still opens; ``replay --length 10**9`` would otherwise play for
days without a word and then write a page no browser can open."""
MAX_BENCH_REPEATS = 100
"""Most repeats of a native ``bench`` cell (its median is reported): each repeat is a full timed run of the cell,
and past a few dozen the median no longer moves, so 2**31 can only be a typo (it would run for years in silence)."""
MAX_BENCH_CYBORG_STEPS = 100_000
"""Most vector steps x envs of one real-CybORG ``bench`` cell: CybORG steps run in the thousands per second, so
100,000 is minutes per cell; more adds nothing to a throughput figure."""
WORKERS_PER_CORE = 4
"""Most worker processes per core a command may start (``curves --workers``, ``evaluate --workers``, episode
workers, Ray workers): a worker is a process that computes, so past a few per core the extra ones only queue for a
core (1,000 workers on 2 cores drove the load average to 226 and finished nothing), and each holds its own
copy of the engine and libraries in memory."""
NAME_MAX = 255
"""Bytes a single file or folder name may have on Linux's file systems (ext4, xfs, btrfs, tmpfs)."""
PATH_MAX = 4096
PATH_ROOM = 256
"""Bytes a run needs below its folder for the files it writes there (``workflows/<name>/checkpoints/...``): a
folder path longer than ``PATH_MAX - PATH_ROOM`` would fail at the first deep write."""


def flag(name: str) -> str:
    """The command-line spelling of a setting, as error messages name it."""
    return "--" + name.replace("_", "-")


def check_bool(name: str, value) -> bool:
    """``value`` if it is a real bool: the string 'no' is truthy, so a mistyped option must not mean True."""
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return value


def check_int(name: str, value, lo: int | None = None, hi: int | None = None) -> int:
    """``value`` if it is an integer (not a bool) within [lo, hi]; otherwise one message naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    _check_bounds(name, value, lo, hi, "")
    return value


def check_float(name: str, value, lo: float | None = None, hi: float | None = None, lo_open: bool = False) -> float:
    """``value`` if it is a finite number within [lo, hi] ((lo, hi] with ``lo_open``): nan and inf are refused,
    because every comparison with nan is False and an infinite weight or step size turns training into NaNs."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be a number, got {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value}")
    if lo_open and lo is not None and value <= lo:
        raise ValueError(f"{name} must be > {lo:g}, got {value:g}")
    _check_bounds(name, value, lo, hi, "g")
    return value


def _check_bounds(name: str, value, lo, hi, fmt: str) -> None:
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        want = (f"in [{lo:{fmt}}, {hi:{fmt}}]" if lo is not None and hi is not None else
                f">= {lo:{fmt}}" if lo is not None else f"<= {hi:{fmt}}")
        raise ValueError(f"{name} must be {want}, got {value:{fmt}}")


def check_seed(name: str, value) -> int:
    """A seed torch and numpy both accept: an integer in 0..2**63-1."""
    return check_int(name, value, 0, MAX_SEED)


def check_types(config, spell=flag) -> None:
    """Every field of dataclass ``config`` holds a value of its annotated type (``X | None``, ``tuple[int, ...]``
    and ``list[str]`` included; nested dataclasses are checked by their own ``validate``): a state file or a Python
    caller that passes '50' or 'no' is refused here, before the value is compared or used. ``spell`` names a
    field in the message (default: its flag)."""
    hints = typing.get_type_hints(type(config))
    for f in dataclasses.fields(config):
        hint, value = hints[f.name], getattr(config, f.name)
        if not dataclasses.is_dataclass(hint):
            _check_type(spell(f.name), value, hint)


def _check_type(name: str, value, hint) -> None:
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return
        hint = next(a for a in args if a is not type(None))
        args = typing.get_args(hint)
    origin = typing.get_origin(hint)
    if origin in (tuple, list):
        if not isinstance(value, (tuple, list)):
            raise ValueError(f"{name} must be a list, got {value!r}")
        for v in value:
            _check_type(name, v, args[0])
    elif hint is bool:
        check_bool(name, value)
    elif hint is int:
        check_int(name, value)
    elif hint is float:
        check_float(name, value)
    elif hint is str and not isinstance(value, str):
        raise ValueError(f"{name} must be a string, got {value!r}")


def check_episode_length(name: str, value) -> int:
    """An episode length the engines can count: an integer in 1..:data:`MAX_EPISODE_LENGTH`."""
    return check_int(name, value, 1, MAX_EPISODE_LENGTH)


def check_episodes(name: str, value) -> int:
    """An evaluation's episode count: an integer in 1..:data:`MAX_EPISODES`."""
    return check_int(name, value, 1, MAX_EPISODES)


def check_replay_steps(episodes: int, length: int) -> None:
    """A replay page of ``episodes`` x ``length`` steps, at most :data:`MAX_REPLAY_STEPS`."""
    check_int("--episodes", episodes, 1)
    check_episode_length("--length", length)
    if episodes * length > MAX_REPLAY_STEPS:
        raise ValueError(f"--episodes {episodes:,} x --length {length:,} is {episodes * length:,} steps, more than the "
                         f"{MAX_REPLAY_STEPS:,} a replay page holds (about 25 MB; a browser opens no more): lower "
                         "--length or --episodes")


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
    check_int(name, value, 1)
    cap = WORKERS_PER_CORE * usable_cores()
    if value > cap:
        raise ValueError(f"{name} {value:,} starts that many processes, more than {WORKERS_PER_CORE} per core of the "
                         f"{usable_cores()} this process may use: the extra ones would only wait for a core; use at "
                         f"most {cap} (one per core is fastest)")
    return value


def fail(message: str) -> typing.NoReturn:
    """End a script the way the ``workflow-rl`` command line ends on bad input: one ``error:`` line on stderr and
    exit status 2 (raised as ``SystemExit``, so nothing after it runs, hence nothing is written). For the scripts
    beside the package (``benchmarks/``), which have no ``main`` that turns a ValueError into that line."""
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


def _check_name_lengths(name: str, p: Path) -> None:
    """Each component of ``p`` within :data:`NAME_MAX` bytes and the whole within :data:`PATH_MAX` less the room a
    run needs inside: checked before the path is touched, since even ``exists()`` raises on a too-long name."""
    for part in p.parts:
        if len(os.fsencode(part)) > NAME_MAX:
            raise ValueError(f"{name}: the name {part[:40]}... is {len(os.fsencode(part))} bytes long, more than the "
                             f"{NAME_MAX} a file system allows: choose a shorter name")
    if len(os.fsencode(os.path.abspath(p))) > PATH_MAX - PATH_ROOM:
        raise ValueError(f"{name}: the path is {len(os.fsencode(os.path.abspath(p)))} bytes long; a run needs it "
                         f"under {PATH_MAX - PATH_ROOM} (the files it writes inside add to it): choose a shorter path")


def check_out_dir(name: str, path) -> Path:
    """``path`` as a folder a run can write into: it is one, or can be created (its nearest existing ancestor is a
    writable folder). Checked before a run starts, so a file, a too-long name or a read-only place is one line, not
    a traceback an hour in. Permissions alone do not tell (root may write everywhere, yet not under /sys or /proc,
    nor on a read-only mount), so an empty folder is created in the nearest existing ancestor and removed again."""
    p = Path(path)
    _check_name_lengths(name, p)
    if p.exists() and not p.is_dir():
        raise ValueError(f"{name} {p} is a file, not a folder: choose a folder (existing or new)")
    anc = p
    while not anc.exists():
        anc = anc.parent
    if not anc.is_dir():
        raise ValueError(f"{name} {p} cannot be created: {anc} is a file; choose another folder")
    if not os.access(anc, os.W_OK | os.X_OK):
        raise ValueError(f"{name} {p} is not writable here (no write permission in {anc}): choose another folder")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".write-test-", dir=anc))
    except OSError as e:
        raise ValueError(f"{name} {p} is not writable here ({e.strerror} in {anc}): choose another folder") from None
    return p


def check_out_file(name: str, path, inputs=(), mine: str | None = None) -> Path:
    """``path`` as a file a command can write (``replay --out FILE.html``, ``parity --out FILE.md``): a name the
    file system allows, nothing there yet or a plain file (:func:`check_replaceable`), not one of the ``inputs``
    the command reads (:func:`check_not_input`), with ``mine`` (a command) only a file that command wrote
    (:func:`check_written_by`), writable, in a folder that exists or can be created (:func:`check_out_dir`).
    Checked before any work starts, so a refusal writes nothing."""
    p = Path(path)
    _check_name_lengths(name, p)
    check_replaceable(name, p, "name a new file or one workflow-rl wrote")
    check_not_input(name, p, inputs)
    if mine is not None:
        check_written_by(name, p, mine)
    if p.exists() and not os.access(p, os.W_OK):
        raise ValueError(f"{name} {p} is not writable (no write permission on the file): choose another file")
    check_out_dir(f"{name}'s folder", p.parent)
    return p


def check_out_files(name: str, folder, files, inputs=()) -> Path:
    """``folder`` as a folder a command writes ``files`` into (names relative to it: ``evaluate --out DIR`` writes
    evaluation.json, evaluation.md, episodes.csv): the folder as :func:`check_out_dir` wants it, and each file as
    :func:`check_out_file` wants a file it replaces, below a folder that is a real one (a link or a file where
    ``plots/`` goes is refused too). Every file a command writes is checked before the command starts."""
    d = check_out_dir(name, folder)
    for rel in files:
        f = d / rel
        for parent in reversed(f.relative_to(d).parents[:-1]):
            _check_sub_folder(name, d / parent)
        check_replaceable(name, f, f"remove it, or choose another {name}")
        check_not_input(name, f, inputs)
    return d


def _check_sub_folder(name: str, p: Path) -> None:
    """A folder a command creates (or writes into) inside its output folder: nothing yet, or a real folder."""
    mode = _lstat_mode(p)
    if mode is not None and not stat.S_ISDIR(mode):
        raise ValueError(f"{name} {p} is {file_kind(mode)}, not a folder: remove it, or choose another {name}")


def _lstat_mode(p: Path) -> int | None:
    """The type bits of what ``p`` itself is (a link is not followed), None where nothing is (or cannot be
    looked at: the folder checks that follow say why)."""
    try:
        return os.lstat(p).st_mode
    except OSError:
        return None


def file_kind(mode: int) -> str:
    """What a file of ``mode`` is, as a message names it."""
    kinds = ((stat.S_ISREG, "a plain file"), (stat.S_ISDIR, "a folder"), (stat.S_ISLNK, "a symbolic link"),
             (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
             (stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISSOCK, "a socket"))
    return next((text for test, text in kinds if test(mode)), "not a plain file")


def check_replaceable(name: str, path, fix: str) -> Path:
    """``path`` as a place a command may write a file: nothing there yet, or a plain file, which the write
    replaces. Anything else is refused with ``fix``: a device (``--out /dev/null`` would replace the device node
    with a file, as root), a named pipe or a socket (a write would block or go to whoever listens), a folder, or a
    symbolic link (a write would replace the link, or go through it into a file nobody named)."""
    p = Path(path)
    mode = _lstat_mode(p)
    if mode is None or stat.S_ISREG(mode):
        return p
    if stat.S_ISDIR(mode):
        raise ValueError(f"{name} {p} is a folder: name a file in it")
    kind = file_kind(mode) + (f" (to {os.readlink(p)})" if stat.S_ISLNK(mode) else "")
    raise ValueError(f"{name} {p} is {kind}, not a plain file: {fix}")


def check_not_input(name: str, out, inputs) -> None:
    """Refuse an output ``out`` that is one of the ``inputs`` a command reads (paths; None skipped): the same
    file (``os.path.samefile``: the path itself, another path to it through a symbolic link, a hard link) or a
    file inside an input folder. Writing it would destroy what the command reads (``replay ck.pt --out ck.pt``,
    ``compare A B --out A/episodes.csv``). A file that does not exist yet is no input."""
    out = Path(out)
    if not out.exists():
        return
    for p in filter(None, inputs):
        p = Path(p)
        if not p.exists():
            continue
        if p.is_dir() and out.resolve().is_relative_to(p.resolve()):
            raise ValueError(f"{name} {out} is inside {p}, which this command reads: writing it would change its "
                             f"input; choose another {name}")
        if not p.is_dir() and os.path.samefile(out, p):
            raise ValueError(f"{name} {out} is {p}, which this command reads: writing it would destroy its "
                             f"input; choose another {name}")


def check_not_removing_input(name: str, removed, inputs) -> None:
    """Refuse to delete (``--overwrite``) a file or folder of ``removed`` that is, or holds, one of the
    ``inputs`` the command reads (``train --overwrite --out RUN --init-checkpoint RUN/checkpoints/latest.pt``):
    the run would start from it and delete it."""
    for r in removed:
        for p in filter(None, inputs):
            if Path(p).exists() and Path(p).resolve().is_relative_to(Path(r).resolve()):
                raise ValueError(f"{name}: --overwrite would delete {r}, which holds {p} this command reads: copy "
                                 f"it elsewhere first, or choose another {name}")


def written_by(command: str) -> str:
    """The mark every file a user names for a command to write carries (an HTML comment in a replay page and a
    Markdown report): how :func:`check_written_by` tells that command's own file from anybody else's."""
    return f"written by `workflow-rl {command}`"


def check_written_by(name: str, path, command: str) -> None:
    """An existing file at ``path`` is replaced only if ``workflow-rl command`` wrote it (:func:`written_by` in its
    first 4 KiB): a mistyped ``--out notes.txt`` must not replace the user's notes."""
    p = Path(path)
    if not p.is_file():
        return
    try:
        with open(p, "rb") as f:
            head = f.read(4096)
    except OSError as e:
        raise ValueError(f"{name} {p} exists and cannot be read ({e.strerror}) to tell whether `workflow-rl "
                         f"{command}` wrote it: choose another file") from None
    if written_by(command).encode() not in head:
        raise ValueError(f"{name} {p} exists and is not a file `workflow-rl {command}` wrote: choose another file, "
                         "or delete it first if it may go")


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


def check_inside(name: str, rel, root) -> Path:
    """``root / rel`` for a path ``rel`` a state file names relative to ``root``, refused unless it stays inside
    ``root`` (no absolute path, no '..', no symlink out of it): an edited state file must not make a run read or
    write anywhere else."""
    if not isinstance(rel, str) or not rel:
        raise ValueError(f"{name} must be a path inside the run folder, got {rel!r}")
    p = Path(rel)
    if p.is_absolute() or ".." in p.parts:
        raise ValueError(f"{name} {rel!r} leaves the run folder: it must be a path inside it")
    full = Path(root) / p
    if not full.resolve().is_relative_to(Path(root).resolve()):
        raise ValueError(f"{name} {rel!r} leads out of the run folder (a symbolic link): it must stay inside it")
    return full


class ValidatedOnce:
    """Settings validated once, at a command's boundary (``TrainConfig``, ``SearchConfig``).

    A command builds its settings, calls ``validate()`` once, and hands them to the code that runs them; that code
    (the trainer, a search's executors) calls :meth:`validate_once`, which validates only settings that have not
    passed here. Why a mark on the settings rather than a ``validated=True`` argument: the settings themselves say
    what passed, so a caller cannot vouch for settings nobody checked. A library user who builds a trainer straight
    from a config gets the full validation there, and one who validated first is not charged twice. The mark holds
    this process's id and the settings as they were (their ``repr``, every field, nested ones included): a config
    changed after it passed, or shipped to another process or machine (a Ray worker, whose devices and memory are
    its own), is not vouched for and is validated again where it runs. A config derived by ``dataclasses.replace``
    carries no mark; code that derives one from validated settings and knows the changes valid (a search's
    per-workflow configs) says so with :meth:`mark_validated`."""

    def _validated_key(self) -> tuple[int, str]:
        return os.getpid(), repr(self)

    def mark_validated(self) -> None:
        """Record that these settings, as they are now, passed ``validate()`` in this process."""
        self.__dict__["_validated_as"] = self._validated_key()

    @property
    def validated(self) -> bool:
        """Whether these exact settings passed ``validate()`` in this process."""
        return self.__dict__.get("_validated_as") == self._validated_key()

    def validate_once(self) -> None:
        """``validate()``, unless these exact settings already passed it here."""
        if not self.validated:
            self.validate()
