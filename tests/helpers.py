"""Shared helpers for the tests: the real-CybORG reference returns, scripted policies on the native engine, and a
small training configuration with its log reader."""
import csv
import os
import pathlib
import re
import subprocess
from collections import defaultdict

import numpy as np

from workflow_rl.sim import native as N


def run_policy(policy, red_kind, n_envs, seed=7, length=100, checkpoints=(30, 50, 100), official_bugs=True):
    """Running returns of ``policy`` at each checkpoint for ``n_envs`` episodes (one per env)."""
    s, b = N.allocate_state(n_envs), N.allocate_buffers(n_envs)
    N.seed_state(s, seed, red_kind)
    N.reset_envs(s, b)
    rng = np.random.default_rng(seed)
    obs = b.obs.copy()
    total = np.zeros(n_envs)
    out = {}
    for t in range(length):
        N.step(s, np.asarray(policy(t, obs, rng), np.int64), b, length, official_bugs)
        obs = b.obs.copy()
        total += b.reward
        if t + 1 in checkpoints:
            out[t + 1] = total.copy()
    return out


# The repository root, for tests that run its scripts or read its files: one definition, so moving a test file
# between folders cannot point it at a wrong root (a moved test once looked for benchmarks/ under tests/).
REPO = pathlib.Path(__file__).resolve().parent.parent
REFERENCE_CSV = REPO / "tests" / "data" / "cyborg_returns.csv"
FAMILY_REFERENCE_CSV = REPO / "tests" / "data" / "cyborg_returns_family.csv"   # the attacker family (sim/family.py)


def load_reference(path=REFERENCE_CSV) -> dict:
    """{(red, policy, length): returns of its real-CybORG episodes} of a reference file (B_line and Meander: 400
    episodes a cell; the family's: tests/data/cyborg_summary_family.md)."""
    cells = defaultdict(list)
    with open(path) as f:
        for r in csv.DictReader(f):
            cells[(r["red"], r["policy"], int(r["length"]))].append(float(r["total_reward"]))
    return {k: np.array(v) for k, v in cells.items()}


def within_reference(ours: np.ndarray, ref: np.ndarray) -> tuple[bool, float]:
    """The fidelity tolerance: |mean difference| <= max(2% of |reference mean|, 3 SE of the difference)."""
    tol = max(0.02 * abs(ref.mean()), 3 * np.sqrt(ours.var(ddof=1) / len(ours) + ref.var(ddof=1) / len(ref)))
    return abs(ours.mean() - ref.mean()) <= tol, tol


TIMING_COLUMNS = {"collection_time", "update_time", "sps"}


def train_cfg(**kw):
    """A training run small enough for a test (16 envs, a few episodes each)."""
    from workflow_rl.rl.config import TrainConfig

    base = dict(workflow="critical_first", n_envs=16, max_episodes=4, min_episodes=1, update_every_steps=50,
                checkpoint_every=1, seed=3)
    base.update(kw)
    return TrainConfig(**base)


def read_log(path):
    """A run's training_log.csv rows without the timing columns (which differ between identical runs)."""
    with open(path / "training_log.csv") as f:
        return [{k: v for k, v in r.items() if k not in TIMING_COLUMNS} for r in csv.DictReader(f)]


def run_in_process(args, script=None, cwd=None) -> subprocess.CompletedProcess:
    """``workflow-rl ARGS`` (or ``python SCRIPT ARGS``) run in this process, reported as ``subprocess.run`` reports a
    child (exit status, stdout, stderr): a fresh Python pays seconds importing torch and the package at every call.
    A script runs as ``__main__`` with its folder first on ``sys.path``, as ``python SCRIPT`` runs it. Keep a real
    process for what needs one (signals, the entry point itself, what an import prints)."""
    import contextlib
    import io
    import os
    import runpy
    import sys

    out, err = io.StringIO(), io.StringIO()
    argv, path, here = sys.argv[:], sys.path[:], os.getcwd()
    try:
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                if script is None:
                    from workflow_rl.cli import main

                    rc = main([str(a) for a in args])
                else:
                    sys.argv = [str(script), *map(str, args)]
                    sys.path.insert(0, str(pathlib.Path(script).parent))
                    runpy.run_path(str(script), run_name="__main__")
                    rc = 0
            except SystemExit as e:
                rc = e.code
    finally:
        sys.argv[:], sys.path[:] = argv, path
        os.chdir(here)
    if rc is None:
        rc = 0
    elif not isinstance(rc, int):   # sys.exit("message"): printed to stderr, status 1
        err.write(f"{rc}\n")
        rc = 1
    return subprocess.CompletedProcess(list(args), rc, out.getvalue(), err.getvalue())


ENV = {**os.environ, "PYTHONPATH": str(REPO)}
"""The environment of a test's subprocess: this checkout's package first."""

TINY = ["--n-envs", "4", "--max-episodes", "2", "--min-episodes", "1", "--update-every-steps", "50",
        "--no-progress"]
"""A training run small enough for a test (its flags, shared by train and search)."""


def tiny(**flags) -> list[str]:
    """:data:`TINY` with flags changed or added: ``tiny(max_episodes=3, eval_episodes=0)``."""
    out = list(TINY)
    for name, value in flags.items():
        flag = "--" + name.replace("_", "-")
        if flag in out:
            out[out.index(flag) + 1] = str(value)
        else:
            out += [flag, str(value)]
    return out


def assert_one_error_line(rc, err, match):
    """The command ended in one ``error:`` line matching ``match`` (a regular expression), exit status 2, no
    traceback."""
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert rc == 2, err
    assert len(lines) == 1 and lines[0].startswith("error:"), err
    assert "Traceback" not in err
    assert re.search(match, lines[0]), lines[0]


def run_main(args, capsys) -> tuple[int, str, str]:
    """``workflow-rl ARGS`` in this process: (exit status, stdout, stderr)."""
    from workflow_rl.cli import main

    try:
        rc = main(args)
    except SystemExit as e:
        rc = e.code
    return rc, *capsys.readouterr()


def interrupting_executor(slots: int, rounds: int, seeds: int = 1):
    """A batched search executor that records a Ctrl-C (as the interrupt handler does) after ``rounds`` episode
    rounds of its trainer: the search then finishes that round, saves and raises SearchInterrupted."""
    from workflow_rl.search.batched_executor import BatchedExecutor

    class InterruptAfter(BatchedExecutor):
        def submit(self, prop):
            fresh = self.trainer is None
            super().submit(prop)
            if fresh:
                run_round = self.trainer.run_round

                def counted():
                    nonlocal rounds
                    rounds -= 1
                    if rounds <= 0:
                        self.interrupt.requested = True
                    return run_round()

                self.trainer.run_round = counted

    return InterruptAfter(slots, seeds)


def sigint_default() -> None:
    """``preexec_fn`` of a child process a test will Ctrl-C: SIGINT at its default disposition in the child. A
    pytest started in the background of a non-interactive shell (``pytest &``) has SIGINT ignored, its children
    inherit that, and a Python started with SIGINT ignored installs no KeyboardInterrupt handler: the test's Ctrl-C
    would then be lost whenever it arrives before the program's own handler is set."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)
