#!/bin/bash
# continue a search killed to free the CPU (helper l-search); usage: resume.sh RUN_DIR_NAME (e.g. a-seed1)
cd /work/runs-lsearch/src
export PYTHONPATH=/work/runs-lsearch/src
exec nice env OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 /work/main/.venv/bin/python -m workflow_rl.cli search \
  --resume /work/runs-lsearch/$1 --no-progress
