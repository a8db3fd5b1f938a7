#!/usr/bin/env bash
# Issue Y item 2: the held-out protocol's measurements (README.md beside this file), the CLI only.
# TRAIN=DIR holds the three training runs (robust, and the specialists hopper and delayed):
#   workflow-rl train --recipe robust --seed 1 --out $TRAIN/robust   (and --seed 2 --out $TRAIN/robust2: its second seed)
#   workflow-rl train --recipe robust --red-agent UserHopper --seed 1 --out $TRAIN/hopper
#   workflow-rl train --recipe robust --red-agent DelayedB_line --seed 1 --out $TRAIN/delayed
#   (and each specialist's second seed: --seed 2 --out $TRAIN/hopper2, $TRAIN/delayed2)
# then `TRAIN=DIR bash benchmarks/results/robust/run.sh` writes the slim agents and every evaluation here.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
TRAIN=${TRAIN:?set TRAIN to the folder of the three training runs}
NATIVE_EPISODES=${NATIVE_EPISODES:-500}
CYBORG_EPISODES=${CYBORG_EPISODES:-100}
WORKERS=${WORKERS:-2}
CLI=${CLI:-workflow-rl}
export OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1
mkdir -p "$HERE/agents"
RUNS=""
for run in robust robust2 hopper hopper2 delayed delayed2; do
  [ -f "$TRAIN/$run/summary.json" ] || { echo "skipping $run: not trained to its end (no summary.json)"; continue; }
  RUNS="$RUNS $run"
  python -c "from workflow_rl.rl.pretrained import save_slim; save_slim('$TRAIN/$run/checkpoints/latest.pt', '$HERE/agents/$run.pt')"
done
agent() { case $1 in universal) echo pretrained:universal;; *) echo "$HERE/agents/$1.pt";; esac; }
E="--workflow none --mode greedy --lengths 100 --episode-seed 777"
# native engine: every agent against every attacking agent (training and held-out)
for a in universal $RUNS; do
  $CLI evaluate "$(agent $a)" $E --red-agents bline meander DelayedB_line UserHopper random_red raider chaser rush \
    --episodes "$NATIVE_EPISODES" --out "$HERE/native/$a" --overwrite
done
# real CybORG: CAGE2's two and the held-out attackers (universal and robust), each specialist on its own
CYBORG_RED=${CYBORG_RED:-bline meander DelayedB_line UserHopper}
for a in universal robust robust2; do
  case " universal $RUNS " in *" $a "*) ;; *) continue;; esac
  $CLI evaluate "$(agent $a)" $E --engine cyborg --red-agents $CYBORG_RED \
    --episodes "$CYBORG_EPISODES" --cyborg-episodes "$CYBORG_EPISODES" --workers "$WORKERS" \
    --out "$HERE/cyborg/$a" --overwrite
done
for spec in hopper:UserHopper hopper2:UserHopper delayed:DelayedB_line delayed2:DelayedB_line; do
  a=${spec%%:*}; red=${spec#*:}
  case " $RUNS " in *" $a "*) ;; *) continue;; esac
  $CLI evaluate "$(agent $a)" $E --engine cyborg --red-agents "$red" --episodes "$CYBORG_EPISODES" \
    --cyborg-episodes "$CYBORG_EPISODES" --workers "$WORKERS" --out "$HERE/cyborg/$a" --overwrite
done
# where the points go (behaviour.json): every agent on the native engine, the evaluations' episodes; run from the
# repository's root so that the command the file records names the agents by their paths in it
cd "$HERE/../../.."
A=benchmarks/results/robust/agents
AGENTS="universal=pretrained:universal"
for run in $RUNS; do AGENTS="$AGENTS $run=$A/$run.pt"; done
python benchmarks/studies/behaviour.py $AGENTS --red-agents UserHopper DelayedB_line B_line Meander \
  --episodes "$NATIVE_EPISODES" --seed 777 --out benchmarks/results/robust/behaviour.json
