#!/usr/bin/env bash
# Issue P on one GPU: `workflow-rl train --recipe universal` from random weights (the recipe's CUDA scale: 16,384 envs,
# 9.8M episodes), under a wall-clock cap, then on the machine's CPU cores: its six CAGE2 cells unconstrained (--workflow
# none, 1,000 native episodes each, greedy, episode seed 777, paired with the shipped pretrained:universal on the
# same episodes), its screen of all 120 workflows against both red agents (100 episodes each, with the ground truths), and
# its slim checkpoint (what ships, under 16 MiB). Everything is the CLI (python -m workflow_rl.cli).
#   run: carry [".whl"], then `bash benchmarks/device/device_recipe.sh`  (OUT is set by the device tool)
#   dry run here: `DEVICE=cpu TRAIN_S=60 SCALE="--n-envs 64 --num-episodes 2048" EVAL_EPISODES=50 SCREEN_EPISODES=4 \
#                  OUT=$(mktemp -d) bash benchmarks/device/device_recipe.sh`
# RECIPE=robust (issue Y: the held-out protocol's training attackers) trains that recipe instead and evaluates it on
# the held-out attackers too (EVAL_RED, default: the recipe's cells).
# Returns $OUT/{recipe-s<SEED>.pt,summary.md,train.log,logs.tgz}.
set -u
. "$(dirname "$0")/device_env.sh"   # the carried wheels, PYTHONPATH
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 NUMBA_NUM_THREADS=1
PY=${PY:-python3}
CLI="$PY -m workflow_rl.cli"
DEVICE=${DEVICE:-cuda}
SEED=${SEED:-0}
RECIPE=${RECIPE:-universal}
if [ "$RECIPE" = robust ]; then EVAL_RED=${EVAL_RED:-bline meander DelayedB_line UserHopper}; fi
EVAL_RED=${EVAL_RED:-bline meander}
TRAIN_S=${TRAIN_S:-480}            # wall-clock cap of training (SIGINT: the trainer saves and exits; the card says so)
SCALE=${SCALE:-}                   # typed over the recipe's scale (e.g. --n-envs 8192 --num-episodes 4000000)
EVAL_EPISODES=${EVAL_EPISODES:-1000}
SCREEN_EPISODES=${SCREEN_EPISODES:-100}
WORK=${WORK:-$(mktemp -d)}
rm -rf "$WORK"; mkdir -p "$WORK" "$OUT"
pin() { if [ "$(nproc)" -ge 16 ]; then taskset -c "$@"; else shift; "$@"; fi; }   # cores on the 16-core box
nproc; $PY --version; nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null
start=$(date +%s)
pin 0-3 timeout -s INT -k 60 "$TRAIN_S" $CLI train --recipe "$RECIPE" --device "$DEVICE" $SCALE --seed "$SEED" \
  --no-progress --out "$WORK/train" > "$WORK/train.log" 2>&1
echo "train exit $? after $(( $(date +%s) - start )) s wall" | tee -a "$WORK/train.log"
CK="$WORK/train/checkpoints/latest.pt"
[ -f "$CK" ] || { tail -n 20 "$WORK/train.log"; cp "$WORK/train.log" "$OUT/"; exit 1; }
# the evaluations, on the CPU cores while nothing else runs
E="--mode greedy --episode-seed 777"
(pin 4 $CLI evaluate "$CK" --workflow none --red-agents $EVAL_RED --episodes "$EVAL_EPISODES" $E \
   --out "$WORK/eval-none" > "$WORK/eval-none.log" 2>&1) &
(pin 5 $CLI evaluate pretrained:universal --workflow none --red-agents $EVAL_RED --episodes "$EVAL_EPISODES" \
   $E --out "$WORK/eval-shipped" > "$WORK/eval-shipped.log" 2>&1) &
(pin 6-7 $CLI evaluate "$CK" --workflow all --red-agents B_lineAgent --lengths 100 --episodes "$SCREEN_EPISODES" \
   --ground-truth benchmarks/results/ground_truth/ground_truth.csv --out "$WORK/screen-bline" \
   > "$WORK/screen-bline.log" 2>&1) &
(pin 8-9 $CLI evaluate "$CK" --workflow all --red-agents RedMeanderAgent --lengths 100 --episodes "$SCREEN_EPISODES" \
   --ground-truth benchmarks/results/ground_truth_meander/ground_truth.csv --out "$WORK/screen-meander" \
   > "$WORK/screen-meander.log" 2>&1) &
wait
$CLI compare "$WORK/eval-shipped" "$WORK/eval-none" > "$WORK/compare.log" 2>&1
{ echo "# recipe $RECIPE, seed $SEED, $DEVICE"; nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null
  grep -E "^training|^done|exit" "$WORK/train.log"; tail -n 2 "$WORK/train/training_log.csv" | cut -c1-300
  for f in eval-none eval-shipped screen-bline screen-meander compare; do echo "## $f"; tail -n 25 "$WORK/$f.log"; done
} > "$OUT/summary.md"
cat "$OUT/summary.md"
$PY -c "from workflow_rl.rl.pretrained import save_slim; save_slim('$CK', '$OUT/recipe-s$SEED.pt')"
cp "$WORK/train.log" "$OUT/"
tar czf "$OUT/logs.tgz" --exclude='*.pt' -C "$WORK" .
ls -la "$OUT"
