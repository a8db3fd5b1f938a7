#!/bin/bash
# issue L item 4 (a) with the screen cache: make run's budget from the shipped pretrained:universal; usage: run_c.sh SEED
# code: the commit in /work/runs-lcache/COMMIT (snapshot in /work/runs-lcache/src); cache: /work/runs-lcache/cache
cd /work/runs-lcache/src
export PYTHONPATH=/work/runs-lcache/src WORKFLOW_RL_CACHE=/work/runs-lcache/cache
exec /usr/bin/time -v nice env OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 /work/main/.venv/bin/python -m workflow_rl.cli \
  search --total-episodes 60000 --init-checkpoint pretrained:universal --hidden 256 256 --decoy-memory \
  --mask-decoys --seed "$1" --ground-truth benchmarks/results/ground_truth/ground_truth.csv \
  --no-progress --out /work/runs-lcache/c-seed$1
