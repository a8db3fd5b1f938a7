#!/bin/bash
# copy the small result files of finished searches here, then score all finished ones
# usage (from the repository root): benchmarks/results/universal_search/collect.sh RUN [RUN ...]   (e.g. a-seed0 c-seed1)
# RUN a-seed*/b-seed*: from /work/runs-lsearch (helper l-search); c-seed*, scratch-seed*: from /work/runs-lcache
# (helper l-cache; scratch-seed*: the from-scratch baseline, run_scratch.sh, summary only, not scored here)
set -e
here=benchmarks/results/universal_search
root() { case "$1" in c-*|scratch-*) echo /work/runs-lcache ;; *) echo /work/runs-lsearch ;; esac; }
for r in "$@"; do
  for f in summary.json screen.csv gp_sampling_log.csv; do [ -f "$(root "$r")/$r/$f" ] && cp "$(root "$r")/$r/$f" "$here/$r-$f"; done
done
# CPU and wall time of the runs started under /usr/bin/time -v (run_c.sh, run_scratch.sh): their logs' last lines
echo "run,user_s,system_s,elapsed" > "$here/times.csv"
for log in /work/runs-lcache/c-seed*.log /work/runs-lcache/scratch-seed*.log; do
  [ -f "$log" ] && grep -q "Elapsed (wall clock)" "$log" || continue
  awk -v run="$(basename "$log" .log)" -F': ' '/User time/{u=$2} /System time/{s=$2} /Elapsed \(wall/{e=$2}
    END{print run "," u "," s "," e}' "$log" >> "$here/times.csv"
done
PYTHONPATH=$PWD python benchmarks/universal_search.py \
  $(ls -d /work/runs-lsearch/[ab]-seed* /work/runs-lcache/c-seed* 2>/dev/null | while read d; do [ -f "$d/summary.json" ] && echo "$d"; done) \
  --ground-truth benchmarks/results/ground_truth/ground_truth.csv \
  --evaluation benchmarks/results/universal_ratio/workflows/workflows.csv --out "$here"
