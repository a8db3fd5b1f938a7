#!/bin/bash
# The first universal agent continued 60,000 episodes with the violations form (universal_reward/train), at the
# issue's protocol: measured, shipped in no landed commit (benchmarks/results/universal_v10/ ships a one-run agent of the
# same recipe instead; its card text was this folder's ship.sh, now that folder's). How every file here was made. The agent shipped before it (ratio form) and its files: benchmarks/results/universal_ratio/.
# The box: the 2-vCPU development box of BENCHMARKS.md, shared with other jobs; every command niced, one thread;
# 2026-11-27, commit dc453e6 plus the files of this folder (the evaluations ran on the training checkpoint
# (the folder RUN_DIR/checkpoints/latest.pt of that training); the shipped slim file replays them bit for bit: the native cells were
# re-run from pretrained:universal and matched exactly, so the folders name pretrained:universal).
set -e
ENV="nice -n 5 env OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1"

# training: two runs of 60,000 episodes from pretrained:cage2, the first (ratio form) is
# benchmarks/results/universal_ratio/train, the second (violations form, 991 s) benchmarks/results/universal_reward/train;
# both commands are the card's `reproduce` (ship.sh) and benchmarks/results/universal_reward/COMMANDS.md

# workflows/: all 120 workflows x both red agents, 500 episodes of 100 steps each, greedy (235 s wall, 159 s CPU)
$ENV workflow-rl evaluate pretrained:universal --workflow all --red-agents B_lineAgent RedMeanderAgent --lengths 100 \
  --mode greedy --episodes 500 --ground-truth benchmarks/results/ground_truth/ground_truth.csv \
  benchmarks/results/ground_truth_meander/ground_truth.csv --out benchmarks/results/universal_v10/workflows

# native-critical_first/: the CAGE2 six cells under D,OS,E,OH,U (critical_first), 1000 episodes, both modes (10 s)
$ENV workflow-rl evaluate pretrained:universal --workflow critical_first --red-agents bline meander --episodes 1000 \
  --mode both --out benchmarks/results/universal_v10/native-critical_first

# cyborg-*/: real CybORG, 200 episodes per red agent (cells 30/50/100 of the same episodes), greedy, 2 workers
# (86-97 s each)
for red in B_lineAgent RedMeanderAgent; do
  for wf in D,E,OH,U,OS critical_first U,E,D,OS,OH; do
    $ENV workflow-rl evaluate pretrained:universal --workflow $wf --engine cyborg --red-agents $red --episodes 200 \
      --workers 2 --mode greedy --out benchmarks/results/universal_v10/cyborg-${wf//,/}-$red
  done
done

# engine_check.csv/.md: each CybORG 100-step cell beside the native row of its workflow (workflows/workflows.csv)
$ENV python benchmarks/studies/engine_check.py --native benchmarks/results/universal_v10/workflows/workflows.csv \
  --cyborg benchmarks/results/universal_v10/cyborg-* --out benchmarks/results/universal_v10

# ship: its slim file is deterministic (shipping twice gave the same sha256)

# (shipped at commit 1fd88c2 only: git show 1fd88c2:benchmarks/results/universal/ship.sh)
