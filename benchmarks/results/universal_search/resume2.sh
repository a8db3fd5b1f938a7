#!/bin/bash
# continue a search stopped to free the CPU, with the code of COMMIT2 (snapshot src2) (helper l-search); usage: resume2.sh RUN
cd /work/runs-lsearch/src2
export PYTHONPATH=/work/runs-lsearch/src2
exec nice env OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 /work/main/.venv/bin/python -m workflow_rl.cli search \
  --resume /work/runs-lsearch/$1 --no-progress
