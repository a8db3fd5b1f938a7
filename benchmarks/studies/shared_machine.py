"""Shared-machine speed (issue Q, item 2): a command alone, then beside a busy process, as one ratio.

    python benchmarks/studies/shared_machine.py search planned            # the two measured jobs, policy and baseline
    python benchmarks/studies/shared_machine.py --command "workflow-rl demo --episodes 4096" --label demo

Each job runs alone and then beside ``--busy`` processes of ``python3 -c "while True: pass"`` (one, by default:
one of a 2-core machine's cores taken), under two thread settings in the same run: ``auto`` (the thread policy,
``workflow_rl.threads``) and ``off`` (``WORKFLOW_RL_THREADS=off``: torch and numba at their own defaults, one
thread per core -- the behaviour before the policy, the baseline). The ratio beside / alone is what the issue
bounds (at most 2x). Time is the command's wall time, start-up included, as a user sees it; the median of
``--repeats`` runs. Writes ``runs.csv`` (every run) and ``ratios.csv`` (per job and setting) to ``--out``
(default ``benchmarks/results/shared_machine``).

The jobs: ``search`` is ``make run``'s search at 2,000 episodes (the issue's measurement; ``--episodes``);
``planned`` is a planned agent acting one env at a time (``make_act("pretrained:universal", PlanConfig(),
episode_length=100)``, the native engine as the harness; ``--decisions``, 300 as in the issue). Measure on a
machine nothing else is loading: any other load changes both the alone and the beside times.
"""
from __future__ import annotations

import argparse
import csv
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = ("auto", "off")
"""The thread settings compared in one run: the policy, and the libraries' defaults (the baseline)."""
CONDITIONS = ("alone", "beside_busy")
BUSY = "while True: pass"
LIBRARY_VARS = ("WORKFLOW_RL_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")
"""Variables that size the thread pools: cleared for every run, so the setting alone decides."""


def jobs(args) -> dict[str, list[str]]:
    """The built-in jobs, as command lines (``{out}``: a fresh folder per run)."""
    cli = [sys.executable, "-m", "workflow_rl.cli"]
    return {
        "search": [*cli, "search", "--total-episodes", str(args.episodes), "--init-checkpoint", "pretrained:universal",
                   "--hidden", "256", "256", "--decoy-memory", "--mask-decoys", "--seed", "5", "--no-progress",
                   "--out", "{out}"],
        "planned": [sys.executable, str(Path(__file__).resolve()), "--act", str(args.decisions)],
    }


def planned_harness(decisions: int) -> None:
    """``decisions`` planned decisions of the shipped opening agent, one env at a time, the native engine as the
    harness (as a user's own loop would drive it)."""
    from workflow_rl import threads
    from workflow_rl.envs.native_env import NativeEnv
    from workflow_rl.rl.planning.planner import PlanConfig, make_act

    threads.configure()   # one env at a time: one thread, as a user's harness should ask for (make_act sets none)
    act = make_act("pretrained:universal", PlanConfig(), episode_length=100)
    env = NativeEnv("RedMeanderAgent", 100)
    obs, _ = env.reset(seed=0)
    t = 0
    for _ in range(decisions):
        obs, _, _, truncated, _ = env.step(act(obs, t))
        t = 0 if truncated else t + 1


def environment(setting: str) -> dict[str, str]:
    """This process's environment with only ``setting`` sizing the thread pools."""
    env = {k: v for k, v in os.environ.items() if k not in LIBRARY_VARS}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    if setting != "auto":
        env["WORKFLOW_RL_THREADS"] = setting
    return env


