"""Training throughput of Q workflows in one batch (``BatchedTrainer``) against one workflow at a time (``Trainer``),
measured in the same process, alternating, median of ``--repeats``.

    python benchmarks/studies/bench_batched.py [--device cpu|cuda] [--slots 1 4 8] [--n-envs 200] [--rounds 3]

Each measurement trains ``--rounds`` episode rounds (100 steps of every env, 4 PPO updates at the search's 25 steps
per update) after one warm-up round, and reports transitions per second end to end (rollout + update). Writes a
Markdown table (and CSV) to ``--out``.
"""
from __future__ import annotations

import argparse
import csv
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from workflow_rl.rl.trainer import BatchedTrainer
from workflow_rl.rl.config import TrainConfig
from workflow_rl.rl.trainer import Trainer

WORKFLOWS = ["critical_first", "U,OH,OS,E,D", "D,E,OS,OH,U", "OS,OH,E,D,U", "E,U,D,OH,OS", "OH,OS,E,U,D",
             "U,E,D,OS,OH", "D,OH,U,E,OS"]


def _cfg(args, wf: str) -> TrainConfig:
    return TrainConfig(workflow=wf, n_envs=args.n_envs, update_every_steps=25, max_episodes=10**6,
                       device=args.device, seed=0, checkpoint_every=10**6, cuda_graphs=args.cuda_graphs)


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def time_single(args, tmp: Path) -> float:
    t = Trainer(_cfg(args, WORKFLOWS[0]), tmp / "single", progress=False)
    per_round = 100 // 25

    def rounds(k):
        for _ in range(k * per_round):
            steps, active = t.batch.plan(0)
            t.batch.update(steps, np.array([active]))

    rounds(1)
    _sync(args.device)
    t0 = time.perf_counter()
    rounds(args.rounds)
    _sync(args.device)
    return args.rounds * 100 * args.n_envs / (time.perf_counter() - t0)


def time_batched(args, q: int, tmp: Path) -> float:
    base = _cfg(args, WORKFLOWS[0])
    bt = BatchedTrainer(base, q)
    for k in range(q):
        bt.start(k, _cfg(args, WORKFLOWS[k % len(WORKFLOWS)]), tmp / f"slot{k}")
    bt.run_round()
    _sync(args.device)
    t0 = time.perf_counter()
    for _ in range(args.rounds):
        bt.run_round()
    _sync(args.device)
    rate = args.rounds * 100 * args.n_envs * q / (time.perf_counter() - t0)
    if args.profile:
        _profile_round(args, bt, q)
    bt.close()
    with open(tmp / "slot0" / "training_log.csv") as f:   # where an update's time goes (timed rounds only)
        rows = list(csv.DictReader(f))[-args.rounds * 100 // 25:]
    SPLIT[q] = [statistics.median(float(r[k]) for r in rows) for k in ("collection_time", "update_time")]
    return rate


def _profile_round(args, bt: BatchedTrainer, q: int) -> None:
    """One more episode round under torch's profiler: where a round's time goes, by operator (self time on the
    device first on a GPU), written to OUT/profile_<device>_q<Q>.txt. Not part of the timed rounds."""
    from torch.profiler import ProfilerActivity, profile

    cuda = args.device.startswith("cuda")
    try:
        with profile(activities=[ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if cuda else [])]) as prof:
            bt.run_round()
            _sync(args.device)
        table = prof.key_averages().table(sort_by="self_cuda_time_total" if cuda else "self_cpu_time_total",
                                          row_limit=40)
    except Exception as e:  # noqa: BLE001 - a diagnostic: the timings above must survive a profiler failure
        table = f"profiling failed: {type(e).__name__}: {e}"
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"profile_{'cuda' if cuda else 'cpu'}_q{q}.txt").write_text(table)


SPLIT: dict[int, list[float]] = {}
"""per slot count: median seconds of the rollout (25 steps) and of the PPO update, of the last repeat."""


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cpu")
    p.add_argument("--slots", type=int, nargs="+", default=[1, 4, 8])
    p.add_argument("--n-envs", type=int, default=200)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--cuda-graphs", action="store_true", help="replay the PPO minibatch step as a CUDA graph")
    p.add_argument("--profile", action="store_true", help="profile one more round per batch size (torch.profiler)")
    p.add_argument("--out", default="benchmarks/results")
    args = p.parse_args()
    samples: dict[str, list[float]] = {"single": []}
    for q in args.slots:
        samples[f"batch{q}"] = []
    with tempfile.TemporaryDirectory() as d:
        for r in range(args.repeats):
            samples["single"].append(time_single(args, Path(d) / f"r{r}"))
            for q in args.slots:
                samples[f"batch{q}"].append(time_batched(args, q, Path(d) / f"r{r}q{q}"))
    base = statistics.median(samples["single"])
    rows = [{"mode": "one workflow (Trainer)", "slots": 1, "transitions_per_s": base, "ratio": 1.0}]
    for q in args.slots:
        med = statistics.median(samples[f"batch{q}"])
        rows.append({"mode": "batched (BatchedTrainer)", "slots": q, "transitions_per_s": med, "ratio": med / base,
                     "collect_ms": 1e3 * SPLIT[q][0], "update_ms": 1e3 * SPLIT[q][1]})
    dev = (torch.cuda.get_device_name(0) if args.device.startswith("cuda")
           else f"cpu ({torch.get_num_threads()} threads)")
    cmd = (f"python benchmarks/studies/bench_batched.py --device {args.device} --slots "
           f"{' '.join(map(str, args.slots))} --n-envs {args.n_envs} --rounds {args.rounds}"
           + (" --cuda-graphs" if args.cuda_graphs else ""))
    lines = [f"Training throughput, {args.n_envs} envs per workflow, 25 steps per update, device {dev}, median of "
             f"{args.repeats} (`{cmd}`)", "",
             "| mode | workflows at once | transitions/s | vs one workflow | rollout ms | update ms |",
             "|---|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['mode']} | {r['slots']} | {r['transitions_per_s']:,.0f} | {r['ratio']:.2f}x | "
              + (f"{r['collect_ms']:.1f} | {r['update_ms']:.1f} |" if "collect_ms" in r else "| |") for r in rows]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tag = "cuda" if args.device.startswith("cuda") else "cpu"
    (out / f"batched_{tag}.md").write_text("\n".join(lines) + "\n")
    with open(out / f"batched_{tag}.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[-1]))
        w.writeheader()
        w.writerows(rows)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
