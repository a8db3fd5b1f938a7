"""``workflow-rl train`` and ``workflow-rl evaluate``: one policy, trained and evaluated."""
from __future__ import annotations

import json
from pathlib import Path

from workflow_rl import threads
from workflow_rl.checks import check_seed, flag
from workflow_rl.files import check_out_dir, check_out_files
from workflow_rl.cli.flags import add_flags, inherit_settings, settings
from workflow_rl.cli.numbers import episode_length, non_negative_int, positive_int
from workflow_rl.envs.names import ENGINES, VECTORIZATIONS
from workflow_rl.rl.checkpoint import load_checkpoint
from workflow_rl.rl.config import EPISODE_WORKERS, TrainConfig
from workflow_rl.rl.ppo import PPOConfig
from workflow_rl.rl.pretrained import starting_weights
from workflow_rl.rl.recipes import RECIPES, as_flags, recipe
from workflow_rl.rl.resumable import check_resumable
from workflow_rl.rl.schedule import check_first_update
from workflow_rl.runs.rundir import check_run_folder, remove_run, run_config, RunDirLock


def add_training_flags(p, defaults: dict, skip=()) -> list[str]:
    """Every TrainConfig and PPOConfig setting as a flag (shared by `train` and `search`); returns their names."""
    names = add_flags(p.add_argument_group("training"), TrainConfig, defaults, skip)
    return names + add_flags(p.add_argument_group("PPO"), PPOConfig, defaults)


def add_cyborg_flags(p, vectorization: str) -> None:
    """How the real CybORG engine runs an evaluation (`evaluate`, `parity`); training has its own settings."""
    p.add_argument("--vectorization", default=vectorization, choices=VECTORIZATIONS,
                   help="cyborg engine: in-process, one process per env over pipes, or shared memory")
    p.add_argument("--parallel-start-method", default=None, choices=["spawn", "fork", "forkserver"],
                   help="cyborg engine worker start method")
    p.add_argument("--scenario", default=None, help="cyborg engine: folder with Scenario2.yaml and images/")


def add_train(sub) -> None:
    t = sub.add_parser("train", help="train a workflow-conditioned PPO policy")
    names = add_training_flags(t, TrainConfig().flat())
    t.add_argument("--recipe", default=None, choices=list(RECIPES), metavar="NAME",
                   help="train with a named recipe's settings (flags you type win): " + "; ".join(
                       f"{r.name}: {r.about}" for r in RECIPES.values()).replace("%", "%%") + " (docs/training.md)")
    t.add_argument("--seeds", type=positive_int, default=1, metavar="N",
                   help="train N independent seeds (--seed, --seed+1, ...) in one batch; runs go to RUN_DIR/seed_i "
                        "and summary.json reports the spread across seeds")
    t.add_argument("--out", default="runs/train", help="run directory (RUN_DIR)")
    t.add_argument("--checkpoint-dir", default=None, help="default: RUN_DIR/checkpoints")
    t.add_argument("--resume", action="store_true", help="continue from the checkpoint in --checkpoint-dir")
    t.add_argument("--overwrite", action="store_true",
                   help="replace what RUN_DIR holds (default: refuse a folder that is not empty): the files a train "
                        "or search run wrote there are deleted first, other files are left alone")
    t.add_argument("--init-checkpoint", default=None, metavar="CKPT",
                   help="start from these weights (a checkpoint file or pretrained:NAME, e.g. to fine-tune a shipped "
                        "agent under a workflow) instead of a fresh initialisation; a fresh optimiser and schedule; "
                        "needs the same --hidden and memory flags")
    t.add_argument("--no-progress", action="store_true", help="print a line per update instead of a progress bar")
    t.add_argument("--eval-episodes", type=non_negative_int, default=1000, help="held-out evaluation episodes (0: skip)")
    t.add_argument("--eval-length", type=episode_length, default=100)
    t.add_argument("--eval-engine", default="native", choices=ENGINES)
    t.add_argument("--eval-sampled", action="store_true", help="evaluate the sampled policy instead of greedy")
    t.set_defaults(func=cmd_train, config_names=names)


def _eval_block(agent, workflow, cfg: TrainConfig, args) -> dict:
    """The held-out evaluation of a trained agent, where it is (the run's device), on the engine's device
    (:func:`engine_device`: a CUDA run evaluated on real CybORG is not refused after it has trained)."""
    from workflow_rl.rl.evaluate import agent_act, evaluate_policy

    r = evaluate_policy(agent_act(agent, workflow, greedy=not args.eval_sampled), cfg.red_agent, args.eval_length,
                        args.eval_episodes, engine=args.eval_engine, workflow=workflow,
                        device=engine_device(args.eval_engine, cfg.device),
                        **engine_opts(cfg.vectorization, cfg.parallel_start_method, cfg.scenario, args.eval_engine))
    return {"length": r.length, "episodes": r.episodes, "mean": r.mean, "ci95": r.ci95, "std": r.std,
            "compliance": r.compliance, "engine": args.eval_engine,
            "mode": "sampled" if args.eval_sampled else "greedy"}


