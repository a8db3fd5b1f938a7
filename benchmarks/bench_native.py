"""Native engine throughput: env-steps/s with uniformly random blue actions, B_line and Meander, over batch sizes.

Usage: python benchmarks/bench_native.py [--sizes 1 16 ... 65536] [--repeats 5] [--cyborg-steps 300] [--out DIR]
       [--cuda-sizes 65536 1048576]  (timed only where torch sees a CUDA GPU)

Each cell is the median of ``--repeats`` timed runs (after a warm-up run that also triggers compilation). Actions are
drawn once per run into a pool that is cycled, so the timing measures the engine, not the random generator. The
state size per env is printed too. When real CybORG is installed, one CybORG process is timed in the same run and
the ratio native/CybORG is reported (the machine is shared and noisy: compare ratios, not absolute numbers).
"""
from __future__ import annotations

import argparse
import csv
import os
import platform
import statistics
import time
from pathlib import Path

import numba
import numpy as np

from workflow_rl.sim import native as N
from workflow_rl.sim import tables as T


def time_native(red: int, n_envs: int, steps: int, seed: int = 0) -> float:
    s, b = N.allocate_state(n_envs), N.allocate_buffers(n_envs)
    N.seed_state(s, seed, red)
    N.reset_envs(s, b)
    pool = np.random.default_rng(seed).integers(0, T.N_ACTIONS, (16, n_envs), dtype=np.int64)
    t0 = time.perf_counter()
    for k in range(steps):
        N.step(s, pool[k & 15], b, 100)
    return n_envs * steps / (time.perf_counter() - t0)


def time_cuda(red: int, n_envs: int, steps: int, seed: int = 0) -> float:
    """The CUDA kernel through ``env.step_tensor``, random actions drawn on the GPU, synchronised."""
    import torch

    from workflow_rl import make_vector_env

    env = make_vector_env(n_envs, {T.RED_BLINE: "bline", T.RED_MEANDER: "meander"}[red], seed=seed, device="cuda")
    env.reset()
    g = torch.Generator(device="cuda").manual_seed(seed)
    pool = torch.randint(0, T.N_ACTIONS, (16, n_envs), device="cuda", generator=g)
    env.step_tensor(pool[0])
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for k in range(steps):
        env.step_tensor(pool[k & 15])
    torch.cuda.synchronize()
    return n_envs * steps / (time.perf_counter() - t0)


def time_cyborg(red: str, steps: int) -> float | None:
    try:
        from workflow_rl.envs.cyborg import CybORGEnv

        env = CybORGEnv(red, 100, seed=0)
    except Exception as e:  # noqa: BLE001 - the baseline is optional
        print(f"(CybORG baseline skipped: {e})")
        return None
    rng = np.random.default_rng(0)
    env.reset(seed=0)
    t0 = time.perf_counter()
    for _ in range(steps):
        _, _, _, trunc, _ = env.step(int(rng.integers(0, T.N_ACTIONS)))
        if trunc:
            env.reset()
    return steps / (time.perf_counter() - t0)


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", type=int, nargs="+", default=[1, 16, 256, 1024, 4096, 16384, 65536])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--min-steps", type=int, default=2_000_000, help="env-steps per timed run (at least 20 steps)")
    p.add_argument("--cyborg-steps", type=int, default=300)
    p.add_argument("--cuda-sizes", type=int, nargs="*", default=[65536, 1 << 20],
                   help="batch sizes for the CUDA kernel when a GPU is present; none to skip")
    p.add_argument("--out", default="benchmarks/results")
    args = p.parse_args()

    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"numba threads {numba.get_num_threads()}, python {platform.python_version()}")
    print(f"state: {N.state_bytes_per_env(N.allocate_state(1024))} bytes per env")
    rows = []
    for red_name in ("B_lineAgent", "RedMeanderAgent"):
        red = T.RED_AGENT_NAMES[red_name]
        time_native(red, 256, 50)  # warm-up / compile
        for n in args.sizes:
            steps = max(20, args.min_steps // n)
            runs = [time_native(red, n, steps, seed=r) for r in range(args.repeats)]
            rows.append({"red": red_name, "n_envs": n, "steps_per_s": statistics.median(runs),
                         "min": min(runs), "max": max(runs)})
            print(f"{red_name:16s} n_envs={n:6d}  {rows[-1]['steps_per_s']:14,.0f} env-steps/s (median of "
                  f"{args.repeats}; {min(runs):,.0f}..{max(runs):,.0f})")
    for red_name in ("B_lineAgent", "RedMeanderAgent") if args.cuda_sizes and _cuda_available() else ():
        red = T.RED_AGENT_NAMES[red_name]
        for n in args.cuda_sizes:
            steps = max(20, 20 * args.min_steps // n)
            runs = [time_cuda(red, n, steps, seed=r) for r in range(args.repeats)]
            rows.append({"red": f"{red_name} (CUDA kernel)", "n_envs": n, "steps_per_s": statistics.median(runs),
                         "min": min(runs), "max": max(runs)})
            print(f"{rows[-1]['red']:28s} n_envs={n:8d}  {rows[-1]['steps_per_s']:14,.0f} env-steps/s")
    cy = {r: time_cyborg(r, args.cyborg_steps) for r in ("B_lineAgent", "RedMeanderAgent")} \
        if args.cyborg_steps > 0 else {}

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "native.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    lines = ["| red | n_envs | env-steps/s (median) | range |", "|---|---:|---:|---|"]
    lines += [f"| {r['red']} | {r['n_envs']} | {r['steps_per_s']:,.0f} | {r['min']:,.0f}..{r['max']:,.0f} |"
              for r in rows]
    for red_name, v in cy.items():
        if v:
            peak = max(r["steps_per_s"] for r in rows if r["red"] == red_name)  # the numba kernel
            lines.append(f"\nCybORG single process, {red_name}: {v:,.0f} steps/s; native peak / CybORG = "
                         f"{peak / v:,.0f}x")
    (out / "native.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"wrote {out / 'native.csv'} and {out / 'native.md'}")


if __name__ == "__main__":
    main()
