"""One prepared GPU run: check the CUDA engine against the CPU kernel, then time engine, training and a search.

Usage (on a machine with a CUDA GPU, from the repository root, after `make setup` or an equivalent install):

    python benchmarks/gpu_check.py --out "${OUT:-benchmarks/results/gpu}" [--max-log2 22] [--search-episodes 100000]

``--device cpu --max-log2 12 --train-envs 256 --search-episodes 2000 --skip-compile`` dry-runs every stage here.

Stages, most important first, each written to OUT/gpu.json as soon as it finishes (so a time-out still leaves the
finished ones):
1. equality: 150 steps of 4,096 envs, CPU numba kernel vs CUDA tensor path, every output compared;
2. engine-only env-steps/s over batch sizes 2^12 .. 2^max_log2 (eager);
3. batched multi-workflow training transitions/s (``benchmarks/bench_batched.py``: 1, 16, 64 workflows per batch
   against one workflow at a time), eager and with the engine step torch.compile'd;
4. wall-clock of a full workflow search on the GPU: batched (``--batch-workflows 16``: 16 workflows per engine
   call and per update) and one workflow at a time, each within ``--search-timeout``;
5. end-to-end single-workflow training transitions/s (`workflow-rl train --device cuda`) at a large batch;
6. the engine torch.compile'd at the two largest batch sizes.
The card's name goes with every number. Nothing here is a test: CI has no GPU.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch


def _save(out: Path, results: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu.json").write_text(json.dumps(results, indent=2))


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def check_equal(results: dict) -> None:
    from workflow_rl import make_vector_env

    a = make_vector_env(4096, "meander", seed=4)
    b = make_vector_env(4096, "meander", seed=4, device="cuda")
    a.reset(), b.reset()
    rng = np.random.default_rng(0)
    for _ in range(150):
        act = rng.integers(0, 145, 4096)
        oa, ra, _, ta, ia = a.step(act)
        ob, rb, _, tb, ib = b.step(act)
        if not (np.array_equal(oa, ob) and np.array_equal(ra, rb) and np.array_equal(ia["red_access"],
                                                                                      ib["red_access"])):
            raise SystemExit("CUDA tensor path differs from the CPU kernel: do not trust the timings")
    results["equality"] = "CUDA tensor path == CPU kernel on 150 steps x 4096 envs"


def time_engine(n: int, compiled: bool, device: str = "cuda", steps: int = 50) -> float:
    from workflow_rl.sim import native as N
    from workflow_rl.sim import tables as T
    from workflow_rl.sim import tensor as TT

    s = N.allocate_state(n)
    N.seed_state(s, 0, T.RED_BLINE)
    N.reset_envs(s, N.allocate_buffers(n))
    ts = TT.to_tensors(s, device)
    fn = torch.compile(TT.step, dynamic=False) if compiled else TT.step
    pool = torch.randint(0, 145, (8, n), device=device)
    for k in range(3):
        fn(ts, pool[k], 100)
    _sync(device)
    t0 = time.perf_counter()
    for k in range(steps):
        fn(ts, pool[k & 7], 100)
    _sync(device)
    return n * steps / (time.perf_counter() - t0)


def _timed_script(cmd: list[str], timeout: float) -> dict:
    """Wall-clock of a command; a run past ``timeout`` or a failing one is recorded as such, and the script goes on
    to the next stage (one device session must not be lost to one stage)."""
    t0 = time.perf_counter()
    try:
        subprocess.run(cmd, check=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"timed_out_after_s": timeout}
    except subprocess.CalledProcessError as e:
        return {"failed_with_exit_code": e.returncode, "after_s": time.perf_counter() - t0}
    return {"wall_s": time.perf_counter() - t0}


def _timed(cmd: list[str], timeout: float) -> dict:
    return _timed_script([sys.executable, "-m", "workflow_rl.cli", *cmd], timeout)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", default="benchmarks/results/gpu")
    p.add_argument("--device", default="cuda", help="cpu: a dry run of every stage at small sizes (no equality)")
    p.add_argument("--max-log2", type=int, default=22)
    p.add_argument("--train-envs", type=int, default=65536)
    p.add_argument("--search-episodes", type=int, default=100_000)
    p.add_argument("--search-batches", type=int, nargs="+", default=[16, 1],
                   help="--batch-workflows values to time the search with, in this order")
    p.add_argument("--search-timeout", type=float, default=240.0)
    p.add_argument("--batch-slots", type=int, nargs="+", default=[1, 16, 64],
                   help="workflows per batch for the batched-training throughput stage")
    p.add_argument("--skip-compile", action="store_true")
    args = p.parse_args()
    out, dev = Path(args.out), args.device
    if dev == "cuda" and not torch.cuda.is_available():
        raise SystemExit("no CUDA GPU visible to torch")
    results = {"gpu": torch.cuda.get_device_name(0) if dev == "cuda" else "none (cpu dry run)",
               "torch": torch.__version__}
    _save(out, results)
    if dev == "cuda":
        check_equal(results)
        _save(out, results)
    # most important first: a time-out still leaves the finished stages in gpu.json
    results["engine"] = []
    for log2 in range(12, args.max_log2 + 1, 2):
        n = 1 << log2
        row = {"n_envs": n, "eager": statistics.median(time_engine(n, False, dev) for _ in range(3))}
        results["engine"].append(row)
        print(row, flush=True)
        _save(out, results)
    bench = [sys.executable, str(Path(__file__).with_name("bench_batched.py")), "--device", dev, "--slots",
             *map(str, args.batch_slots), "--repeats", "1", "--out", str(out)]
    tag = "cuda" if dev == "cuda" else "cpu"
    for key, extra in (("batched_training", []), ("batched_training_compiled", ["--compile"])):
        if extra and args.skip_compile:
            continue
        results[key] = _timed_script(bench + extra, args.search_timeout)
        table = out / f"batched_{tag}{'_compiled' if extra else ''}.md"
        if table.exists():
            results[key]["table"] = table.read_text()
        _save(out, results)
    results["search"] = []
    for q in args.search_batches:
        row = {"total_episodes": args.search_episodes, "batch_workflows": q,
               **_timed(["search", "--device", dev, "--total-episodes", str(args.search_episodes),
                         "--batch-workflows", str(q), "--out", str(out / f"search_b{q}"), "--no-progress"],
                        args.search_timeout)}
        results["search"].append(row)
        print(row, flush=True)
        _save(out, results)
    run = out / "train"
    results["training"] = {"n_envs": args.train_envs, **_timed(
        ["train", "--device", dev, "--n-envs", str(args.train_envs), "--max-episodes", "3", "--eval-episodes", "1000",
         "--out", str(run), "--no-progress"], args.search_timeout)}
    if (run / "training_log.csv").exists():
        import csv

        with open(run / "training_log.csv") as f:
            results["training"]["sps_per_update"] = [float(r["sps"]) for r in csv.DictReader(f)]
    _save(out, results)
    if not args.skip_compile:   # compiling costs about a minute per shape: only the two largest
        for row in results["engine"][-2:]:
            row["compiled"] = statistics.median(time_engine(row["n_envs"], True, dev) for _ in range(3))
            print(row, flush=True)
            _save(out, results)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
