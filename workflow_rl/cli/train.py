"""``workflow-rl train``: its flags, read into a ``TrainConfig`` and a :class:`~workflow_rl.runs.train.TrainRun`.

A recipe's and a starting checkpoint's settings fill the flags not typed (``runs.settings``); the job is
:func:`workflow_rl.runs.train.train`. Also the flag groups ``search`` and the commands that play CybORG share.
"""
from __future__ import annotations

from pathlib import Path

from workflow_rl.cli.flags import OVERWRITE_HELP, add_flags, settings
from workflow_rl.cli.numbers import episode_length, ranged
from workflow_rl.envs.names import ENGINES, VECTORIZATIONS
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
    t.add_argument("--seeds", type=ranged("seeds"), default=1, metavar="N",
                   help="train N independent seeds (--seed, --seed+1, ...) in one batch; runs go to RUN_DIR/seed_i "
                        "and summary.json reports the spread across seeds")
    t.add_argument("--out", default="runs/train", help="run directory (RUN_DIR)")
    t.add_argument("--checkpoint-dir", default=None, help="default: RUN_DIR/checkpoints")
    t.add_argument("--resume", action="store_true", help="continue from the checkpoint in --checkpoint-dir")
    t.add_argument("--overwrite", action="store_true",
                   help=OVERWRITE_HELP.format(out="RUN_DIR"))
    t.add_argument("--init-checkpoint", default=None, metavar="CKPT",
                   help="start from these weights (a checkpoint file or pretrained:NAME, e.g. to fine-tune a shipped "
                        "agent under a workflow) instead of a fresh initialisation; a fresh optimiser and schedule; "
                        "needs the same --hidden and memory flags")
    t.add_argument("--no-progress", action="store_true", help="print a line per update instead of a progress bar")
    t.add_argument("--eval-episodes", type=ranged("eval_episodes", "train"), default=1000,
                   help="held-out evaluation episodes (0: skip)")
    t.add_argument("--eval-length", type=episode_length, default=100)
    t.add_argument("--eval-engine", default="native", choices=ENGINES)
    t.add_argument("--eval-sampled", action="store_true", help="evaluate the sampled policy instead of greedy")
    t.set_defaults(func=cmd_train, config_names=names)


def cmd_train(args) -> int:
    """Train a workflow-conditioned PPO policy; write logs, checkpoints, summary.json."""
    return train(*train_job(args)).exit_code


def train_job(args) -> tuple[TrainConfig, TrainRun]:
    """The parsed flags as the validated ``(TrainConfig, TrainRun)`` that ``runs.train.train`` takes: a recipe's
    and a starting checkpoint's settings wherever a flag was not typed (``runs.settings``)."""
    flat, typed = with_recipe(args.recipe, settings(args, args.config_names), args.typed)
    cfg = train_config(inherit_settings(typed, args.init_checkpoint, flat))
    run = TrainRun(out=Path(args.out), checkpoint_dir=args.checkpoint_dir and Path(args.checkpoint_dir),
                   seeds=args.seeds, resume=args.resume, overwrite=args.overwrite,
                   init_checkpoint=args.init_checkpoint, progress=not args.no_progress,
                   eval_episodes=args.eval_episodes, eval_length=args.eval_length, eval_engine=args.eval_engine,
                   eval_sampled=args.eval_sampled, recipe=args.recipe, threads=args.threads)
    return cfg, run
