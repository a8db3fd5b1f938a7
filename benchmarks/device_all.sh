#!/usr/bin/env bash
# One device call that measures issue H on the GPU and, on the same machine's CPU cores at the same time, collects
# issue K's real-CybORG curves. Wheels and scenario data come from `bash benchmarks/device_wheels.sh` (run beforehand
# where PyPI is reachable; carried as .whl/). Issue G's regret runs are not here: they run on the project's CPU
# (`benchmarks/regret.py runs`), or alone with `benchmarks/device_regret.sh`.
#   run: carry [".whl", "runs/curves-device"], then `bash benchmarks/device_all.sh [SECONDS]` (OUT is set by the
#   device tool). SECONDS (default 480) caps the CybORG collection; the GPU checks get SECONDS - 20.
#   The shards come back as curves.tgz: unpack it here with `mkdir -p runs/curves-device && tar xzf
#   FILES_AT/curves.tgz -C runs/curves-device --strip-components 1`; carried to the next call, its finished shards
#   are kept and the collection goes on (2,000 CybORG episodes per panel need ~25,000 worker-seconds).
set -u
LIMIT=${1:-480}
python3 -m pip install -q --no-index --no-deps --find-links .whl --target /tmp/site csle-cyborg gymnasium paramiko \
  prettytable PyYAML cryptography bcrypt PyNaCl cffi pycparser farama-notifications wcwidth invoke cloudpickle \
  typing-extensions >/dev/null 2>&1
export PYTHONPATH=/tmp/site:. PYTHONUNBUFFERED=1
nproc; python3 --version; nvidia-smi --query-gpu=name --format=csv,noheader
mkdir -p runs/curves-device
# K: CybORG on cores 0-13, resuming from the carried shards (shards are round-robin over the panels, so a partial
# run leaves every panel about equally far)
(taskset -c 0-13 timeout -s INT "$LIMIT" python3 -m workflow_rl.curves --collect-only --episodes 2000 --workers 14 \
   --scenario .whl/scenario --out runs/curves-device > "$OUT/collect.log" 2>&1
 echo "curves shards: $(ls runs/curves-device/shards | wc -l)") &
# H: the GPU checks on cores 14-15, most important first (graphs and rollout equality, then the 100k search)
taskset -c 14-15 python3 benchmarks/gpu_check.py --budget $((LIMIT - 20)) --engine-sizes 4096 65536 1048576 --engine-layouts C F \
  --search-episodes 100000 --search-batches 64 16 --search-timeout 100 --out "$OUT/gpu" > "$OUT/gpu.log" 2>&1
grep -A14 '"graphs"' "$OUT/gpu/gpu.json" | head -16; grep -A14 '"rollout"' "$OUT/gpu/gpu.json" | head -16
grep -A9 '"table"' "$OUT/gpu/gpu.json" | head -10; grep -A4 '"search"' "$OUT/gpu/gpu.json" | head -12
rm -rf "$OUT"/gpu/search_b*/policies "$OUT/gpu/train"
wait
tail -3 "$OUT/collect.log"
# the device tool returns a limited number of files: one archive each
tar czf "$OUT/curves.tgz" -C runs curves-device
tar czf "$OUT/gpu.tgz" -C "$OUT" gpu && rm -rf "$OUT/gpu"
