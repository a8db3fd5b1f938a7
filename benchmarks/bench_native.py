"""The native table of ``workflow-rl bench`` under this script's old flags (kept so the commands recorded in
BENCHMARKS.md still run): ``python benchmarks/bench_native.py [--sizes ...] [--repeats 5] [--min-steps N]
[--cyborg-steps 300] [--cuda-sizes ...] [--out DIR]`` is ``workflow-rl bench --tables native --native-sizes ...
--repeats 5 --native-min-steps N --cyborg-steps 300 --cuda-sizes ... --out DIR`` (``--cyborg-steps 0``: no CybORG
process). The one implementation is ``workflow_rl.bench.run_native``; ``make bench`` runs ``workflow-rl bench``.
"""
from __future__ import annotations

import argparse

from workflow_rl.bench import CUDA_SIZES, KERNEL_MIN_STEPS, KERNEL_SIZES, run_native


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", type=int, nargs="+", default=list(KERNEL_SIZES))
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--min-steps", type=int, default=KERNEL_MIN_STEPS)
    p.add_argument("--cyborg-steps", type=int, default=300)
    p.add_argument("--cuda-sizes", type=int, nargs="*", default=list(CUDA_SIZES))
    p.add_argument("--out", default="benchmarks/results")
    a = p.parse_args()
    run_native(a.sizes, a.repeats, a.min_steps, a.cuda_sizes, a.cyborg_steps, out=a.out)
    print(f"wrote {a.out}/native.csv and {a.out}/native.md")


if __name__ == "__main__":
    main()
