#!/bin/bash
# copy the small files of the finished searches under /work/ship/runs here (RUN-summary.json, RUN-screen.csv,
# RUN-gp_sampling_log.csv) and the CPU times (/work/ship/times.csv, /usr/bin/time), then score them: the searches
# from the violations-form agent of universal_v10 (u*) against its own 500-episode evaluation into v10/, those from
# the shipped agent (c9k*) against its own into shipped/. Run from the repository root.
set -e
here=benchmarks/results/universal_search_v
v10=(); shipped=()
for d in /work/ship/runs/*/; do
  r=$(basename "$d"); [ -f "$d/summary.json" ] || continue
  for f in summary.json screen.csv gp_sampling_log.csv; do [ -f "$d/$f" ] && cp "$d/$f" "$here/$r-$f"; done
  case "$r" in u*) v10+=("$d") ;; c9k*) shipped+=("$d") ;; esac   # scratch-*: summaries only
done
{ echo "run,user_s,system_s,elapsed"; cat /work/ship/times.csv; } > "$here/times.csv"
score() {
  PYTHONPATH=$PWD python benchmarks/universal_search.py "${@:3}" --ground-truth \
    benchmarks/results/ground_truth/ground_truth.csv --evaluation "$2" --out "$here/$1"
}
score v10 benchmarks/results/universal_v10/workflows/workflows.csv "${v10[@]}"
score shipped benchmarks/results/universal/workflows/workflows.csv "${shipped[@]}"