def engine_device(engine: str, device: str) -> str:
    """Where an evaluation's engine runs: the native engine on the run's ``device`` (its CPU or CUDA build), real
    CybORG on the CPU whatever the device. The agent stays on the run's device either way: its acting function
    moves the observations to it and the actions back (``rl.evaluate.agent_act``)."""
    return device if engine == "native" else "cpu"


def engine_opts(vectorization: str, start_method: str | None, scenario: str | None, engine: str) -> dict:
    """Options of an evaluation env. It steps per step: episode workers fall back to shared memory there; the
    native engine picks its CPU or CUDA build from the device."""
    if engine == "cyborg":
        vec = "shared_memory" if vectorization == EPISODE_WORKERS else vectorization
        return {"vectorization": vec, "start_method": start_method, "scenario": scenario}
    return {}


def cmd_train(args) -> int:
    """Train a workflow-conditioned PPO policy; write logs, checkpoints, summary.json."""
    from workflow_rl import parse_red_agent
    from workflow_rl.workflow import WorkflowMix, is_workflow_list, parse_workflow_arg

    given = inherit_settings(args, "train", args.init_checkpoint, with_recipe(args, settings(args, args.config_names)))
    if is_workflow_list(given["workflow"]):   # across workflows: config.json names them and the held-out ones
        workflow = None
        mix = WorkflowMix.parse(given["workflow"], given["hold_out"])
        named = {"workflow": WorkflowMix.list_text(given["workflow"]), "hold_out": mix.hold_out_text()}
    else:
        workflow = parse_workflow_arg(given["workflow"])
        named = {"workflow": workflow.codes if workflow else None}
    cfg = TrainConfig.from_flat({**given, **named, "red_agent": parse_red_agent(given["red_agent"])})
    cfg.validate()
    check_first_update(cfg)
    init = None if args.init_checkpoint is None else starting_weights(args.init_checkpoint, cfg.ppo, cfg.device)
    out = check_out_dir("--out", args.out)
    ckpt_dir = check_out_dir("--checkpoint-dir", args.checkpoint_dir or out / "checkpoints")
    check_seed("--seed + --seeds - 1", cfg.seed + args.seeds - 1)
    cfg.check_memory(args.seeds)
    threads.configure(cfg.thread_work(args.seeds), args.threads)
    _check_existing_run(out, ckpt_dir, args, _inputs(args, cfg))
    if args.resume:   # every checkpoint usable and of this run before anything is written
        _check_resume(cfg, out, ckpt_dir, args.seeds)
    with RunDirLock(out):
        if args.overwrite:
            _remove_previous_run(out, ckpt_dir)
        if args.seeds > 1:
            return _train_seeds(cfg, workflow, out, args, init)
        return _train_one(cfg, workflow, out, ckpt_dir, args, init)


def with_recipe(args, flat: dict) -> dict:
    """``flat`` (the run's settings) with ``--recipe``'s settings for the run's device in place of every setting not
    typed, said in one line as the flags they stand for. The recipe's choices then count as typed: a starting
    checkpoint's opening or reward form (``inherit_settings``) does not replace them."""
    if args.recipe is None:
        return flat
    r = recipe(args.recipe)
    wanted = r.for_device(flat["device"])
    typed = [k for k in args.given("train", list(flat)) if k in wanted]
    chosen = {k: v for k, v in wanted.items() if k not in typed}
    run = {k: flat[k] if k in typed else v for k, v in wanted.items()}
    print(f"recipe {r.name} on {flat['device']}: {as_flags(run)}"
          + (f" (typed over the recipe: {', '.join(flag(k) for k in typed)})" if typed else ""))
    typed_only = args.given
    args.given = lambda command, dests: [d for d in dests if d in chosen] + typed_only(
        command, [d for d in dests if d not in chosen])
    return {**flat, **chosen}


