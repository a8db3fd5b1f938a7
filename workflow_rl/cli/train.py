"""``workflow-rl train``: its flags, read into a ``TrainConfig`` and a :class:`~workflow_rl.runs.train.TrainRun`.

A recipe's and a starting checkpoint's settings fill the flags not typed (``runs.settings``); the job is
:func:`workflow_rl.runs.train.train`. Also the flag groups ``search`` and the commands that play CybORG share.
"""
from __future__ import annotations

import dataclasses

from workflow_rl.cli.flags import OVERWRITE_HELP, add_flags, config_from, settings
from workflow_rl.envs.names import VECTORIZATIONS
from workflow_rl.rl.config import TrainConfig
from workflow_rl.rl.ppo import PPOConfig
from workflow_rl.rl.recipes import RECIPES
from workflow_rl.runs.settings import inherit_settings, train_config, with_recipe
from workflow_rl.runs.train import TrainRun, train


def add_training_flags(p, defaults: dict, skip=()) -> list[str]:
    """Every TrainConfig and PPOConfig setting as a flag (shared by `train` and `search`); returns their names."""
    names = add_flags(p.add_argument_group("training"), TrainConfig, defaults, skip)
    return names + add_flags(p.add_argument_group("PPO"), PPOConfig, defaults)


def add_cyborg_flags(p, vectorization: str) -> None:
    """How the real CybORG engine runs an evaluation (`evaluate`, `parity`); training has its own settings."""
    p.add_argument("--vectorization", default=vectorization, choices=VECTORIZATIONS,
                   help="cyborg engine: in-process, one process per env over pipes, or shared memory (default "
                        f"{vectorization or 'shared_memory'})")
    p.add_argument("--parallel-start-method", default=None, choices=["spawn", "fork", "forkserver"],
                   help="cyborg engine worker start method")
    p.add_argument("--scenario", default=None, help="cyborg engine: folder with Scenario2.yaml and images/")


def add_train(sub) -> None:
    t = sub.add_parser("train", help="train a workflow-conditioned PPO policy")
    names = add_training_flags(t, TrainConfig().flat())
    t.add_argument("--recipe", default=None, choices=list(RECIPES), metavar="NAME",
                   help="train with a named recipe's settings (flags you type win): " + "; ".join(
                       f"{r.name}: {r.about}" for r in RECIPES.values()).replace("%", "%%") + " (docs/training.md)")
    run = add_flags(t, TrainRun, dataclasses.asdict(TrainRun()), skip=("progress", "recipe", "threads"), check=True,
                    command="train", notes={"overwrite": OVERWRITE_HELP.format(out="RUN_DIR")})
    t.add_argument("--no-progress", action="store_true", help="print a line per update instead of a progress bar")
    t.set_defaults(func=cmd_train, config_names=names, run_names=run)


def cmd_train(args) -> int:
    """Train a workflow-conditioned PPO policy; write logs, checkpoints, summary.json."""
    return train(*train_job(args)).exit_code


def train_job(args) -> tuple[TrainConfig, TrainRun]:
    """The parsed flags as the validated ``(TrainConfig, TrainRun)`` that ``runs.train.train`` takes: a recipe's
    and a starting checkpoint's settings wherever a flag was not typed (``runs.settings``)."""
    flat, typed = with_recipe(args.recipe, settings(args, args.config_names), args.typed)
    cfg = train_config(inherit_settings(typed, args.init_checkpoint, flat))
    run = config_from(TrainRun, args, args.run_names, progress=not args.no_progress, recipe=args.recipe,
                      threads=args.threads)
    return cfg, run
