"""Every command from Python: train, evaluate and replay through ``workflow_rl.runs`` (what ``workflow-rl train``,
``evaluate`` and ``replay`` call), with typed configs instead of flags; a notebook does the same.

    python examples/python_api.py --out runs/python-api

``workflow_rl.cli.job(argv)`` gives the configs any command line stands for, to start from flags you know.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from workflow_rl.rl.config import TrainConfig
from workflow_rl.rl.planning.planner import PlanConfig
from workflow_rl.runs.evaluate import EvaluateConfig, evaluate
from workflow_rl.runs.replay import ReplayConfig, replay
from workflow_rl.runs.train import TrainRun, train


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", type=Path, default=Path("runs/python-api"))
    p.add_argument("--episodes", type=int, default=200, help="training episodes per env (tiny by default)")
    p.add_argument("--eval-episodes", type=int, default=100)
    a = p.parse_args(argv)

    # train a policy under one workflow: TrainConfig's fields are train's flags, TrainRun where the run goes
    cfg = TrainConfig(workflow="D,OS,E,OH,U", n_envs=8, max_episodes=a.episodes, min_episodes=1)
    cfg.validate()
    trained = train(cfg, TrainRun(out=a.out / "train", progress=False, eval_episodes=a.eval_episodes))
    print("trained:", trained.summary["eval"])

    # evaluate it, greedy and planned (the planner not told the episode's length, as CAGE2's loop tells nothing)
    checkpoint = str(a.out / "train" / "checkpoints" / "latest.pt")
    ev = evaluate(EvaluateConfig(checkpoint, red_agents=("B_lineAgent",), lengths=(30, 100),
                                 episodes=a.eval_episodes, mode="greedy", plan=PlanConfig(particles=32),
                                 out=a.out / "evaluation", overwrite=True))
    print(ev.text)

    # watch two of its episodes
    page = replay(ReplayConfig(checkpoint, episodes=2, length=30, out=a.out / "replay.html"))
    print("replay page:", page.out)
    return {"train": trained, "evaluate": ev, "replay": page}


if __name__ == "__main__":
    main()
