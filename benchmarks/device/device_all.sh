#!/usr/bin/env bash
# One device call that measures issue H on the GPU (both GPU layouts, graphs, training, the 100k search). Wheels and scenario data come from `bash benchmarks/device/device_wheels.sh` (run beforehand where PyPI
# is reachable; carried as .whl/). Issue G's regret runs are not here: they run on the project's CPU
# (`benchmarks/studies/regret.py runs`), or alone with `benchmarks/device/device_regret.sh`.
#   run: carry [".whl"], then `[PROFILE=1] [GPU_ARGS="--stages ..."]
#        bash benchmarks/device/device_all.sh [SECONDS]`
#   (GPU_ARGS: more gpu_check.py options, e.g. a subset of its stages) (OUT is set by the device tool); the GPU
#   checks get SECONDS - 20 (default 480). With CURVES=1 (carry "runs/curves-device"
#   too) more CybORG curve shards are collected on cores 6-13 and come back as curves.tgz (unpack with `mkdir -p
#   runs/curves-device && tar xzf FILES_AT/curves.tgz -C runs/curves-device --strip-components 1`).
set -u
LIMIT=${1:-480}
. "$(dirname "$0")/device_env.sh"   # the carried wheels, PYTHONPATH
export PYTHONUNBUFFERED=1
nproc; python3 --version; nvidia-smi --query-gpu=name --format=csv,noheader
# the GPU checks run on cores 14-15 beside CURVES=1's collection, on every core without it
GPU_CORES=14-15
[ "${CURVES:-0}" = 1 ] || GPU_CORES=0-15
# K's CybORG curves are collected (tests/data/cyborg_curves.csv); CURVES=1 collects more on cores 6-13
if [ "${CURVES:-0}" = 1 ]; then
  mkdir -p runs/curves-device
  (taskset -c 6-13 timeout -s INT "$LIMIT" python3 -m workflow_rl.cli curves --collect-only --episodes 4000 \
     --workers 8 --scenario .whl/scenario --out runs/curves-device > "$OUT/collect.log" 2>&1) &
fi
# H: the GPU checks on cores 14-15, most important first (graphs and rollout equality, then the 100k search with
# elastic claims, claims lowered at the gate and kept whole: benchmarks/studies/search_claims.py)
taskset -c $GPU_CORES python3 benchmarks/device/gpu_check.py --budget $((LIMIT - 20)) \
  --engine-sizes ${ENGINE_SIZES:-4096 65536 1048576} \
  --engine-layouts C F --search-episodes 100000 --search-batches 16 --search-timeout 100 --out "$OUT/gpu" \
  ${GPU_ARGS:-} > "$OUT/gpu.log" 2>&1
python3 - "$OUT/gpu/gpu.json" <<'PY'   # the headline numbers, for the device tool's output tail
import json, sys
r = json.load(open(sys.argv[1]))
print(r.get("gpu"), {k: r.get(k) for k in ("torch", "numba-cuda", "numpy")})
print("equality", r.get("equality", {}).get("equal"), "| rollout graphs==eager", r.get("rollout", {}).get("rollouts_equal"),
      r.get("rollout", {}).get("masked_decoy_rollouts_equal"), "| update graphs==eager",
      r.get("graphs", {}).get("first_update_weights_equal"))
for caps, stage in [(None, r.get("engine", {}))] + [(x.get("max_registers"), x) for x in r.get("registers", [])]:
    for row in stage.get("rows", []):
        print(f"engine cap={caps} {row['layout']} {row['n_envs']:>8} {row['red']:8} {row['env_steps_per_s']/1e6:8.0f}M "
              f"graph {row.get('graph_env_steps_per_s', 0)/1e6:8.0f}M")
    if "rows" not in stage and stage:
        print("engine cap", caps, str(stage)[:300])
print((r.get("batched_training") or {}).get("table", ""))
for row in (r.get("search_claims") or {}).get("rows", []):
    print("search", row)
for k in ("search_claims", "training"):
    if r.get(k) and "wall_s" not in r[k]:
        print(k, str(r[k])[:300])
PY
# PROFILE=1: Nsight Compute on one step of the engine kernel at 1M envs, each GPU layout
# (benchmarks/device/profile_step.py)
if [ "${PROFILE:-0}" = 1 ]; then
  NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  for L in C F; do
    timeout 60 "$NCU" --kernel-name regex:step_grid --launch-skip 3 --launch-count 1 --section SpeedOfLight \
      --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats --section SchedulerStats \
      --section WarpStateStats python3 benchmarks/device/profile_step.py --n-envs 1048576 --layout $L \
      > "$OUT/gpu/ncu_$L.txt" 2>&1 || echo "ncu $L exit $?" >> "$OUT/gpu/ncu_$L.txt"
    grep -E "Duration|Memory Throughput|DRAM Throughput|Achieved Occupancy|Registers Per|No Eligible|Stall" \
      "$OUT/gpu/ncu_$L.txt" | head -14
  done
fi
rm -rf "$OUT"/gpu/search_b*/policies "$OUT"/gpu/search_b*/workflows "$OUT"/gpu/claims/*/workflows "$OUT/gpu/train"
wait
# the device tool returns a limited number of files: one archive each
if [ "${CURVES:-0}" = 1 ]; then tar czf "$OUT/curves.tgz" -C runs curves-device; fi
tar czf "$OUT/gpu.tgz" -C "$OUT" gpu && rm -rf "$OUT/gpu"
