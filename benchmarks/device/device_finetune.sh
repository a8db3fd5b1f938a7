#!/usr/bin/env bash
# Issue M's GPU lever: fine-tune the shipped cage2 with PPO batches 20-80x larger than its own (it was last trained at
# 20,000 transitions per update; 4x that batch was its last measured gain, RESULTS.md issue I), on one GPU, for a
# fixed wall-clock budget, then score every result and cage2 itself on the selection set (1,000 native episodes per
# red agent, episode seed 777, greedy) on the machine's CPU cores. Everything is the CLI (python -m workflow_rl.cli).
#   run: carry [".whl"], then `bash benchmarks/device/device_finetune.sh`  (OUT is set by the device tool)
#   dry run here: `DEVICE=cpu TRAIN_S=40 BIG=64 SMALL=32 EVAL_EPISODES=50 OUT=$(mktemp -d) bash
#   benchmarks/device/device_finetune.sh`
# Also the planner's time per decision on one quiet core (planning.log). Returns $OUT/{ft-big-s0.pt,ft-big-s1.pt,ft-small-s0.pt,ft-small-s1.pt,selection.md,logs.tgz}.
set -u
. "$(dirname "$0")/device_env.sh"   # the carried wheels, PYTHONPATH
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 NUMBA_NUM_THREADS=1
PY=${PY:-python3}
DEVICE=${DEVICE:-cuda}
TRAIN_S=${TRAIN_S:-330}            # wall-clock cap of the training phase (SIGINT: the trainer saves and exits)
BIG=${BIG:-16384}                  # envs per seed of the large-batch pair (x 100 steps per update: 1.6M transitions)
SMALL=${SMALL:-4096}               # envs per seed of the other pair (409,600 transitions per update)
EVAL_EPISODES=${EVAL_EPISODES:-1000}
WORK=${WORK:-$(mktemp -d)}
rm -rf "$WORK"; mkdir -p "$WORK" "$OUT"
pin() { if [ "$(nproc)" -ge 16 ]; then taskset -c "$@"; else shift; "$@"; fi; }   # cores on the 16-core box
nproc; $PY --version; nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null
COMMON="--workflow none --init-checkpoint pretrained:cage2 --red-agent mix --hidden 256 256 --decoy-memory
  --mask-decoys --anneal-lr --learning-rate 2e-4 --update-every-steps 100 --max-episodes 100000000 --eval-episodes 0
  --device $DEVICE --no-progress --seeds 2"
# the episode budgets are what each pair was estimated to finish in TRAIN_S on an H100/H200 (the anneal spans them);
# the cap stops a slower run early with its checkpoint saved
(pin 0-3 timeout -s INT -k 60 "$TRAIN_S" $PY -m workflow_rl.cli train $COMMON --n-envs "$BIG" \
   --num-episodes $((BIG * 360)) --seed 81 --out "$WORK/ft-big" > "$WORK/train-big.log" 2>&1
 echo "train big exit $?" >> "$WORK/train-big.log") &
(pin 4-7 timeout -s INT -k 60 "$TRAIN_S" $PY -m workflow_rl.cli train $COMMON --n-envs "$SMALL" \
   --num-episodes $((SMALL * 700)) --seed 83 --out "$WORK/ft-small" > "$WORK/train-small.log" 2>&1
 echo "train small exit $?" >> "$WORK/train-small.log") &
# meanwhile, on a quiet core: the planner's time per decision at its defaults (issue M; the project's own numbers come
# from a loaded 2-core box), Meander's 100-step cell, 50 episodes
(pin 8 $PY benchmarks/studies/planning.py compare --red RedMeanderAgent \
   --episodes "${PLAN_EPISODES:-50}" --lengths 100 \
   --tag _quiet_core --out "$WORK/planning" > "$WORK/planning.log" 2>&1) &
wait
tail -n 3 "$WORK"/train-*.log "$WORK"/planning.log
# the selection set: greedy, both red agents, the three CAGE2 lengths, cage2 beside the candidates
i=0
for c in pretrained:cage2 "$WORK"/ft-*/seed_*/checkpoints/latest.pt; do
  name=$(echo "$c" | sed -e 's#pretrained:##' -e "s#$WORK/##" -e 's#/checkpoints/latest.pt##' -e 's#/#-#g')
  (pin $((8 + i % 8)) $PY -m workflow_rl.cli evaluate "$c" --red-agents bline meander --episodes "$EVAL_EPISODES" \
     --mode greedy --episode-seed 777 --out "$WORK/eval-$name" > "$WORK/eval-$name.log" 2>&1) &
  i=$((i + 1))
done
wait
for f in "$WORK"/eval-*.log; do echo "## $f"; grep -E "^\| native|sum" "$f"; done > "$OUT/selection.md"
cat "$OUT/selection.md"
for d in "$WORK"/ft-*/seed_*; do
  p=$(echo "$d" | sed -e "s#$WORK/##" -e 's#/seed_#-s#')
  [ -f "$d/checkpoints/latest.pt" ] && cp "$d/checkpoints/latest.pt" "$OUT/$p.pt"
done
tar czf "$OUT/logs.tgz" --exclude='*.pt' -C "$WORK" .
ls -la "$OUT"
