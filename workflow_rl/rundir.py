"""One writer per run directory: an exclusive lock held for the whole run, and the clean-up of the temporary files
a killed writer leaves behind.

The lock is ``RUN_DIR/.lock`` held with ``flock``: the kernel releases it when its holder exits, however it dies
(SIGKILL included), so a lock left by a dead process is stale by construction and the next run simply takes it;
the file records the holder's pid so a refused run can say who holds it.
"""
from __future__ import annotations

import errno
import fcntl
import os
import re
import stat
from contextlib import contextmanager
from pathlib import Path

LOCK_NAME = ".lock"
_TMP = re.compile(r"\.tmp(\d+)$")
"""The suffix :func:`atomic_write` gives its temporary files: ``.tmp<pid of the writer>``."""


@contextmanager
def atomic_write(path: str | Path, mode: str = "wb", **open_kw):
    """A file to write ``path`` through: a temporary file beside it (``.tmp<pid>``, which :func:`remove_stale_temps`
    recognises once its writer is dead), fsynced and renamed over ``path`` when the block ends, so a crash leaves
    the old file or the new one, never half of one; a failed or interrupted write leaves no temporary file."""
    path = Path(path)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    try:
        with open(tmp, mode, **open_kw) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


class RunDirBusy(ValueError):
    """Another live process holds the run directory."""


class RunDirLock:
    """Exclusive use of ``run_dir`` for one process (a context manager): a second ``train``, ``search`` or resume
    of the same folder is refused at once instead of interleaving its log, config and checkpoints with the first."""

    def __init__(self, run_dir: str | Path):
        self.dir = Path(run_dir)
        self._fd: int | None = None

    def acquire(self) -> "RunDirLock":
        self.dir.mkdir(parents=True, exist_ok=True)
        fd = open_lock_file(self.dir / LOCK_NAME)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = os.read(fd, 64).decode(errors="replace").strip() or "another process"
            os.close(fd)
            raise RunDirBusy(f"{self.dir} is in use by process {owner}: wait for it to finish (or stop it), or "
                             "choose another folder") from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._fd = fd
        remove_stale_temps(self.dir)
        return self

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> "RunDirLock":
        return self.acquire()

    def __exit__(self, *exc) -> bool:
        self.release()
        return False


def open_lock_file(path: Path) -> int:
    """``path`` opened for reading and writing (created if missing), refused unless it is a plain file of its own:
    a symlink is never followed (``O_NOFOLLOW``: the pid written into it would overwrite whatever it points at), and
    a folder, a device, a pipe or a second hard link of another file is one error naming the fix."""
    fix = f"{path} is not a lock file of a run folder; remove it (or choose another folder)"
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    except IsADirectoryError:
        raise ValueError(f"{fix}: it is a folder") from None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise ValueError(f"{fix}: it is a symbolic link") from None
        raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
        os.close(fd)
        raise ValueError(f"{fix}: it is " + ("a hard link of another file" if stat.S_ISREG(st.st_mode)
                                            else "not a plain file"))
    return fd


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_temps(run_dir: str | Path) -> list[Path]:
    """Delete the ``*.tmp<pid>`` files under ``run_dir`` whose writer is gone (a checkpoint or state write killed
    half-way); returns them. Called with the lock held, so no live writer of this folder is racing it."""
    removed = []
    for p in Path(run_dir).rglob("*.tmp*"):
        m = _TMP.search(p.name)
        if m and p.is_file() and (int(m.group(1)) == os.getpid() or not pid_alive(int(m.group(1)))):
            p.unlink(missing_ok=True)
            removed.append(p)
    return removed


RUN_FILES = {
    "search": ("search_state.json", "search_batch.pt", "gp_sampling_log.csv", "workflows", "best_workflow.json",
               "best_policy.pt", "report.md", "plots", "ground_truth.csv"),
    "train": ("config.json", "checkpoints", "batch.pt", "tb"),
}
"""What a ``search`` and a ``train`` run write at the top of RUN_DIR besides ``SHARED_FILES`` (``train --seeds``
adds ``seed_*`` folders): how a folder's owner is told, and what ``--overwrite`` removes."""
SHARED_FILES = ("training_log.csv", "summary.json")


def _run_entries(out: Path) -> list[Path]:
    """The entries of ``out`` that are anybody's files: its lock and a dead writer's temporary files aside."""
    return sorted(p for p in out.iterdir() if p.name != LOCK_NAME and not _TMP.search(p.name))


def _owner(name: str) -> str | None:
    if re.fullmatch(r"seed_\d+", name):
        return "train"
    return next((cmd for cmd, names in RUN_FILES.items() if name in names), "train" if name in SHARED_FILES else None)


def check_run_folder(out: str | Path, command: str, resume: bool, overwrite: bool) -> None:
    """Refuse an ``--out`` that holds another command's run or files that are no run's, before anything is
    written: a new ``command`` run needs an empty (or new) folder unless ``overwrite`` replaces what is there, and
    ``resume`` continues only a run of the same command. ``command``: 'train' or 'search'."""
    out = Path(out)
    if not out.is_dir():
        return
    entries = _run_entries(out)
    owners = {_owner(p.name) for p in entries}
    kind = "search" if "search" in owners else "train" if "train" in owners else None
    if resume:
        if kind not in (None, command):
            raise ValueError(f"{out} holds a `workflow-rl {kind}` run, not a {command} run: resume it with "
                             f"`workflow-rl {kind}`, or choose the folder of a {command} run")
        return
    if overwrite or not entries:
        return
    if kind == command:
        again = f"--resume {out}" if command == "search" else "--resume"
        raise ValueError(f"{out} already holds a {'training run' if command == 'train' else 'search'} "
                         f"({next(p.name for p in entries if _owner(p.name))}): continue it with {again}, replace "
                         "it with --overwrite, or choose another --out")
    if kind is not None:
        raise ValueError(f"{out} holds a `workflow-rl {kind}` run: choose another --out, or replace that run with "
                         "--overwrite")
    shown = ", ".join(p.name for p in entries[:3]) + (", ..." if len(entries) > 3 else "")
    raise ValueError(f"{out} holds files that are not a workflow-rl run ({shown}): choose an empty or new folder, "
                     "or --overwrite to write beside them")


def remove_run(out: str | Path) -> list[Path]:
    """``--overwrite``, under the folder's lock: delete what a ``train`` or ``search`` run wrote at the top of
    ``out`` (``RUN_FILES``, ``SHARED_FILES``, ``seed_*``), so nothing stale of the old run survives; other files
    are left alone. Returns what it removed."""
    import shutil

    removed = []
    for p in _run_entries(Path(out)):
        if _owner(p.name) is None:
            continue
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p)
        else:
            p.unlink()
        removed.append(p)
    return removed
