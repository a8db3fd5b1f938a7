"""The owner of a run folder: one writer at a time, and what a new, resumed or overwritten run may remove.

One writer per folder (an exclusive lock held for the whole run, and the clean-up of the temporary files a killed writer
leaves behind), and the rules of what a new, resumed or overwritten run may find there and remove.

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
from pathlib import Path

from workflow_rl.checks import read_json
from workflow_rl.files import TMP_NAME, path_kind, written_by_dead

LOCK_NAME = ".lock"
"""The suffix ``files.atomic_write`` gives its temporary files: ``.tmp<pid of the writer>``."""


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


def remove_stale_temps(run_dir: str | Path) -> list[Path]:
    """Delete the ``*.tmp<pid>`` files under ``run_dir`` whose writer is gone (a checkpoint or state write killed
    half-way); returns them. Called with the lock held, so no live writer of this folder is racing it."""
    removed = []
    for p in Path(run_dir).rglob("*.tmp*"):
        if p.is_file() and written_by_dead(p.name):
            p.unlink(missing_ok=True)
            removed.append(p)
    return removed


RUN_FILES = {
    "search": ("search_state.json", "search_batch.pt", "gp_sampling_log.csv", "workflows", "best_workflow.json",
               "best_policy.pt", "report.md", "plots", "ground_truth.csv"),
    "train": ("config.json", "checkpoints", "batch.pt", "tb"),
    "expert-iterate": ("expert_iteration.json", "rounds.csv", "checkpoints"),
}
"""What a ``search``, a ``train`` and an ``expert-iterate`` run write at the top of RUN_DIR (``search`` and ``train``
besides ``SHARED_FILES``; ``train --seeds`` adds ``seed_*`` folders): what ``--overwrite`` removes of a run the
folder's marker (:func:`run_kind`) names."""
SHARED_FILES = ("training_log.csv", "summary.json")
SHARED_BY = ("search", "train")
"""The commands whose runs write ``SHARED_FILES``."""
RUN_NAMES = {"search": "a search", "train": "a training run", "expert-iterate": "an expert-iteration run"}
"""How a message names a run of each command."""
MARKER_MAX = 64 * 2**20
"""Bytes a run's marker file may have to be read as one: a search state of every workflow is well under a MiB."""


def _run_entries(out: Path) -> list[Path]:
    """The entries of ``out`` that are anybody's files: its lock and a dead writer's temporary files aside."""
    return sorted(p for p in out.iterdir() if p.name != LOCK_NAME and not TMP_NAME.search(p.name))


def _owners(name: str) -> set[str]:
    """The commands whose runs write an entry of this name at the top of their folder (none: a name of no run)."""
    if re.fullmatch(r"seed_\d+", name):
        return {"train"}
    if name in SHARED_FILES:
        return set(SHARED_BY)
    return {cmd for cmd, names in RUN_FILES.items() if name in names}


def _read_marker(path: Path):
    """The JSON a run's marker file holds, or None where it is not a plain file of sane size holding JSON (a
    FIFO named config.json must not block, a huge or deeply nested one must not raise)."""
    try:
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MARKER_MAX:
            return None
        return read_json(path.read_bytes())
    except (OSError, ValueError):
        return None


def _is_search_state(d) -> bool:
    """A search's ``search_state.json`` (``search.records.SearchState.to_dict``): its config, iterations and
    episode count."""
    return (isinstance(d, dict) and isinstance(d.get("config"), dict) and isinstance(d.get("iterations"), list)
            and isinstance(d.get("episodes_used"), int))


def _is_train_config(d) -> bool:
    """A train run's ``config.json`` (``rl.config.TrainConfig.to_dict``): its settings, PPO's nested."""
    return isinstance(d, dict) and isinstance(d.get("ppo"), dict) and {"red_agent", "n_envs", "seed"} <= d.keys()


def _is_expert_settings(d) -> bool:
    """An expert-iteration run's ``expert_iteration.json`` (``rl.expert_iteration.ExpertConfig.to_dict``): its
    settings, the planner's nested."""
    return isinstance(d, dict) and isinstance(d.get("plan"), dict) and {"init", "rounds", "seed"} <= d.keys()


def run_kind(out: str | Path) -> str | None:
    """'search', 'train' or 'expert-iterate' when ``out`` holds a run workflow-rl wrote, told by the marker each run
    writes before anything else, in its own form: a search's ``search_state.json``, a train run's ``config.json`` (a
    ``train --seeds`` run's in ``seed_N/``), an expert-iteration run's ``expert_iteration.json``; None otherwise.
    Names alone do not tell: a user's own ``checkpoints/`` or ``report.md`` is no run's, and ``--overwrite`` must not
    delete it."""
    out = Path(out)
    if _is_search_state(_read_marker(out / "search_state.json")):
        return "search"
    configs = [out / "config.json"] + sorted(out.glob("seed_*/config.json"))
    if any(_is_train_config(_read_marker(p)) for p in configs):
        return "train"
    if _is_expert_settings(_read_marker(out / "expert_iteration.json")):
        return "expert-iterate"
    return None


