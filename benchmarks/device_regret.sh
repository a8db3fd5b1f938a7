#!/usr/bin/env bash
# Issue G's regret runs on a GPU: GP-UCB vs random search, 5 search seeds x 60,000 / 100,000 episodes each, scored
# against the 120-workflow ground truth made on the CPU. Resumable: a rerun skips finished searches, so a cut-off
# call loses only the search in flight (its state comes back in the archive).
#   run: carry ["runs/gt-bline-pg40/ground_truth.csv"], then `bash benchmarks/device_regret.sh [SECONDS]`
set -u
LIMIT=${1:-480}
export PYTHONPATH=.
nvidia-smi --query-gpu=name --format=csv,noheader
timeout -s INT "$LIMIT" python3 benchmarks/regret.py runs --ground-truth runs/gt-bline-pg40/ground_truth.csv \
  --strategies gp-ucb random --budgets 60000 100000 --search-seeds 5 --out /tmp/regret \
  --device cuda --cuda-graphs > "$OUT/regret.log" 2>&1
tail -20 "$OUT/regret.log"
# every finished search's summary and logs (not the policies), in one archive: the device tool returns few files
(cd /tmp && tar czf "$OUT/regret.tgz" --exclude='*.pt' regret)
