#!/bin/bash
# copy the small result files of finished searches here, then score all finished ones
# usage (from the repository root): benchmarks/results/universal_search/collect.sh RUN [RUN ...]   (e.g. a-seed0 c-seed1)
# RUN a-seed*/b-seed*: from /work/runs-lsearch (helper l-search); c-seed*: from /work/runs-lcache (helper l-cache)
set -e
here=benchmarks/results/universal_search
root() { case "$1" in c-*) echo /work/runs-lcache ;; *) echo /work/runs-lsearch ;; esac; }
for r in "$@"; do
  for f in summary.json screen.csv gp_sampling_log.csv; do cp "$(root "$r")/$r/$f" "$here/$r-$f"; done
done
PYTHONPATH=$PWD python benchmarks/universal_search.py \
  $(ls -d /work/runs-lsearch/[ab]-seed* /work/runs-lcache/c-seed* 2>/dev/null | while read d; do [ -f "$d/summary.json" ] && echo "$d"; done) \
  --ground-truth benchmarks/results/ground_truth/ground_truth.csv \
  --evaluation benchmarks/results/universal/workflows/workflows.csv --out "$here"
