#!/usr/bin/env bash
# Issue Y item 4: the workflow search per attacker (README.md beside this file), the CLI only.
# One search per attacker and seed, each `make run`'s search at three times its budget: from a universal agent
# (AGENT, default the shipped one; NAME=robust AGENT=benchmarks/results/robust/agents/robust.pt for the robust one), its screen of all 120 workflows against that attacker (500 greedy episodes each, computed once per attacker
# and cached), then the GP fine-tunes its picks. Two at a time (JOBS); RUNS holds the searches; then
#   python benchmarks/studies/per_attacker.py $RUNS/* --out benchmarks/results/per_attacker
# writes the tables here (collect: summary.json and screen.csv of each search are copied beside them).
set -eu
RUNS=${RUNS:?set RUNS to a folder for the searches}
BUDGET=${BUDGET:-9000}
SEEDS=${SEEDS:-0 1}
JOBS=${JOBS:-2}
CLI=${CLI:-workflow-rl}
AGENT=${AGENT:-pretrained:universal}
NAME=${NAME:-universal}
# ImpactRush is left out: against the shipped agent it plays RestoreChaser's episodes (sim.attackers.HELD_OUT says why)
REDS=${REDS:-B_lineAgent RedMeanderAgent DelayedB_line UserHopper RandomRed EnterpriseRaider RestoreChaser family}
export OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 WORKFLOW_RL_CACHE=${WORKFLOW_RL_CACHE:-$RUNS/cache}
mkdir -p "$RUNS"
for seed in $SEEDS; do for red in $REDS; do echo "$red $seed"; done; done |
  xargs -P "$JOBS" -L 1 sh -c '
    runs=$0 budget=$1 cli=$2 agent=$3 red=$5 seed=$6 out="$0/$4-$5-s$6"
    [ -f "$out/summary.json" ] && exit 0
    /usr/bin/time -f "$4-$red-s$seed,%U,%S,%E" -a -o "$runs/times.csv" nice $cli search --red-agent "$red" \
      --seed "$seed" --init-checkpoint "$agent" --post-gate-episodes 10 --total-episodes "$budget" \
      --no-progress --out "$out" > "$out.log" 2>&1 || echo "$4-$red-s$seed failed: $out.log"' "$RUNS" "$BUDGET" "$CLI" "$AGENT" "$NAME"
