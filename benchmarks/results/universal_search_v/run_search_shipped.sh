#!/bin/bash
# usage: run_search.sh NAME BUDGET SEED [extra search args]; from the snapshot /work/ship/src2 (main + the new universal agent)
name=$1; budget=$2; seed=$3; shift 3
cd /work/ship/src2
export PYTHONPATH=/work/ship/src2 WORKFLOW_RL_CACHE=/work/ship/cache
exec /usr/bin/time -f "$name,%U,%S,%E" -a -o /work/ship/times.csv nice env OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 \
  /work/main/.venv/bin/python -m workflow_rl.cli search --total-episodes $budget "$@" --seed $seed \
  --ground-truth benchmarks/results/ground_truth/ground_truth.csv --no-progress --out /work/ship/runs/$name > /work/ship/runs/$name.log 2>&1
