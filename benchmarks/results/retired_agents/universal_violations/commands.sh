#!/bin/bash
# pretrained:universal as shipped (issue L item 3): cage2 fine-tuned 60,000 episodes across workflows with the
# violations-form alignment reward, in one run. How every file in this folder was made. The agents measured before
# it: benchmarks/results/universal_ratio/ (shipped before, ratio form) and benchmarks/results/universal_v10/ (that
# agent continued 60,000 episodes with the violations form; not shipped: this one costs half the episodes and
# scores as well). The box: the 2-vCPU development box of BENCHMARKS.md, shared with other jobs; every command
# niced, one thread; 2026-11-28, code of commit 944d50b (run from a snapshot); the evaluations ran on the training
# checkpoint (the train command's runs/universal/checkpoints/latest.pt), and the shipped slim file replays them bit for bit (the native
# cells were re-run from pretrained:universal and matched exactly), so the folders name pretrained:universal.
set -e
ENV="nice -n 5 env OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1"

# train/ (config.json, summary.json, training_log.csv): 754 s wall, 744 s CPU, beside two other jobs
$ENV workflow-rl train --workflow all --hold-out 24 --init-checkpoint pretrained:cage2 --red-agent mix --n-envs 200 \
  --update-every-steps 100 --hidden 256 256 --anneal-lr --learning-rate 1e-4 --alignment-lambda 10 \
  --alignment-reward violations --decoy-memory --mask-decoys --num-episodes 60000 --max-episodes 1000 \
  --post-gate-episodes 1000 --eval-episodes 0 --seed 90 --no-progress --out runs/universal

# workflows/: all 120 workflows x both red agents, 500 episodes of 100 steps each, greedy (210 s wall, 178 s CPU)
$ENV workflow-rl evaluate pretrained:universal --workflow all --red-agents B_lineAgent RedMeanderAgent --lengths 100 \
  --mode greedy --episodes 500 --ground-truth benchmarks/results/ground_truth/ground_truth.csv \
  benchmarks/results/ground_truth_meander/ground_truth.csv --out benchmarks/results/universal/workflows

# native-critical_first/: the CAGE2 six cells under D,OS,E,OH,U (critical_first), 1000 episodes, both modes
$ENV workflow-rl evaluate pretrained:universal --workflow critical_first --red-agents bline meander --episodes 1000 \
  --mode both --out benchmarks/results/universal/native-critical_first

# cyborg-*/: real CybORG, 200 episodes per red agent (cells 30/50/100 of the same episodes), greedy, 2 workers
for red in B_lineAgent RedMeanderAgent; do
  for wf in D,E,OH,U,OS critical_first U,E,D,OS,OH; do
    $ENV workflow-rl evaluate pretrained:universal --workflow $wf --engine cyborg --red-agents $red --episodes 200 \
      --workers 2 --mode greedy --out benchmarks/results/universal/cyborg-${wf//,/}-$red
  done
done

# cyborg-UEDOSOH-RedMeanderAgent-seed1/: the cell whose compliance missed native by more than 0.02, again with 200
# other episodes
$ENV workflow-rl evaluate pretrained:universal --workflow U,E,D,OS,OH --engine cyborg --red-agents RedMeanderAgent \
  --episodes 200 --workers 2 --mode greedy --episode-seed 1 \
  --out benchmarks/results/universal/cyborg-UEDOSOH-RedMeanderAgent-seed1

# engine_check.csv/.md (the six first runs): each CybORG 100-step cell beside the native row of its workflow (workflows/workflows.csv)
$ENV python benchmarks/studies/engine_check.py --native benchmarks/results/universal/workflows/workflows.csv \
  --cyborg benchmarks/results/universal/cyborg-{DEOHUOS,UEDOSOH,critical_first}-{B_lineAgent,RedMeanderAgent} \
  --out benchmarks/results/universal

# ship (the slim file is deterministic), then the screen shipped beside it (universal.screen.json; 96 s)
bash benchmarks/results/universal/ship.sh runs/universal/checkpoints/latest.pt
$ENV python -m workflow_rl.search.ship_screen universal
