"""The files a command writes, checked and written safely (whole or not at all).

A name the file system allows, a writable folder, only a plain file replaced (never a device, a pipe, a link or a
folder), never one of the command's own inputs, a user-named report only if workflow-rl wrote it, every write whole or
not at all (:func:`atomic_write`). The pure helpers every layer that writes a file calls; the run-folder policy (lock,
overwrite, resume) is ``workflow_rl.runs.rundir``. Below every other layer: it imports nothing of the package.
"""
from __future__ import annotations

import errno
import os
import re
import shutil
import stat
import tempfile
from contextlib import contextmanager
from pathlib import Path

TMP_SUFFIX = ".tmp"
"""Before the writer's pid: the suffix :func:`atomic_write` gives its temporary files (``.tmp<pid>``)."""
TMP_NAME = re.compile(re.escape(TMP_SUFFIX) + r"(\d+)$")
"""A temporary file's or staging folder's name: its writer's pid at the end."""
NAME_MAX = 255
"""Bytes a single file or folder name may have on Linux's file systems (ext4, xfs, btrfs, tmpfs)."""
PATH_MAX = 4096
PATH_ROOM = 256
"""Bytes a run needs below its folder for the files it writes there (``workflows/<name>/checkpoints/...``): a
folder path longer than ``PATH_MAX - PATH_ROOM`` would fail at the first deep write."""


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
        if anc.is_symlink():   # a dangling link: exists() is False, yet mkdir there fails after all the work
            raise ValueError(f"{name} {p} cannot be created: {anc} is a symbolic link to nothing "
                             f"({os.readlink(anc)}); remove the link, or choose another folder")
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


def check_out_files(name: str, folder, files, inputs=(), *, replace: bool, flag: str = "--overwrite") -> Path:
    """``folder`` as a folder a command writes ``files`` into (names relative to it: ``evaluate --out DIR`` writes
    evaluation.json, evaluation.md, episodes.csv): the folder as :func:`check_out_dir` wants it, and each file as
    :func:`check_out_file` wants a file it replaces, below a folder that is a real one (a link or a file where
    ``plots/`` goes is refused too). Every file a command writes is checked before the command starts.

    The replace rule of an output folder, the same as a run folder's (``runs.rundir``): a file an earlier run left
    there is replaced only when ``replace`` says so (the command's ``flag``, --overwrite), never without a word."""
    d = check_out_dir(name, folder)
    for rel in files:
        f = d / rel
        for parent in reversed(f.relative_to(d).parents[:-1]):
            _check_sub_folder(name, d / parent)
        check_replaceable(name, f, f"remove it, or choose another {name}")
        check_not_input(name, f, inputs)
        if not replace and _lstat_mode(f) is not None:
            raise ValueError(f"{name} {d} already holds {rel} (an earlier run's): pass {flag} to replace it, or "
                             f"choose another {name}")
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


@contextmanager
def atomic_write(path: str | Path, mode: str = "wb", **open_kw):
    """A file to write ``path`` through: a temporary file beside it (``.tmp<pid>``, which :func:`remove_stale_temps`
    recognises once its writer is dead), fsynced and renamed over ``path`` when the block ends, so a crash leaves
    the old file or the new one, never half of one; a failed or interrupted write leaves no temporary file."""
    path = Path(path)
    tmp = path.with_name(path.name + f"{TMP_SUFFIX}{os.getpid()}")
    try:
        with open(tmp, mode, **open_kw) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


STAGING = ".staging-"
"""The start of a staging folder's name (:func:`staged_outputs`)."""


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def written_by_dead(name: str) -> bool:
    """Whether ``name`` is a temporary file or staging folder (``*.tmp<pid>``) of this process or of a writer that
    is gone (killed half-way): one nobody will finish."""
    m = TMP_NAME.search(name)
    return bool(m) and (int(m.group(1)) == os.getpid() or not pid_alive(int(m.group(1))))


@contextmanager
def staged_outputs(folder: str | Path, remove=()):
    """A folder to write a command's set of output files into, moved over their namesakes in ``folder`` only when
    every one is written (and fsynced here, so a crash after the moves finds them whole); then the files ``remove``
    names (a set's member this run does not write) are deleted, so no earlier run's file stands beside the new set.
    A write that fails part-way (the disk fills after the first file, an error, a Ctrl-C while writing) removes the
    staging folder and leaves ``folder``'s files as they were: never a new ``evaluation.json`` beside an old
    ``evaluation.md``, nor half a set. The moves are renames within one folder, which need no room and take
    microseconds; a crash in that window can still leave a mix."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob(f"{STAGING}*{TMP_SUFFIX}*"):   # a writer killed mid-set (SIGKILL skips the clean-up)
        if old.is_dir() and not old.is_symlink() and written_by_dead(old.name):
            shutil.rmtree(old, ignore_errors=True)
    stage = Path(tempfile.mkdtemp(prefix=STAGING, suffix=f"{TMP_SUFFIX}{os.getpid()}", dir=folder))
    try:
        yield stage
        written = sorted(stage.iterdir())
        for p in written:
            fd = os.open(p, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        for p in written:
            os.replace(p, folder / p.name)
        for name in remove:
            (folder / name).unlink(missing_ok=True)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def write_report(out: str | Path, text: str, command: str) -> Path:
    """Write ``command``'s Markdown report ``text`` to ``out`` (checked before the command ran:
    :func:`check_out_file`), whole or not at all. Its first line, an HTML comment (invisible where the Markdown is
    shown), marks it as that command's (:func:`written_by`), so running the command again may replace it and nothing
    else."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(out, "w") as f:
        f.write(f"<!-- {written_by(command)} -->\n{text}")
    return out


FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
"""The errors of a write that ran out of room: the disk or quota is full, or a file reached the size limit."""


def os_error_line(e: OSError) -> str:
    """One line for an OSError that ends a job (the disk is full, a file grew past a limit, a folder vanished: the
    machine, not a bug): what failed, on which file, and what to do. Every file a run writes is written whole or
    not at all (:func:`atomic_write`), so a run stopped this way continues from its last checkpoint."""
    where = f" writing {e.filename}" if e.filename else ""
    if e.errno in FULL:
        return (f"{e.strerror}{where}: make room (free disk space, or raise the quota or file-size limit) and run "
                "the command again; a train or search run continues from its last checkpoint with --resume")
    return f"{e.strerror or e}{' (' + str(e.filename) + ')' if e.filename else ''}: check the path and run again"


def file_version(path: str | Path) -> tuple | None:
    """Which version of the file at ``path`` this is: its resolved path, device, inode, size, modification and
    change times (``None`` if it cannot be stat'ed). Taken before a read, it says whether a later look would see
    the same file: one replaced or rewritten meanwhile has another version."""
    try:
        st = Path(path).stat()
        return str(Path(path).resolve()), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns
    except OSError:
        return None


def path_kind(p: Path) -> str:
    """What is at ``p`` itself (a symbolic link is named as one, not followed), as a message names it."""
    return file_kind(os.lstat(p).st_mode)
