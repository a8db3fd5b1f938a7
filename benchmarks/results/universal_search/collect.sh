#!/bin/bash
# copy the small result files of finished searches under /work/runs-lsearch here, then score them
# usage (from the repository root): benchmarks/results/universal_search/collect.sh RUN [RUN ...]   (e.g. a-seed0 b-seed0)
set -e
here=benchmarks/results/universal_search
for r in "$@"; do
  for f in summary.json screen.csv gp_sampling_log.csv; do cp "/work/runs-lsearch/$r/$f" "$here/$r-$f"; done
done
PYTHONPATH=$PWD python benchmarks/universal_search.py $(ls -d /work/runs-lsearch/[ab]-seed* | while read d; do [ -f "$d/summary.json" ] && echo "$d"; done) \
  --ground-truth benchmarks/results/ground_truth/ground_truth.csv --out "$here"
