"""Engine benchmarks: every way to run CAGE2 against CybORG, and the native kernel alone.

Two tables (``workflow-rl bench``, ``make bench``; written into ``--out``):

``engines.{csv,md,png}``: transitions per second of every way to run CAGE2, over numbers of envs. Modes:
``cyborg-sequential`` (n CybORG envs stepped one after another in a plain loop), ``cyborg-sync`` (gymnasium
SyncVectorEnv), ``cyborg-pipes`` (AsyncVectorEnv, one process per env, pipes), ``cyborg-shm`` (AsyncVectorEnv with
shared-memory observations), ``cyborg-episodes`` (episode workers, one per core, playing whole episodes with an
untrained policy — so they also pay for the policy), ``native-cpu`` (the numba kernel behind the vector env),
``native-cuda`` (the tensor path, when a GPU is present). All per-step modes use uniformly random actions. Ratios
against ``cyborg-sequential`` with one env, measured in the same run, are what to compare across machines.

``native.{csv,md}``: the native engine alone (:func:`run_native`), env-steps/s of the numba kernel stepped directly
(no vector-env wrapper) with uniformly random blue actions, B_line and Meander, over batch sizes; each cell the
median of ``repeats`` timed runs after a warm-up run that also compiles; actions drawn once per run into a pool that
is cycled, so the timing measures the engine, not the random generator. The CUDA kernel (``env.step_tensor``) is
timed too where torch sees a GPU, and one real CybORG process per red agent where CybORG is installed, for the ratio
native / CybORG (the machine may be shared and noisy: compare ratios, not absolute numbers).
"""
from __future__ import annotations

import csv
import os
import platform
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from workflow_rl.files import staged_outputs
from workflow_rl.sim import attackers, tables

TABLES = ("engines", "native")
"""The two tables ``bench`` writes (``--tables``)."""
FILES = {"engines": ("engines.md", "engines.csv", "engines.png"), "native": ("native.md", "native.csv")}
"""What ``bench --out DIR`` writes into DIR, per table (:func:`_write`, :func:`run_native`)."""
NATIVE_SIZES = (256, 4096, 65536)
"""The native engine's batch sizes ``bench`` adds beyond ``--sizes`` (its best are far beyond CybORG's)."""
CYBORG_MODES = ("cyborg-sequential", "cyborg-sync", "cyborg-pipes", "cyborg-shm", "cyborg-episodes")
KERNEL_SIZES = (1, 16, 256, 1024, 4096, 16384, 65536)
"""The native table's batch sizes for the numba kernel (``--native-sizes``)."""
CUDA_SIZES = (65536, 1 << 20)
"""The native table's batch sizes for the CUDA kernel, timed only where torch sees a GPU (``--cuda-sizes``)."""
KERNEL_MIN_STEPS = 2_000_000
"""Env-steps per timed run of the native table (at least 20 steps; the CUDA kernel 20 times as many)."""
RED_AGENTS = attackers.cage2(attacking=True)


def time_native(red: str, n_envs: int, steps: int, seed: int = 0, device: str = "cpu") -> float:
    from workflow_rl import make_vector_env

    opts = {"copy": False} if device == "cpu" else {}
    env = make_vector_env(n_envs, red, seed=seed, device=device, **opts)
    env.reset()
    pool = np.random.default_rng(seed).integers(0, tables.N_ACTIONS, (16, n_envs))
    env.step(pool[0])
    t0 = time.perf_counter()
    for k in range(steps):
        env.step(pool[k & 15])
    return n_envs * steps / (time.perf_counter() - t0)


