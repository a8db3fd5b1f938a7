#!/usr/bin/env bash
# Issue I's device job (benchmarks/device/device_agent.py) on CPU cores ${CORES:-0-5} (6 cores), about 6.5-7 min: trains
# the recipe candidates against the B_line/Meander mixture (250 s), selects, evaluates the chosen agent on the native
# engine and on real CybORG, writes everything under $OUT/agent. Wheels and scenario data (for real CybORG) come from
# `bash benchmarks/device/device_wheels.sh` (carry .whl/); without .whl/ the job runs with what is installed.
#   run: carry [".whl"], then `bash benchmarks/device/device_agent.sh`  (OUT is set by the device tool).
#   Returns 7 files: $OUT/agent/{status.json,ablation.md,curves.png,cage2.pt,cage2.json,work.tar.gz,stdout.log};
#   scratch in a temporary folder.
set -u
. "$(dirname "$0")/device_env.sh"   # the carried wheels, PYTHONPATH
mkdir -p "$OUT/agent"
taskset -c "${CORES:-0-5}" timeout -s INT 440 python3 benchmarks/device/device_agent.py --out "$OUT/agent" "$@" \
  > "$OUT/agent/stdout.log" 2>&1
echo "device_agent exit $?"; tail -25 "$OUT/agent/device_agent.log"
