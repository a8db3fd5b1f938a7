#!/bin/bash
# pretrained:universal (issue L item 3): how every file in this folder was made. The box: the 2-vCPU development box
# of BENCHMARKS.md, shared with other jobs; every command niced, one thread.
set -e
ENV="nice -n 5 env OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1"

# train/ (config.json, summary.json, training_log.csv): 60,000 episodes fine-tuned from cage2, 1,576 s wall on
# 2026-11-27 at commit a43e350 (the run wrote to its own folder, here runs/universal; its checkpoints/latest.pt is what ships)
$ENV workflow-rl train --workflow all --hold-out 24 --init-checkpoint pretrained:cage2 --red-agent mix --n-envs 200 \
  --update-every-steps 100 --hidden 256 256 --anneal-lr --learning-rate 1e-4 --alignment-lambda 10 \
  --decoy-memory --mask-decoys --num-episodes 60000 --max-episodes 1000 --post-gate-episodes 1000 \
  --eval-episodes 0 --seed 90 --no-progress --out runs/universal

# the shipped files (slim checkpoint and card) from that checkpoint and the folders below: see ship below

# workflows/: all 120 workflows x both red agents, 500 episodes of 100 steps each, greedy (1,166 s under load)
$ENV workflow-rl evaluate pretrained:universal --workflow all --red-agents B_lineAgent RedMeanderAgent --lengths 100 \
  --mode greedy --episodes 500 --ground-truth benchmarks/results/ground_truth/ground_truth.csv \
  benchmarks/results/ground_truth_meander/ground_truth.csv --out benchmarks/results/universal_ratio/workflows

# cage2-compliant-workflows/: the same protocol for pretrained:cage2-compliant (trained under D,OS,E,OH,U only), the
# issue's yardstick for how many ground-truth-ineligible workflows one network follows (299 s)
$ENV workflow-rl evaluate pretrained:cage2-compliant --workflow all --red-agents B_lineAgent RedMeanderAgent \
  --lengths 100 --mode greedy --episodes 500 --ground-truth benchmarks/results/ground_truth/ground_truth.csv \
  benchmarks/results/ground_truth_meander/ground_truth.csv --out benchmarks/results/universal_ratio/cage2-compliant-workflows

# native-critical_first/: the CAGE2 six cells under D,OS,E,OH,U (critical_first), 1000 episodes, both modes
$ENV workflow-rl evaluate pretrained:universal --workflow critical_first --red-agents bline meander --episodes 1000 \
  --mode both --out benchmarks/results/universal_ratio/native-critical_first

# cyborg-*/: real CybORG, 200 episodes per red agent (cells 30/50/100 of the same episodes), greedy, 2 workers
for red in B_lineAgent RedMeanderAgent; do
  for wf in D,E,OH,U,OS critical_first U,E,D,OS,OH; do
    $ENV workflow-rl evaluate pretrained:universal --workflow $wf --engine cyborg --red-agents $red --episodes 200 \
      --workers 2 --mode greedy --out benchmarks/results/universal_ratio/cyborg-${wf//,/}-$red
  done
done

# cyborg-UEDOSOH-RedMeanderAgent-seed1/: the one cell whose compliance missed native by more than 0.02, again with
# 200 other episodes
$ENV workflow-rl evaluate pretrained:universal --workflow U,E,D,OS,OH --engine cyborg --red-agents RedMeanderAgent \
  --episodes 200 --workers 2 --mode greedy --episode-seed 1 \
  --out benchmarks/results/universal_ratio/cyborg-UEDOSOH-RedMeanderAgent-seed1

# engine_check.csv/.md: each CybORG 100-step cell beside the native row of its workflow (workflows/workflows.csv)
$ENV python benchmarks/studies/engine_check.py --native benchmarks/results/universal_ratio/workflows/workflows.csv \
  --cyborg benchmarks/results/universal_ratio/cyborg-* --out benchmarks/results/universal

# ship
bash benchmarks/results/universal_ratio/ship.sh runs/universal/checkpoints/latest.pt   # the card's texts are in ship.sh
