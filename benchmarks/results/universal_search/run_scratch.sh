#!/bin/bash
# the baseline: make run's from-scratch search (the Makefile before the switch), same snapshot, same time window
cd /work/runs-lcache/src
export PYTHONPATH=/work/runs-lcache/src WORKFLOW_RL_CACHE=/work/runs-lcache/cache
exec /usr/bin/time -v nice env OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 /work/main/.venv/bin/python -m workflow_rl.cli \
  search --total-episodes 60000 --seed "$1" --ground-truth benchmarks/results/ground_truth/ground_truth.csv \
  --no-progress --out /work/runs-lcache/scratch-seed$1
