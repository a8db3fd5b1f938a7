#!/usr/bin/env bash
# One device call that measures issue H on the GPU (both GPU layouts, graphs, training, the 100k search) and, on the
# same machine's CPU cores at the same time, runs issue I's device job (recipe ablation over seeds, CybORG
# evaluation). Wheels and scenario data come from `bash benchmarks/device_wheels.sh` (run beforehand where PyPI is
# reachable; carried as .whl/). Issue G's regret runs are not here: they run on the project's CPU
# (`benchmarks/regret.py runs`), or alone with `benchmarks/device_regret.sh`.
#   run: carry [".whl"], then `bash benchmarks/device_all.sh [SECONDS]` (OUT is set by the device tool); the GPU
#   checks get SECONDS - 20 (default 480); issue I's job takes ~7 min. With CURVES=1 (carry "runs/curves-device"
#   too) more CybORG curve shards are collected on cores 6-13 and come back as curves.tgz (unpack with `mkdir -p
#   runs/curves-device && tar xzf FILES_AT/curves.tgz -C runs/curves-device --strip-components 1`).
set -u
LIMIT=${1:-480}
python3 -m pip install -q --no-index --no-deps --find-links .whl --target /tmp/site csle-cyborg gymnasium paramiko \
  prettytable PyYAML cryptography bcrypt PyNaCl cffi pycparser farama-notifications wcwidth invoke cloudpickle \
  typing-extensions >/dev/null 2>&1
export PYTHONPATH=/tmp/site:. PYTHONUNBUFFERED=1
nproc; python3 --version; nvidia-smi --query-gpu=name --format=csv,noheader
# I: the recipe ablation over seeds and the agent's CybORG evaluation on cores 0-5 (what benchmarks/device_agent.sh
# runs, without its own wheel install: one install, above, for every job here)
mkdir -p "$OUT/agent"
(taskset -c 0-5 timeout -s INT 440 python3 benchmarks/device_agent.py --out "$OUT/agent" > "$OUT/agent/stdout.log" 2>&1
 echo "device_agent exit $?" > "$OUT/agent.log") &
# K's CybORG curves are collected (tests/data/cyborg_curves.csv); CURVES=1 collects more on cores 6-13
if [ "${CURVES:-0}" = 1 ]; then
  mkdir -p runs/curves-device
  (taskset -c 6-13 timeout -s INT "$LIMIT" python3 -m workflow_rl.curves --collect-only --episodes 4000 --workers 8 \
     --scenario .whl/scenario --out runs/curves-device > "$OUT/collect.log" 2>&1) &
fi
# H: the GPU checks on cores 14-15, most important first (graphs and rollout equality, then the 100k search with
# elastic claims, claims lowered at the gate and kept whole: benchmarks/search_claims.py)
taskset -c 14-15 python3 benchmarks/gpu_check.py --budget $((LIMIT - 20)) --engine-sizes 4096 65536 1048576 \
  --engine-layouts C F --search-episodes 100000 --search-batches 16 --search-timeout 100 --out "$OUT/gpu" \
  > "$OUT/gpu.log" 2>&1
grep -A14 '"graphs"' "$OUT/gpu/gpu.json" | head -16; grep -A14 '"rollout"' "$OUT/gpu/gpu.json" | head -16
grep -A9 '"table"' "$OUT/gpu/gpu.json" | head -10; grep -A30 '"search_claims"' "$OUT/gpu/gpu.json" | grep -E 'mode|rounds|in_flight|wall_s' | head -16
rm -rf "$OUT"/gpu/search_b*/policies "$OUT"/gpu/search_b*/workflows "$OUT"/gpu/claims/*/workflows "$OUT/gpu/train"
wait
cat "$OUT/agent.log"; tail -25 "$OUT/agent/device_agent.log" 2>/dev/null
# the device tool returns a limited number of files: one archive each
[ "${CURVES:-0}" = 1 ] && tar czf "$OUT/curves.tgz" -C runs curves-device
tar czf "$OUT/gpu.tgz" -C "$OUT" gpu && rm -rf "$OUT/gpu"
tar czf "$OUT/agent.tgz" -C "$OUT" agent && rm -rf "$OUT/agent"
