#!/bin/bash
# issue L item 4 (a): the search from the universal agent of /work/runs-l/universal (60k episodes fine-tuned from
# pretrained:cage2 across 96 workflows, 24 held out; its training not counted), make run's budget (helper l-search)
# code: the commit in /work/runs-lsearch/COMMIT (snapshot in /work/runs-lsearch/src); usage: run_a.sh SEED
cd /work/runs-lsearch/src
export PYTHONPATH=/work/runs-lsearch/src
exec nice env OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 /work/main/.venv/bin/python -m workflow_rl.cli search \
  --total-episodes 60000 --init-checkpoint /work/runs-lsearch/universal.pt --hidden 256 256 --decoy-memory \
  --mask-decoys --seed "$1" \
  --ground-truth /work/runs-lsearch/src/benchmarks/results/ground_truth/ground_truth.csv \
  --no-progress --out /work/runs-lsearch/a-seed$1
