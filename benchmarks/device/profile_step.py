"""One CUDA engine step to profile with Nsight Compute: a vector env of ``--n-envs`` in ``--layout``, reset, three
warm-up steps (compile or load the kernel), then ``--steps`` more. Run under ncu so that only a step after the
warm-up is profiled, e.g. (what ``device_all.sh`` does with PROFILE=1):

    ncu --kernel-name regex:step_grid --launch-skip 3 --launch-count 1 --section SpeedOfLight \\
        --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats \\
        python3 benchmarks/device/profile_step.py --n-envs 1048576 --layout C

Why: the step kernel runs ~10x below the memory roofline at 1M envs with 48 registers and no spills (BENCHMARKS.md);
the profiler says whether it is bound by memory traffic (uncoalesced (env, host) rows), latency or occupancy.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from workflow_rl import make_vector_env  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n-envs", type=int, default=1 << 20)
    p.add_argument("--layout", default="F", help="GPU layout (sim.native.GPU_LAYOUTS; F, the default, or C)")
    p.add_argument("--red", default="bline")
    p.add_argument("--steps", type=int, default=2)
    args = p.parse_args()
    env = make_vector_env(args.n_envs, args.red, seed=0, device="cuda", gpu_layout=args.layout)
    env.reset()
    g = torch.Generator(device="cuda").manual_seed(0)
    for _ in range(3 + args.steps):
        env.step_tensor(torch.randint(0, 145, (args.n_envs,), device="cuda", generator=g))
    torch.cuda.synchronize()
    print(f"stepped {args.n_envs} envs ({args.layout}) {3 + args.steps} times")


if __name__ == "__main__":
    main()
