#!/usr/bin/env bash
# Issue G's regret runs on a GPU: GP-UCB vs random search, 5 search seeds x 60,000 / 100,000 episodes each, scored
# against the 120-workflow ground truth made on the CPU. Resumable across calls and sessions: the searches live in
# runs/regret-bline-pg40, which comes back as regret.tgz (unpack it into runs/ here) and is carried to the next call,
# where finished searches are skipped and an interrupted one resumes.
#   run: carry ["runs/regret-bline-pg40"] (the ground truth is tracked in benchmarks/results/ground_truth/),
#        then `bash benchmarks/device/device_regret.sh [SECONDS]`; here: tar xzf FILES_AT/regret.tgz -C runs
set -u
LIMIT=${1:-480}
export PYTHONPATH=.
nvidia-smi --query-gpu=name --format=csv,noheader
timeout -s INT "$LIMIT" python3 benchmarks/studies/regret.py runs \
  --ground-truth benchmarks/results/ground_truth/ground_truth.csv \
  --strategies gp-ucb random --budgets 60000 100000 --search-seeds 5 --out runs/regret-bline-pg40 \
  --device cuda --cuda-graphs > "$OUT/regret.log" 2>&1
tail -20 "$OUT/regret.log"
# every search's state, logs and checkpoints in one archive: the device tool returns few files
# (policies included: an interrupted search resumes from its checkpoints; ~0.5 MB per workflow)
tar czf "$OUT/regret.tgz" -C runs regret-bline-pg40