def _check_existing_run(out: Path, ckpt_dir: Path, args, inputs) -> None:
    """``--out`` onto a finished or running run is refused unless ``--resume`` continues it or ``--overwrite``
    replaces it; so is one that holds another command's run or files that are no run's (``check_run_folder``).
    The checkpoint the run writes replaces only a plain file, never one of the ``inputs`` it reads, and with
    ``--overwrite`` only this run's own (:func:`_checkpoint_of_run`): another run's ``latest.pt`` is not replaced."""
    if args.resume and args.overwrite:
        raise ValueError("--resume continues the run in --out, --overwrite replaces it: use one")
    check_run_folder(out, "train", args.resume, args.overwrite, inputs)
    latest = ckpt_dir / "latest.pt"
    check_out_files("--checkpoint-dir", ckpt_dir, [latest.name], inputs)
    if not latest.exists() or args.resume:
        return
    if not args.overwrite:
        raise ValueError(f"{ckpt_dir} already holds a training run's checkpoint: continue it with --resume, replace "
                         "it with --overwrite, or choose another --checkpoint-dir")
    if not _checkpoint_of_run(latest, out):
        raise ValueError(f"--checkpoint-dir {ckpt_dir} holds a checkpoint that is not of the run in {out} (another "
                         "run's, or no run's): --overwrite replaces only this run's; choose another --checkpoint-dir, "
                         f"or delete {latest} yourself if it may go")


def _checkpoint_of_run(latest: Path, out: Path) -> bool:
    """Whether the checkpoint ``latest`` is the run's in ``out``, which ``--overwrite`` may replace: the run's own
    ``checkpoints/`` (removed with it: ``check_run_folder`` told it is the run's), or a checkpoint whose settings
    are the run's ``config.json`` (a run saves the same settings in both; another run's differ)."""
    if latest.parent.resolve() == (out / "checkpoints").resolve():
        return True
    config = run_config(out)
    if config is None:
        return False
    try:
        saved = load_checkpoint(latest, "cpu")["config"]
    except (ValueError, OSError, KeyError):   # CheckpointError is a ValueError: no run's checkpoint
        return False
    return json.loads(json.dumps(saved, default=str)) == config


def _inputs(args, cfg: TrainConfig) -> list[Path | None]:
    """The files a ``train`` run reads, which nothing it writes or removes may be: its starting checkpoint and the
    CybORG scenario folder."""
    from workflow_rl.rl.pretrained import spec_file

    init = spec_file(args.init_checkpoint) if args.init_checkpoint else None
    return [init, Path(cfg.scenario) if cfg.scenario else None]


def _check_resume(cfg: TrainConfig, out: Path, ckpt_dir: Path, seeds: int) -> None:
    """Everything ``--resume`` will read, checked before the run's config and log are rewritten: each run's
    checkpoint (of this run, every counter and snapshot field sound) and, with ``--seeds``, the batch's state."""
    if seeds == 1:
        check_resumable(load_checkpoint(ckpt_dir / "latest.pt", cfg.device), cfg, ckpt_dir / "latest.pt", cfg.n_envs)
        return
    from workflow_rl.rl.seeds import check_batch_file

    updates = []
    for i in range(seeds):
        path = out / f"seed_{i}" / "checkpoints" / "latest.pt"
        ck = load_checkpoint(path, cfg.device)
        check_resumable(ck, cfg, path)
        updates.append(ck["counters"]["update"])
    check_batch_file(out, cfg, updates)


def _remove_previous_run(out: Path, ckpt_dir: Path) -> None:
    """``--overwrite`` (under the run folder's lock): the old run's files go first (``remove_run``; its checkpoint
    in ``--checkpoint-dir`` too), so nothing stale survives the new run."""
    remove_run(out)
    (ckpt_dir / "latest.pt").unlink(missing_ok=True)


def _train_one(cfg: TrainConfig, workflow, out: Path, ckpt_dir: Path, args, init: dict | None) -> int:
    """One run (``--seeds 1``): trained, evaluated, summarised."""
    from workflow_rl.rl.trainer import Trainer

    trainer = Trainer(cfg, out, ckpt_dir, init_agent_state=init, progress=not args.no_progress)
    if args.resume:
        trainer.restore(load_checkpoint(ckpt_dir / "latest.pt", cfg.device))
        print(f"resumed from {ckpt_dir / 'latest.pt'} at update {trainer.update} "
              f"({trainer.total_episodes} episodes)")
    print(f"training {_what(cfg, workflow)} vs {cfg.red_agent} on {cfg.engine} with {cfg.n_envs} envs (budget "
          f"{cfg.budget} episodes) -> {out}")
    summary = trainer.run()
    if summary["stop_reason"] == "interrupted":
        print(f"interrupted: saved {ckpt_dir / 'latest.pt'}; continue with the same command plus --resume")
        return 130
    summary["eval"] = _eval_block(trainer.agent, workflow, cfg, args) if _evaluates(cfg, args) else None
    summary["checkpoint"] = str(ckpt_dir / "latest.pt")
    summary["init_checkpoint"] = args.init_checkpoint
    summary["recipe"] = args.recipe
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    ev = summary["eval"]
    print(f"done: {summary['stop_reason']} after {summary['episodes']} episodes, compliance "
          f"{_compliance(summary)}")
    if ev:
        print(f"held-out evaluation ({ev['episodes']} x {ev['length']} steps, {ev['mode']}, {ev['engine']}): "
              f"{ev['mean']:.2f} ± {ev['ci95']:.2f}")
    print(f"wrote {out / 'summary.json'}")
    return 0