def run_config(out: str | Path) -> dict | None:
    """The settings of the train run in ``out`` (its ``config.json``), None where there is none."""
    d = _read_marker(Path(out) / "config.json")
    return d if _is_train_config(d) else None


def _is_plain(p: Path) -> bool:
    """A plain file or a real folder: what runs write (never a link, a device, a pipe or a socket)."""
    mode = os.lstat(p).st_mode
    return stat.S_ISREG(mode) or stat.S_ISDIR(mode)


def run_files(out: str | Path, kind: str | None = None) -> list[Path]:
    """The entries at the top of ``out`` that the ``kind`` run there wrote (default: the run its marker names;
    none when no marker names one): what ``--overwrite`` removes."""
    out = Path(out)
    kind = kind or (run_kind(out) if out.is_dir() else None)
    if kind is None:
        return []
    return [p for p in _run_entries(out) if kind in _owners(p.name)]


def check_run_folder(out: str | Path, command: str, resume: bool, overwrite: bool, inputs=()) -> None:
    """Refuse an ``--out`` that holds another command's run or files that are no run's, before anything is
    written: a new ``command`` run needs an empty (or new) folder unless ``overwrite`` replaces the run there,
    and ``resume`` continues only a run of the same command. ``--overwrite`` removes only what a run wrote
    (:func:`run_files`): it refuses a folder whose entries named like a run's no run's marker claims, as it refuses
    to delete one of the ``inputs`` the command reads; other files stay. ``command``: a key of ``RUN_FILES``."""
    out = Path(out)
    if not out.is_dir():
        return
    entries = _run_entries(out)
    named = [p for p in entries if _owners(p.name)]
    odd = [p for p in named if not _is_plain(p)]
    if odd:
        raise ValueError(f"{odd[0]} is {path_kind(odd[0])}, not a file or folder a workflow-rl run writes: remove it "
                         "yourself, or choose another --out")
    kind = run_kind(out)
    if resume:
        if kind not in (None, command):
            raise ValueError(f"{out} holds a `workflow-rl {kind}` run, not a {command} run: resume it with "
                             f"`workflow-rl {kind}`, or choose the folder of a {command} run")
        return
    if not entries:
        return
    ours = run_files(out, kind)
    strays = [p for p in named if p not in ours and command in _owners(p.name)]
    if strays:   # the new run would write into them, and --overwrite must not delete them
        raise ValueError(f"{out} holds {_names(strays)}, named like a run's files but written by no workflow-rl run "
                         "here (no run's config.json, search_state.json or expert_iteration.json): choose an empty or "
                         "new folder, or move them away (delete them if a killed run left them)")
    if overwrite:
        check_not_removing_input("--out", ours, inputs)
        return
    if kind == command:
        again = f"--resume {out}" if command == "search" else "--resume"
        raise ValueError(f"{out} already holds {RUN_NAMES[command]} ({ours[0].name}): continue it with {again}, "
                         "replace it with --overwrite, or choose another --out")
    if kind is not None:
        raise ValueError(f"{out} holds a `workflow-rl {kind}` run: choose another --out, or replace that run with "
                         "--overwrite")
    raise ValueError(f"{out} holds files that are not a workflow-rl run ({_names(entries)}): choose an empty or new "
                     "folder, or --overwrite to write beside them")


def check_not_removing_input(name: str, removed, inputs) -> None:
    """Refuse to delete (``--overwrite``) a file or folder of ``removed`` that is, or holds, one of the
    ``inputs`` the command reads (``train --overwrite --out RUN --init-checkpoint RUN/checkpoints/latest.pt``):
    the run would start from it and delete it."""
    for r in removed:
        for p in filter(None, inputs):
            if Path(p).exists() and Path(p).resolve().is_relative_to(Path(r).resolve()):
                raise ValueError(f"{name}: --overwrite would delete {r}, which holds {p} this command reads: copy "
                                 f"it elsewhere first, or choose another {name}")


def _names(paths: list[Path]) -> str:
    return ", ".join(p.name for p in paths[:3]) + (", ..." if len(paths) > 3 else "")


def remove_run(out: str | Path, kind: str | None = None) -> list[Path]:
    """``--overwrite``, under the folder's lock: delete what the run in ``out`` wrote at the top of it
    (:func:`run_files`: ``RUN_FILES``, ``SHARED_FILES``, ``seed_*`` of the run its marker names; ``kind``: of a
    run of that command, for a new run's own files when it fails before its marker is written), so nothing stale
    of the old run survives; every other file is left alone. Returns what it removed."""
    import shutil

    removed = []
    for p in run_files(out, kind):
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p)
        else:
            p.unlink()
        removed.append(p)
    return removed