def time_cyborg(mode: str, red: str, n_envs: int, steps: int, scenario=None, seed: int = 0,
                start_method: str | None = None) -> float:
    from workflow_rl import make_vector_env
    from workflow_rl.envs.cyborg import CybORGEnv

    rng = np.random.default_rng(seed)
    if mode == "cyborg-episodes":
        from workflow_rl.rl.episode_workers import EpisodeWorkerPool
        from workflow_rl.rl.ppo import WORKFLOW_DIM, Agent

        episodes = max(n_envs, steps * n_envs // 100)
        pool = EpisodeWorkerPool(min(n_envs, os.cpu_count() or 1), red, 100, "cyborg", scenario, start_method)
        agent = Agent()
        try:
            jobs = [(seed + i, seed + i, i) for i in range(episodes)]
            t0 = time.perf_counter()
            pool.collect(agent.state_dict(), np.zeros(WORKFLOW_DIM, np.float32), None, 0.0, jobs)
            return episodes * 100 / (time.perf_counter() - t0)
        finally:
            pool.close()
    if mode == "cyborg-sequential":
        return _time_sequential([CybORGEnv(red, 100, scenario, seed=seed + i) for i in range(n_envs)], steps, rng)
    vec = {"cyborg-sync": "sync", "cyborg-pipes": "pipes", "cyborg-shm": "shared_memory"}[mode]
    env = make_vector_env(n_envs, red, engine="cyborg", seed=seed, vectorization=vec, start_method=start_method,
                          scenario=scenario)
    try:
        env.reset()
        env.step(rng.integers(0, tables.N_ACTIONS, n_envs))
        t0 = time.perf_counter()
        for _ in range(steps):
            env.step(rng.integers(0, tables.N_ACTIONS, n_envs))
        return n_envs * steps / (time.perf_counter() - t0)
    finally:
        env.close()


def _time_sequential(envs: list, steps: int, rng: np.random.Generator) -> float:
    """Steps/s of CybORG envs stepped one after another in a plain loop with random actions (reset when done)."""
    for e in envs:
        e.reset()
    t0 = time.perf_counter()
    for _ in range(steps):
        for e in envs:
            _, _, _, trunc, _ = e.step(int(rng.integers(0, tables.N_ACTIONS)))
            if trunc:
                e.reset()
    return len(envs) * steps / (time.perf_counter() - t0)


def run_bench(sizes=(1, 2, 4, 8, 16), modes=None, red: str = "B_lineAgent", cyborg_steps: int = 300,
              repeats: int = 3, scenario=None, out: str | Path = "benchmarks/results", start_method=None,
              log=print, native_sizes=NATIVE_SIZES) -> list[dict]:
    import torch

    modes = list(modes or (*CYBORG_MODES, "native-cpu", *(["native-cuda"] if torch.cuda.is_available() else [])))
    rows = []
    for mode in modes:
        # the native engine's best batch sizes are far beyond the process counts that suit CybORG
        mode_sizes = list(sizes) + ([s for s in native_sizes if s > max(sizes)] if mode.startswith("native") else [])
        for n in mode_sizes:
            runs = []
            for r in range(repeats if mode.startswith("native") else 1):
                if mode.startswith("native"):
                    dev = "cuda" if mode == "native-cuda" else "cpu"
                    steps = max(50, 1_000_000 // n) if dev == "cpu" else max(50, 10_000_000 // n)
                    runs.append(time_native(red, n, steps, seed=r, device=dev))
                else:
                    runs.append(time_cyborg(mode, red, n, max(20, cyborg_steps // n), scenario,
                                            start_method=start_method))
            rows.append({"mode": mode, "n_envs": n, "transitions_per_s": statistics.median(runs)})
            log(f"{mode:18s} n_envs={n:3d} {rows[-1]['transitions_per_s']:14,.0f} transitions/s")
    base = next((r["transitions_per_s"] for r in rows if r["mode"] == "cyborg-sequential" and r["n_envs"] == 1),
                None)
    for r in rows:
        r["vs_cyborg_single"] = r["transitions_per_s"] / base if base else float("nan")
    with staged_outputs(out) as stage:   # engines.csv, .md and .png: all three or none
        _write(rows, stage, red)
    return rows


def _write(rows: list[dict], out: Path, red: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with open(out / "engines.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    machine = f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python " \
              f"{platform.python_version()}"
    lines = [f"Engine benchmark vs {red} ({machine})", "", "| mode | n_envs | transitions/s | x CybORG single |",
             "|---|---:|---:|---:|"]
    lines += [f"| {r['mode']} | {r['n_envs']} | {r['transitions_per_s']:,.0f} | {r['vs_cyborg_single']:,.2f} |"
              for r in rows]
    (out / "engines.md").write_text("\n".join(lines) + "\n")
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for mode in dict.fromkeys(r["mode"] for r in rows):
        pts = [(r["n_envs"], r["transitions_per_s"]) for r in rows if r["mode"] == mode]
        ax.plot(*zip(*pts), marker="o", label=mode)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("n_envs")
    ax.set_ylabel("transitions / s")
    ax.set_title(f"CAGE2 engines vs {red}, {machine}", fontsize=8)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "engines.png", dpi=110)
    plt.close(fig)


# ------------------------------------------------------------------------------------------------ the native table
def time_kernel(red: str, n_envs: int, steps: int, seed: int = 0) -> float:
    """Env-steps/s of the numba kernel itself (``sim.native.step`` on its state arrays, no vector env around it)."""
    from workflow_rl.sim import native as N

    s, b = N.allocate_state(n_envs), N.allocate_buffers(n_envs)
    N.seed_state(s, seed, attackers.kind_of(red))
    N.reset_envs(s, b)
    pool = np.random.default_rng(seed).integers(0, tables.N_ACTIONS, (16, n_envs), dtype=np.int64)
    t0 = time.perf_counter()
    for k in range(steps):
        N.step(s, pool[k & 15], b, 100)
    return n_envs * steps / (time.perf_counter() - t0)


def time_cuda_kernel(red: str, n_envs: int, steps: int, seed: int = 0) -> float:
    """The CUDA kernel through ``env.step_tensor``, random actions drawn on the GPU, synchronised."""
    import torch

    from workflow_rl import make_vector_env

    env = make_vector_env(n_envs, red, seed=seed, device="cuda")
    env.reset()
    g = torch.Generator(device="cuda").manual_seed(seed)
    pool = torch.randint(0, tables.N_ACTIONS, (16, n_envs), device="cuda", generator=g)
    env.step_tensor(pool[0])
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for k in range(steps):
        env.step_tensor(pool[k & 15])
    torch.cuda.synchronize()
    return n_envs * steps / (time.perf_counter() - t0)


def time_cyborg_single(red: str, steps: int, scenario=None, log=print) -> float | None:
    """Steps/s of one real CybORG process with random actions; None (and a line saying why) without CybORG."""
    try:
        from workflow_rl.envs.cyborg import CybORGEnv

        env = CybORGEnv(red, 100, scenario, seed=0)
    except Exception as e:  # noqa: BLE001 - the baseline is optional
        log(f"(CybORG baseline skipped: {e})")
        return None
    return _time_sequential([env], steps, np.random.default_rng(0))


def check_native_sizes(sizes, cuda_sizes=(), cuda: bool | None = None) -> None:
    """Every batch the native table allocates fits in memory (this machine's for the CPU kernel, the GPU's for the
    CUDA one, timed where ``cuda``, default: where torch sees a GPU), checked before the first is allocated: one
    line naming the flag, not numpy's or CUDA's traceback after minutes of the smaller sizes."""
    from workflow_rl.devices import device_memory
    from workflow_rl.envs.factory import engine_bytes_per_env
    from workflow_rl.resources import check_memory

    if cuda is None:
        import torch

        cuda = torch.cuda.is_available()
    per_env = engine_bytes_per_env()
    if sizes:
        check_memory(f"--native-sizes {max(sizes):,}", max(sizes) * per_env, "use smaller --native-sizes")
    if cuda and cuda_sizes:
        check_memory(f"--cuda-sizes {max(cuda_sizes):,}", max(cuda_sizes) * per_env, "use smaller --cuda-sizes",
                     *device_memory("cuda"))


def check_cyborg_sizes(sizes, modes, red: str = "B_lineAgent") -> None:
    """Every CybORG cell of the engines table fits in this machine's memory: ``--sizes`` envs, each real CybORG's
    megabytes (``envs.factory.cyborg_bytes_per_env``) in this process (sequential, sync) or a worker process each
    (pipes, shm; episode workers: one per core, whatever the size), not the native engine's 700 bytes an env."""
    from workflow_rl.envs.factory import cyborg_bytes_per_env
    from workflow_rl.resources import check_memory, usable_cores

    for mode in modes:
        if mode not in CYBORG_MODES:
            continue
        n = max(sizes) if mode != "cyborg-episodes" else min(max(sizes), usable_cores())
        processes = mode in ("cyborg-pipes", "cyborg-shm", "cyborg-episodes")
        check_memory(f"--modes {mode} --sizes {max(sizes):,}", n * cyborg_bytes_per_env(processes, red),
                     "use smaller --sizes")


def run_native(sizes=KERNEL_SIZES, repeats: int = 3, min_steps: int = KERNEL_MIN_STEPS, cuda_sizes=CUDA_SIZES,
               cyborg_steps: int = 300, scenario=None, out: str | Path = "benchmarks/results", log=print,
               cuda: bool | None = None) -> list[dict]:
    """The native table: rows ``red, n_envs, steps_per_s, min, max`` (the median and range of ``repeats`` runs)
    into ``out/native.csv`` and ``out/native.md``, with one CybORG process per red agent for the ratio."""
    import numba

    from workflow_rl.sim import native as N

    if cuda is None:
        import torch

        cuda = torch.cuda.is_available()
    check_native_sizes(sizes, cuda_sizes, cuda)
    log(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"numba threads {numba.get_num_threads()}, python {platform.python_version()}")
    log(f"state: {N.state_bytes_per_env(N.allocate_state(1024))} bytes per env")
    rows = []

    def cell(label: str, n: int, runs: list[float]) -> None:
        rows.append({"red": label, "n_envs": n, "steps_per_s": statistics.median(runs), "min": min(runs),
                     "max": max(runs)})
        log(f"{label:28s} n_envs={n:8d}  {rows[-1]['steps_per_s']:14,.0f} env-steps/s (median of {len(runs)}; "
            f"{min(runs):,.0f}..{max(runs):,.0f})")

    for red in RED_AGENTS:
        time_kernel(red, 256, 50)  # warm-up / compile
        for n in sizes:
            steps = max(20, min_steps // n)
            cell(red, n, [time_kernel(red, n, steps, seed=r) for r in range(repeats)])
    for red in RED_AGENTS if cuda else ():
        for n in cuda_sizes:
            steps = max(20, 20 * min_steps // n)
            cell(f"{red} (CUDA kernel)", n, [time_cuda_kernel(red, n, steps, seed=r) for r in range(repeats)])
    cy = {red: time_cyborg_single(red, cyborg_steps, scenario, log) for red in RED_AGENTS} if cyborg_steps else {}

    lines = ["| red | n_envs | env-steps/s (median) | range |", "|---|---:|---:|---|"]
    lines += [f"| {r['red']} | {r['n_envs']} | {r['steps_per_s']:,.0f} | {r['min']:,.0f}..{r['max']:,.0f} |"
              for r in rows]
    for red, v in cy.items():
        if v:
            peak = max(r["steps_per_s"] for r in rows if r["red"] == red)  # the numba kernel
            lines.append(f"\nCybORG single process, {red}: {v:,.0f} steps/s; native peak / CybORG = {peak / v:,.0f}x")
    with staged_outputs(out) as stage:   # native.csv and .md: both or neither
        with open(stage / "native.csv", "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
        (stage / "native.md").write_text("\n".join(lines) + "\n")
    log("\n".join(lines))
    return rows


@dataclass
class BenchConfig:
    """The settings of one bench run (``workflow-rl bench`` makes its flags from these fields, each number checked
    against its range as it is typed; :func:`run` checks them again for a config built in Python)."""

    tables: list[str] = field(default_factory=lambda: list(TABLES), metadata={"choices": TABLES})
    """which tables to write (default both): engines (every mode), native (the kernel alone)"""
    sizes: list[int] = field(default_factory=lambda: [1, 2, 4, 8, 16])
    """engines table: n_envs per mode (native modes also run 256, 4096, 65536)"""
    modes: list[str] | None = field(default=None, metadata={"choices": (*CYBORG_MODES, "native-cpu", "native-cuda")})
    red_agent: str = "B_lineAgent"
    cyborg_steps: int = 400
    """vector steps x n_envs per CybORG cell (native table: steps of its one CybORG process)"""
    repeats: int = 3
    """native cells: median of this many runs"""
    native_sizes: list[int] = field(default_factory=lambda: list(KERNEL_SIZES))
    """native table: batch sizes of the numba kernel"""
    native_min_steps: int = KERNEL_MIN_STEPS
    """native table: env-steps per timed run (at least 20 steps)"""
    cuda_sizes: list[int] = field(default_factory=lambda: list(CUDA_SIZES), metadata={"nargs": "*"})
    """native table: batch sizes of the CUDA kernel, timed where torch sees a GPU; none to skip"""
    parallel_start_method: str | None = field(default=None, metadata={"choices": ("spawn", "fork", "forkserver")})
    scenario: str | None = None
    out: str = "benchmarks/results"
    overwrite: bool = False
    """replace the tables an earlier bench wrote into --out (refused without it)"""


def run(cfg: BenchConfig, threads: int | str | None = None) -> list[str]:
    """The benchmarks ``workflow-rl bench`` (and ``make bench``) runs: the tables ``cfg.tables`` written into
    ``cfg.out``, every check first (the numbers' ranges, the files ``out`` may take, the native sizes' memory, a GPU
    for ``native-cuda``) so none fails after minutes of timing; threads (``threads``: as ``--threads``) sized for
    the largest batch. Returns the names of the files written (:data:`FILES`)."""
    from workflow_rl import threads as thread_policy
    from workflow_rl.devices import check_device_available
    from workflow_rl.files import check_out_files
    from workflow_rl.ranges import check_fields

    check_fields(cfg)
    wanted = list(dict.fromkeys(cfg.tables))
    files = [f for table in wanted for f in FILES[table]]
    check_out_files("--out", cfg.out, files, [cfg.scenario], replace=cfg.overwrite)
    if "native" in wanted:   # before the engines table spends its minutes
        check_native_sizes(cfg.native_sizes, cfg.cuda_sizes)
    if "engines" in wanted:
        check_cyborg_sizes(cfg.sizes, cfg.modes or CYBORG_MODES, cfg.red_agent)
    if "engines" in wanted and cfg.modes and "native-cuda" in cfg.modes:
        check_device_available("cuda")
    largest = max(*cfg.sizes, *NATIVE_SIZES, *cfg.native_sizes)
    thread_policy.configure(thread_policy.Work(envs=largest), threads)   # its largest batch
    if "engines" in wanted:
        run_bench(cfg.sizes, cfg.modes, cfg.red_agent, cfg.cyborg_steps, cfg.repeats, cfg.scenario, cfg.out,
                  cfg.parallel_start_method)
    if "native" in wanted:
        run_native(cfg.native_sizes, cfg.repeats, cfg.native_min_steps, cfg.cuda_sizes, cfg.cyborg_steps,
                   cfg.scenario, cfg.out)
    return files