def _compliance(summary: dict) -> str:
    text = "n/a" if summary["compliance"] is None else f"{summary['compliance']:.3f}"
    if "workflows" in summary:   # across workflows: pooled, and the worst workflow's over its last episodes
        worst = summary["compliance_worst"]
        text += (f" pooled, worst workflow {summary['worst_workflow']} "
                 f"{'n/a' if worst is None else f'{worst:.3f}'} (its last 20 episodes)")
    return text


def _what(cfg: TrainConfig, workflow) -> str:
    """What a run trains, for its first line."""
    mix = cfg.mixture()
    if mix is not None:
        return (f"across {len(mix.train)} workflows"
                + (f" ({len(mix.held_out)} held out: {cfg.hold_out})" if mix.held_out else "")
                + (f" and none ({mix.none_share:.0%} of episodes)" if mix.none_share else ""))
    return "workflow " + workflow.codes if workflow else "unconditioned PPO"


def _evaluates(cfg: TrainConfig, args) -> bool:
    """Whether training ends with the held-out evaluation: a run across workflows is evaluated per workflow by
    ``evaluate CKPT --workflow all`` instead (one workflow's evaluation would not describe it)."""
    if args.eval_episodes > 0 and cfg.mixture() is not None:
        print("a run across workflows is not evaluated here: run `workflow-rl evaluate CHECKPOINT --workflow all "
              "--out DIR` (per workflow)")
        return False
    return args.eval_episodes > 0


def _train_seeds(cfg: TrainConfig, workflow, out: Path, args, init: dict | None) -> int:
    """`train --seeds N`: N independent runs in one batch, each evaluated, and the spread across them."""
    from workflow_rl.rl.evaluate import across_seeds
    from workflow_rl.rl.seeds import train_seeds
    from workflow_rl.rl.trainer import check_batchable

    for name, bad in (("--checkpoint-dir", args.checkpoint_dir), ("--tensorboard", cfg.tensorboard)):
        if bad:
            raise ValueError(f"{name} applies to a single run: drop it, or drop --seeds (runs go to RUN_DIR/seed_i)")
    check_batchable(cfg)
    print(f"training {args.seeds} seeds of {_what(cfg, workflow)} vs {cfg.red_agent} in one batch ({cfg.n_envs} envs each, budget {cfg.budget} episodes each) -> {out}/seed_*")
    summaries, agents, interrupted = train_seeds(cfg, args.seeds, out, resume=args.resume,
                                                 progress=not args.no_progress, init_agent_state=init)
    if interrupted:
        print(f"interrupted: every run saved under {out}/seed_*; continue with the same command plus --resume")
        return 130
    evaluates = _evaluates(cfg, args)
    for i, (summary, agent) in enumerate(zip(summaries, agents)):
        summary["seed"] = cfg.seed + i
        summary["eval"] = _eval_block(agent, workflow, cfg, args) if evaluates else None
        summary["checkpoint"] = str(out / f"seed_{i}" / "checkpoints" / "latest.pt")
        summary["init_checkpoint"] = args.init_checkpoint
        (out / f"seed_{i}" / "summary.json").write_text(json.dumps(summary, indent=2))
        ev = summary["eval"]
        print(f"seed {summary['seed']}: {summary['stop_reason']} after {summary['episodes']} episodes, compliance "
              f"{_compliance(summary)}" + (f", held-out {ev['mean']:.2f} ± {ev['ci95']:.2f}" if ev else ""))
    result = {"seeds": summaries, "across_seeds": None}
    if evaluates:
        result["across_seeds"] = across_seeds([s["eval"]["mean"] for s in summaries])
        a = result["across_seeds"]
        print(f"across {a['n']} seeds: held-out return {a['mean']:.2f} ± {a['ci95']:.2f} (95% t interval over "
              f"seeds; std {a['std']:.2f})")
    (out / "summary.json").write_text(json.dumps(result, indent=2))
    print(f"wrote {out / 'summary.json'}")
    return 0
