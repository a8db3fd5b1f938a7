#!/usr/bin/env bash
# One device call that measures issue H on the GPU and, on the same machine's CPU cores at the same time, collects
# issue K's real-CybORG curves; then, on the GPU, issue G's regret runs (benchmarks/device_regret.sh). Wheels and scenario data come from
# `bash benchmarks/device_wheels.sh` (run beforehand where PyPI is reachable; carried as .whl/).
#   run: carry [".whl", "runs/regret-bline-pg40"], then `bash benchmarks/device_all.sh`  (OUT is set by the device
#   tool)
set -u
python3 -m pip install -q --no-index --no-deps --find-links .whl --target /tmp/site csle-cyborg gymnasium paramiko \
  prettytable PyYAML cryptography bcrypt PyNaCl cffi pycparser farama-notifications wcwidth invoke cloudpickle \
  typing-extensions >/dev/null 2>&1
export PYTHONPATH=/tmp/site:.
nproc; python3 --version
# K: CybORG on cores 0-11 (2,000 episodes per panel, then the restore_compromised panels to 4,000)
(taskset -c 0-11 timeout -s INT 330 python3 -m workflow_rl.curves --collect-only --episodes 2000 --workers 12 \
   --scenario .whl/scenario --out "$OUT/curves" > "$OUT/collect.log" 2>&1
 taskset -c 0-11 timeout -s INT 100 python3 -m workflow_rl.curves --collect-only --episodes 4000 \
   --policies restore_compromised --workers 12 --scenario .whl/scenario --out "$OUT/curves" >> "$OUT/collect.log" 2>&1
 echo "curves shards: $(ls "$OUT/curves/shards" | wc -l)") &
# H: the GPU checks on cores 12-15
taskset -c 12-15 python3 benchmarks/gpu_check.py --budget 190 --engine-sizes 1048576 --search-episodes 100000 \
  --search-batches 64 --search-timeout 60 --out "$OUT/gpu" > "$OUT/gpu.log" 2>&1
grep -A12 '"graphs"' "$OUT/gpu/gpu.json" | head -14; grep -A9 '"table"' "$OUT/gpu/gpu.json" | head -10
rm -rf "$OUT"/gpu/search_b* "$OUT/gpu/train"
# G: the regret runs against the CPU-made ground truth (resumable; their folder comes back as regret.tgz)
taskset -c 12-15 bash benchmarks/device_regret.sh 230
wait
tail -2 "$OUT/collect.log"
# the device tool returns a limited number of files: one archive each (the first run lost 275 of 280 shards)
tar czf "$OUT/curves.tgz" -C "$OUT" curves && rm -rf "$OUT/curves"
tar czf "$OUT/gpu.tgz" -C "$OUT" gpu && rm -rf "$OUT/gpu"
