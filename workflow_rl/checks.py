"""The value checks every layer shares: one helper per kind of check (type, finite range, seed, output folder,
memory), so a setting is refused the same way, naming its flag and the fix, wherever it enters (the command line,
a config dataclass, ``make_vector_env``, a state file). Below every other layer: it imports nothing of the package.
"""
from __future__ import annotations

import dataclasses
import math
import os
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


def check_out_file(name: str, path) -> Path:
    """``path`` as a file a command can write (``replay --out FILE.html``, ``parity --out FILE.md``): not a folder,
    a name the file system allows, writable if it exists, in a folder that exists or can be created
    (:func:`check_out_dir`). Checked before any work starts."""
    p = Path(path)
    _check_name_lengths(name, p)
    if p.is_dir():
        raise ValueError(f"{name} {p} is a folder: name a file in it")
    if p.exists() and not os.access(p, os.W_OK):
        raise ValueError(f"{name} {p} is not writable (no write permission on the file): choose another file")
    check_out_dir(f"{name}'s folder", p.parent)
    return p


def physical_memory() -> int | None:
    """Bytes of physical memory of this machine (None where the OS does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def check_memory(what: str, need: int, fix: str, limit: int | None = None, where: str = "this machine's") -> None:
    """Refuse a request whose estimated memory ``need`` exceeds ``limit`` (default: this machine's physical
    memory; ``where`` names whose it is), with the estimate and the limit, instead of dying of MemoryError (or the
    OOM killer) once allocated."""
    limit = physical_memory() if limit is None else limit
    if limit is not None and need > limit:
        raise ValueError(f"{what} would need about {gib(need)} of memory, more than {where} {gib(limit)}: {fix}")


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
