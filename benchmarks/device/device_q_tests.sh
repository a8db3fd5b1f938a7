#!/usr/bin/env bash
# Issue Q, item 1 on a GPU: every command that takes --device runs on CUDA with every kind of agent. One device call:
#   1. the GPU-only tests (tests/test_cuda_agents.py: evaluate greedy/sampled/planned/--workflow all, baselines,
#      real CybORG beside an agent on the GPU, replay, train --init-checkpoint, search --init-checkpoint;
#      test_train_on_cuda_interrupted_resumes; the CUDA
#      engine's and the compliance tracker's CUDA cases) and the CPU suite's fake-device tests (tests/test_devices.py);
#   2. the issue's two failing commands at small sizes (search --init-checkpoint pretrained:universal ... --device
#      cuda; evaluate pretrained:universal --workflow all ... --device cuda);
#   3. the evidence for reusing the shipped screen on CUDA: the universal agent's screen at the default search
#      settings computed on the GPU, against the shipped (CPU-computed) one, workflow by workflow; and a greedy
#      evaluation across all workflows on both devices, compared row by row.
#   run: carry [".whl"] (bash benchmarks/device/device_wheels.sh, where PyPI is reachable), then
#        `bash benchmarks/device/device_q_tests.sh`  (OUT is set by the device tool); about 5 minutes on an H200
#   dry run here: `OUT=$(mktemp -d) DEVICE=cpu bash benchmarks/device/device_q_tests.sh` (the GPU tests skip;
#        the commands run on the CPU; step 3 compares the CPU with itself)
# Returns $OUT/{env,pytest,search,evaluate_all,screen,compare}.log.
set -u
. "$(dirname "$0")/device_env.sh"   # the carried wheels (gymnasium: the device image has none), PYTHONPATH
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
DEVICE=${DEVICE:-cuda}
WORK=${WORK:-$(mktemp -d)}
rm -rf "$WORK"; mkdir -p "$WORK" "$OUT"
export WORKFLOW_RL_CACHE="$WORK/cache"   # no screen cached by an earlier run is read
# real CybORG's scenario data, carried in .whl/ (the one GPU test that evaluates on both engines)
[ -f .whl/scenario/Scenario2.yaml ] && export WORKFLOW_RL_CAGE2_SCENARIO="$PWD/.whl/scenario"
{ nproc; $PY --version; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  $PY -c "import torch, numba, numpy; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(),
'numba', numba.__version__, 'numpy', numpy.__version__)"; } > "$OUT/env.log" 2>&1
cat "$OUT/env.log"

# 1. the tests (the interrupted-resume one first: it failed on an H200, and prints the run's output if it fails)
timeout -s INT 330 $PY -m pytest -q -rs -p no:cacheprovider --durations=15 \
  "tests/cli/test_bad_input.py::test_train_on_cuda_interrupted_resumes" tests/test_cuda_agents.py \
  "tests/sim/test_cuda_engine.py::test_cuda_env_equals_cpu_env_and_snapshots_round_trip" \
  tests/rl/test_compliance.py tests/test_devices.py > "$OUT/pytest.log" 2>&1
echo "pytest exit $?" >> "$OUT/pytest.log"
grep -E "passed|failed|error|SKIPPED|^FAILED|^ERROR|exit" "$OUT/pytest.log" | tail -n 25

# 2. the issue's commands, smaller (the search: 400 of its 9,000 episodes; the evaluation: 50 of its 500 per workflow)
timeout -s INT 150 $PY -m workflow_rl.cli search --total-episodes 400 --init-checkpoint pretrained:universal \
  --hidden 256 256 --decoy-memory --mask-decoys --device "$DEVICE" --no-progress --out "$WORK/search" \
  > "$OUT/search.log" 2>&1
echo "search exit $?" >> "$OUT/search.log"
grep -E "universal agent evaluation|^answer|exit|error|Error" "$OUT/search.log" | cut -c1-200
timeout -s INT 150 $PY -m workflow_rl.cli evaluate pretrained:universal --workflow all --red-agents B_lineAgent \
  RedMeanderAgent --lengths 100 --episodes 50 --device "$DEVICE" --out "$WORK/eval-all" > "$OUT/evaluate_all.log" 2>&1
echo "evaluate exit $?" >> "$OUT/evaluate_all.log"
tail -n 4 "$OUT/evaluate_all.log" | cut -c1-200

# 3. the shipped screen against the screen computed on this device
timeout -s INT 120 $PY - "$DEVICE" > "$OUT/screen.log" 2>&1 <<'PY'
import sys, time
from workflow_rl.rl import pretrained
from workflow_rl.search import screen_cache as C, universal as U
from workflow_rl.search.config import SearchConfig

w, s = pretrained.path("universal"), U.screen_settings(SearchConfig())
shipped = C.from_json(C.shipped_file(w).read_text(), C.screen_key(w, s))
t0 = time.time()
here = U.compute_screen(w, s, sys.argv[1])
took = time.time() - t0
same = sum(a == b for a, b in zip(shipped, here))
gaps = [abs(a.observed_reward - b.observed_reward) / max(a.observed_ci95, 1e-9) for a, b in zip(shipped, here)]
calls = sum(a.eligible(0.95) != b.eligible(0.95) for a, b in zip(shipped, here))
print(f"screen at the default search settings on {sys.argv[1]}: {took:.0f} s; {same} of {len(here)} workflows "
      f"identical to the shipped CPU screen; largest mean difference {max(gaps):.3f} of its 95% interval; "
      f"{calls} eligibility calls (0.95) differ")
PY
echo "screen exit $?" >> "$OUT/screen.log"
cat "$OUT/screen.log"
# the greedy evaluation across workflows, this device against the CPU (same episodes), row by row
timeout -s INT 120 $PY -m workflow_rl.cli evaluate pretrained:universal --workflow all --red-agents B_lineAgent \
  --lengths 100 --episodes 20 --device cpu --out "$WORK/eval-cpu" > "$WORK/eval-cpu.log" 2>&1
timeout -s INT 120 $PY -m workflow_rl.cli evaluate pretrained:universal --workflow all --red-agents B_lineAgent \
  --lengths 100 --episodes 20 --device "$DEVICE" --out "$WORK/eval-dev" > "$WORK/eval-dev.log" 2>&1
{ tail -n 1 "$WORK/eval-cpu.log" "$WORK/eval-dev.log"
  echo "workflows.csv rows differing between cpu and $DEVICE (of $(wc -l < "$WORK/eval-cpu/workflows.csv")):" \
    "$(diff "$WORK/eval-cpu/workflows.csv" "$WORK/eval-dev/workflows.csv" | grep -c '^>')"
  diff "$WORK/eval-cpu/workflows.csv" "$WORK/eval-dev/workflows.csv" | head -n 10; } > "$OUT/compare.log" 2>&1
cat "$OUT/compare.log"
ls -la "$OUT"
