#!/bin/bash
# issue L item 4 (b): the search trains its own universal agent on half of make run's budget, then fine-tunes (helper l-search)
# code: the commit in /work/runs-lsearch/COMMIT (snapshot in /work/runs-lsearch/src); usage: run_b.sh SEED
cd /work/runs-lsearch/src
export PYTHONPATH=/work/runs-lsearch/src
exec nice env OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 /work/main/.venv/bin/python -m workflow_rl.cli search \
  --total-episodes 60000 --universal-fraction 0.5 --seed "$1" \
  --ground-truth /work/runs-lsearch/src/benchmarks/results/ground_truth/ground_truth.csv \
  --no-progress --out /work/runs-lsearch/b-seed$1
