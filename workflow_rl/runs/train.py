"""``runs.train``: one training job (``workflow-rl train``), callable from Python.

A validated :class:`~workflow_rl.rl.config.TrainConfig` and a :class:`TrainRun` (where the run goes and how it ends) in,
the run folder written and a :class:`TrainResult` out.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from workflow_rl import threads
from workflow_rl.checks import check_config, check_play_steps, check_seed
from workflow_rl.files import check_out_dir, check_out_files
from workflow_rl.rl.checkpoint import load_checkpoint
from workflow_rl.ranges import check_fields
from workflow_rl.rl.config import TrainConfig
from workflow_rl.devices import engine_device
from workflow_rl.envs.names import ENGINES
from workflow_rl.runs.engines import engine_opts
from workflow_rl.runs.rundir import RunDirLock, check_run_folder, remove_run, run_config


@dataclass(frozen=True)
class TrainRun:
    """How a training job runs beside its settings: where it writes, whether it continues or replaces a run, what
    it starts from and how it is evaluated at the end (the ``train`` flags that are no ``TrainConfig`` field)."""

    out: Path = Path("runs/train")
    """run directory (RUN_DIR)"""
    checkpoint_dir: Path | None = None
    """default: RUN_DIR/checkpoints"""
    seeds: int = field(default=1, metadata={"metavar": "N"})
    """train N independent seeds (--seed, --seed+1, ...) in one batch; runs go to RUN_DIR/seed_i and summary.json
    reports the spread across seeds"""
    resume: bool = False
    """continue from the checkpoint in --checkpoint-dir"""
    overwrite: bool = False
    init_checkpoint: str | None = field(default=None, metadata={"metavar": "CKPT"})
    """start from these weights (a checkpoint file or pretrained:NAME, e.g. to fine-tune a shipped agent under a
    workflow) instead of a fresh initialisation; a fresh optimiser and schedule; needs the same --hidden and memory
    flags"""
    progress: bool = True
    eval_episodes: int = 1000
    """held-out evaluation episodes (0: skip)"""
    eval_length: int = 100
    eval_engine: str = field(default="native", metadata={"choices": ENGINES})
    eval_sampled: bool = False
    """evaluate the sampled policy instead of greedy"""
    recipe: str | None = None
    """The recipe the settings came from (recorded in summary.json)."""
    threads: int | str | None = None


@dataclass
class TrainResult:
    """What a training job ended with: its summary (summary.json's content; None when interrupted) and where."""

    out: Path
    summary: dict | None
    interrupted: bool = False

    @property
    def exit_code(self) -> int:
        return 130 if self.interrupted else 0


def train(cfg: TrainConfig, run: TrainRun) -> TrainResult:
    """Train ``cfg`` as ``run`` says: every check (folders, memory, the run folder, a resume's checkpoints) before
    anything is written, then one run or ``run.seeds`` runs in one batch under the folder's lock; logs,
    checkpoints and summary.json as ``workflow-rl train`` writes them."""
    from workflow_rl.rl.pretrained import starting_weights
    from workflow_rl.rl.schedule import check_first_update

    check_config("cfg", cfg, TrainConfig)
    check_config("run", run, TrainRun)
    cfg.validate_once()
    check_fields(run, command="train")   # --seeds, --eval-episodes, --eval-length (workflow_rl/ranges.py)
    if run.eval_episodes > 0 and cfg.mixture() is None:   # and their product (a run across workflows skips it)
        check_play_steps(f"--eval-episodes {run.eval_episodes:,} x --eval-length {run.eval_length:,}"
                         + (f" x --seeds {run.seeds}" if run.seeds > 1 else ""),
                         run.seeds * run.eval_episodes * run.eval_length,
                         "lower --eval-episodes or --eval-length (--eval-episodes 0 skips the evaluation)")
    check_first_update(cfg)
    init = None if run.init_checkpoint is None else starting_weights(run.init_checkpoint, cfg.ppo, cfg.device)
    out = check_out_dir("--out", run.out)
    ckpt_dir = check_out_dir("--checkpoint-dir", run.checkpoint_dir or out / "checkpoints")
    check_seed("--seed + --seeds - 1", cfg.seed + run.seeds - 1)
    cfg.check_memory(run.seeds)
    threads.configure(cfg.thread_work(run.seeds), run.threads)
    check_train_folder(out, ckpt_dir, run, train_inputs(run, cfg))
    if run.resume:   # every checkpoint usable and of this run before anything is written
        check_resume(cfg, out, ckpt_dir, run.seeds)
    with RunDirLock(out):
        if run.overwrite:
            remove_previous_run(out, ckpt_dir)
        if run.seeds > 1:
            return _train_seeds(cfg, out, run, init)
        return _train_one(cfg, out, ckpt_dir, run, init)


def _workflow(cfg: TrainConfig):
    """The one workflow a run trains under (None: unconditioned, or across workflows)."""
    from workflow_rl.workflow import parse_workflow_arg

    return None if cfg.mixture() is not None else parse_workflow_arg(cfg.workflow)


def _eval_block(agent, workflow, cfg: TrainConfig, run: TrainRun) -> dict:
    """The held-out evaluation of a trained agent, where it is (the run's device), on the engine's device
    (:func:`~workflow_rl.devices.engine_device`: a CUDA run evaluated on real CybORG is not refused after it
    has trained)."""
    from workflow_rl.rl.evaluate import evaluate_policy
    from workflow_rl.rl.planning.planner import make_act

    r = evaluate_policy(make_act(agent, workflow=workflow, greedy=not run.eval_sampled), cfg.red_agent, run.eval_length,
                        run.eval_episodes, engine=run.eval_engine, workflow=workflow,
                        device=engine_device(run.eval_engine, cfg.device),
                        **engine_opts(cfg.vectorization, cfg.parallel_start_method, cfg.scenario, run.eval_engine))
    return {"length": r.length, "episodes": r.episodes, "mean": r.mean, "ci95": r.ci95, "std": r.std,
            "compliance": r.compliance, "engine": run.eval_engine,
            "mode": "sampled" if run.eval_sampled else "greedy"}


def check_train_folder(out: Path, ckpt_dir: Path, run: TrainRun, inputs) -> None:
    """``--out`` onto a finished or running run is refused unless ``--resume`` continues it or ``--overwrite``
    replaces it; so is one that holds another command's run or files that are no run's (``check_run_folder``).
    The checkpoint the run writes replaces only a plain file, never one of the ``inputs`` it reads, and with
    ``--overwrite`` only this run's own (:func:`checkpoint_of_run`): another run's ``latest.pt`` is not replaced."""
    if run.resume and run.overwrite:
        raise ValueError("--resume continues the run in --out, --overwrite replaces it: use one")
    check_run_folder(out, "train", run.resume, run.overwrite, inputs)
    latest = ckpt_dir / "latest.pt"
    check_out_files("--checkpoint-dir", ckpt_dir, [latest.name], inputs, replace=True)   # decided below
    if not latest.exists() or run.resume:
        return
    if not run.overwrite:
        raise ValueError(f"{ckpt_dir} already holds a training run's checkpoint: continue it with --resume, replace "
                         "it with --overwrite, or choose another --checkpoint-dir")
    if not checkpoint_of_run(latest, out):
        raise ValueError(f"--checkpoint-dir {ckpt_dir} holds a checkpoint that is not of the run in {out} (another "
                         "run's, or no run's): --overwrite replaces only this run's; choose another --checkpoint-dir, "
                         f"or delete {latest} yourself if it may go")


def checkpoint_of_run(latest: Path, out: Path) -> bool:
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


def train_inputs(run: TrainRun, cfg: TrainConfig) -> list[Path | None]:
    """The files a ``train`` run reads, which nothing it writes or removes may be: its starting checkpoint and the
    CybORG scenario folder."""
    from workflow_rl.rl.pretrained import spec_file

    init = spec_file(run.init_checkpoint) if run.init_checkpoint else None
    return [init, Path(cfg.scenario) if cfg.scenario else None]


def check_resume(cfg: TrainConfig, out: Path, ckpt_dir: Path, seeds: int) -> None:
    """Everything ``--resume`` will read, checked before the run's config and log are rewritten: each run's
    checkpoint (of this run, every counter and snapshot field sound) and, with ``--seeds``, the batch's state."""
    from workflow_rl.rl.resumable import check_resumable

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


def remove_previous_run(out: Path, ckpt_dir: Path) -> None:
    """``--overwrite`` (under the run folder's lock): the old run's files go first (``remove_run``; its checkpoint
    in ``--checkpoint-dir`` too), so nothing stale survives the new run."""
    remove_run(out)
    (ckpt_dir / "latest.pt").unlink(missing_ok=True)


def _train_one(cfg: TrainConfig, out: Path, ckpt_dir: Path, run: TrainRun, init: dict | None) -> TrainResult:
    """One run (``--seeds 1``): trained, evaluated, summarised."""
    from workflow_rl.rl.trainer import Trainer

    workflow = _workflow(cfg)
    trainer = Trainer(cfg, out, ckpt_dir, init_agent_state=init, progress=run.progress)
    if run.resume:
        trainer.restore(load_checkpoint(ckpt_dir / "latest.pt", cfg.device))
        print(f"resumed from {ckpt_dir / 'latest.pt'} at update {trainer.update} "
              f"({trainer.total_episodes} episodes)")
    print(f"training {_what(cfg, workflow)} vs {cfg.red_agent} on {cfg.engine} with {cfg.n_envs} envs (budget "
          f"{cfg.budget} episodes) -> {out}")
    summary = trainer.run()
    if summary["stop_reason"] == "interrupted":
        print(f"interrupted: saved {ckpt_dir / 'latest.pt'}; continue with the same command plus --resume")
        return TrainResult(out, None, interrupted=True)
    summary["eval"] = _eval_block(trainer.agent, workflow, cfg, run) if _evaluates(cfg, run) else None
    summary["checkpoint"] = str(ckpt_dir / "latest.pt")
    summary["init_checkpoint"] = run.init_checkpoint
    summary["recipe"] = run.recipe
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    ev = summary["eval"]
    print(f"done: {summary['stop_reason']} after {summary['episodes']} episodes, compliance "
          f"{_compliance(summary)}")
    if ev:
        print(f"held-out evaluation ({ev['episodes']} x {ev['length']} steps, {ev['mode']}, {ev['engine']}): "
              f"{ev['mean']:.2f} ± {ev['ci95']:.2f}")
    print(f"wrote {out / 'summary.json'}")
    return TrainResult(out, summary)


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


def _evaluates(cfg: TrainConfig, run: TrainRun) -> bool:
    """Whether training ends with the held-out evaluation: a run across workflows is evaluated per workflow by
    ``evaluate CKPT --workflow all`` instead (one workflow's evaluation would not describe it)."""
    if run.eval_episodes > 0 and cfg.mixture() is not None:
        print("a run across workflows is not evaluated here: run `workflow-rl evaluate CHECKPOINT --workflow all "
              "--out DIR` (per workflow)")
        return False
    return run.eval_episodes > 0


def _train_seeds(cfg: TrainConfig, out: Path, run: TrainRun, init: dict | None) -> TrainResult:
    """`train --seeds N`: N independent runs in one batch, each evaluated, and the spread across them."""
    from workflow_rl.rl.evaluate import across_seeds
    from workflow_rl.rl.seeds import train_seeds
    from workflow_rl.rl.trainer import check_batchable

    workflow = _workflow(cfg)
    for name, bad in (("--checkpoint-dir", run.checkpoint_dir), ("--tensorboard", cfg.tensorboard)):
        if bad:
            raise ValueError(f"{name} applies to a single run: drop it, or drop --seeds (runs go to RUN_DIR/seed_i)")
    check_batchable(cfg)
    print(f"training {run.seeds} seeds of {_what(cfg, workflow)} vs {cfg.red_agent} in one batch ({cfg.n_envs} envs "
          f"each, budget {cfg.budget} episodes each) -> {out}/seed_*")
    summaries, agents, interrupted = train_seeds(cfg, run.seeds, out, resume=run.resume,
                                                 progress=run.progress, init_agent_state=init)
    if interrupted:
        print(f"interrupted: every run saved under {out}/seed_*; continue with the same command plus --resume")
        return TrainResult(out, None, interrupted=True)
    evaluates = _evaluates(cfg, run)
    for i, (summary, agent) in enumerate(zip(summaries, agents)):
        summary["seed"] = cfg.seed + i
        summary["eval"] = _eval_block(agent, workflow, cfg, run) if evaluates else None
        summary["checkpoint"] = str(out / f"seed_{i}" / "checkpoints" / "latest.pt")
        summary["init_checkpoint"] = run.init_checkpoint
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
    return TrainResult(out, result)
