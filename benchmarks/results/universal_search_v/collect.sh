#!/bin/bash
# copy the small files of the finished searches under /work/ship/runs here (RUN-summary.json, RUN-screen.csv,
# RUN-gp_sampling_log.csv), the CPU times (/work/ship/times.csv) and score them all; run from the repository root
set -e
here=benchmarks/results/universal_search_v
runs=()
for d in /work/ship/runs/*/; do
  r=$(basename "$d"); [ -f "$d/summary.json" ] || continue
  for f in summary.json screen.csv gp_sampling_log.csv; do [ -f "$d/$f" ] && cp "$d/$f" "$here/$r-$f"; done
  case "$r" in scratch-*) ;; *) runs+=("$d") ;; esac
done
cp /work/ship/times.csv "$here/times.csv"
PYTHONPATH=$PWD python benchmarks/universal_search.py "${runs[@]}" \
  --ground-truth benchmarks/results/ground_truth/ground_truth.csv \
  --evaluation benchmarks/results/universal/workflows/workflows.csv --out "$here"