def timed(command: list[str], env: dict[str, str], busy: int) -> tuple[float, int]:
    """(wall seconds, exit status) of ``command``, beside ``busy`` busy-loop processes (stopped after)."""
    loops = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(busy)]
    try:
        if loops:
            time.sleep(0.5)   # the loops are on their cores before the command starts
        with tempfile.TemporaryDirectory(prefix="shared-machine-") as d:
            cmd = [c.replace("{out}", str(Path(d) / "out")) for c in command]
            t0 = time.perf_counter()
            r = subprocess.run(cmd, env=env, cwd=d, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            seconds = time.perf_counter() - t0
    finally:
        for p in loops:
            p.kill()
            p.wait()
    if r.returncode != 0:
        print(f"  exit {r.returncode}: {r.stderr.strip()[-500:]}", file=sys.stderr)
    return seconds, r.returncode


def measure(label: str, command: list[str], busy: int, repeats: int, log=print) -> list[dict]:
    """Every run of one job: each setting alone and beside the busy loops, ``repeats`` times, interleaved so that a
    drift of the machine touches every cell alike."""
    rows = []
    for rep in range(repeats):
        for setting in SETTINGS:
            for condition in CONDITIONS:
                seconds, rc = timed(command, environment(setting), busy if condition == "beside_busy" else 0)
                rows.append({"job": label, "threads": setting, "condition": condition, "repeat": rep,
                             "seconds": round(seconds, 3), "exit": rc, "busy": busy if condition != "alone" else 0})
                log(f"{label:10s} threads={setting:4s} {condition:11s} run {rep + 1}: {seconds:8.2f} s"
                    + ("" if rc == 0 else f" (exit {rc})"))
    return rows


def ratios(rows: list[dict]) -> list[dict]:
    """Per job and setting: median seconds alone and beside the busy loops, and their ratio."""
    out = []
    for job in dict.fromkeys(r["job"] for r in rows):
        for setting in SETTINGS:
            med = {c: statistics.median(r["seconds"] for r in rows if (r["job"], r["threads"], r["condition"])
                                        == (job, setting, c)) for c in CONDITIONS}
            ok = all(r["exit"] == 0 for r in rows if (r["job"], r["threads"]) == (job, setting))
            out.append({"job": job, "threads": setting, "alone_s": round(med["alone"], 3),
                        "beside_busy_s": round(med["beside_busy"], 3),
                        "ratio": round(med["beside_busy"] / med["alone"], 3), "all_exit_0": ok})
    return out


def write_csv(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("jobs", nargs="*", help="built-in jobs to measure: search, planned")
    p.add_argument("--command", default=None, help="measure this command line instead ({out}: a fresh folder)")
    p.add_argument("--label", default="command", help="the --command job's name in the CSVs")
    p.add_argument("--busy", type=int, default=1, help="busy-loop processes beside the command (default 1)")
    p.add_argument("--repeats", type=int, default=1, help="runs of each cell; the median is reported")
    p.add_argument("--episodes", type=int, default=2000, help="search: --total-episodes")
    p.add_argument("--decisions", type=int, default=300, help="planned: decisions")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "shared_machine"))
    p.add_argument("--act", type=int, default=None, help=argparse.SUPPRESS)   # the planned job's own process
    args = p.parse_args(argv)
    if args.act is not None:
        planned_harness(args.act)
        return 0
    from workflow_rl.checks import check_int, fail
    from workflow_rl.resources import usable_cores

    try:
        for name in ("busy", "repeats", "episodes", "decisions"):
            check_int(f"--{name}", getattr(args, name), 0 if name == "busy" else 1)
    except ValueError as e:
        fail(str(e))
    known = jobs(args)
    unknown = [j for j in args.jobs if j not in known]
    if unknown or not (args.jobs or args.command):
        fail(f"name built-in jobs ({', '.join(known)}) or give --command"
             + (f"; unknown: {', '.join(unknown)}" if unknown else ""))
    todo = {j: known[j] for j in args.jobs}
    if args.command:
        todo[args.label] = shlex.split(args.command)
    print(f"{usable_cores()} usable cores, {args.busy} busy loop(s) beside; settings {', '.join(SETTINGS)}")
    rows = [r for label, cmd in todo.items() for r in measure(label, cmd, args.busy, args.repeats)]
    summary = ratios(rows)
    out = Path(args.out)
    write_csv(out / "runs.csv", rows)
    write_csv(out / "ratios.csv", summary)
    for s in summary:
        print(f"{s['job']:10s} threads={s['threads']:4s} alone {s['alone_s']:8.2f} s, beside "
              f"{s['beside_busy_s']:8.2f} s: x{s['ratio']:.2f}" + ("" if s["all_exit_0"] else " (a run failed)"))
    print(f"wrote {out / 'runs.csv'} and {out / 'ratios.csv'}")
    return 0 if all(s["all_exit_0"] for s in summary) else 1


if __name__ == "__main__":
    sys.exit(main())
