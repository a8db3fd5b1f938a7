"""``train --seeds N``: N independent runs of one configuration, trained together in one batch.

N independent runs of one configuration trained together in one batch (:class:`~workflow_rl.rl.trainer.BatchedTrainer`,
one slot per seed), with the batch's own state saved beside the seeds' checkpoints so that an interrupted run resumes
exactly as if it had never stopped.
"""
from __future__ import annotations

import math
from pathlib import Path

from workflow_rl.checks import check_int
from workflow_rl.interrupt import GracefulInterrupt
from workflow_rl.rl.checkpoint import BATCH_STATE_FIX, CheckpointError, atomic_save, load_batch_state, load_checkpoint
from workflow_rl.rl.config import TrainConfig
from workflow_rl.rl.ppo import Agent
from workflow_rl.rl.resumable import check_resumable, check_snapshot
from workflow_rl.rl.runlog import mean_or_nan, progress_bar
from workflow_rl.rl.trainer import BatchedTrainer, reconcile_staged


def train_seeds(cfg: TrainConfig, n_seeds: int, out: str | Path, resume: bool = False, progress: bool = True,
                init_agent_state: dict | None = None) -> tuple[list[dict], list[Agent], bool]:
    """``n_seeds`` independent runs of one configuration, trained together in one batch.

    Run i starts from ``init_agent_state`` if given, else from the weights seed ``cfg.seed + i`` initialises, plays its own block of the env streams, stops by
    its own rules and writes ``out/seed_i`` (config, training log, checkpoint). Ctrl-C finishes the episode round and
    saves every unfinished run; ``resume`` continues them. Returns (each run's summary, its agent, whether Ctrl-C
    stopped training).
    """
    out = Path(out)
    cks = [None] * n_seeds
    if resume:   # every checkpoint and the batch state checked before any seed's config or log is rewritten
        _reconcile(out, cfg, n_seeds)
        for i in range(n_seeds):
            path = out / f"seed_{i}" / "checkpoints" / "latest.pt"
            cks[i] = load_checkpoint(path, cfg.device)
            check_resumable(cks[i], cfg, path)
        check_batch_file(out, cfg, [ck["counters"]["update"] for ck in cks])
    bt = BatchedTrainer(cfg, n_seeds)
    bt.stage_saves()   # the seeds' checkpoints become latest.pt with the batch state (_save_batch)
    try:
        for i, ck in enumerate(cks):
            slot = bt.start(i, cfg, out / f"seed_{i}", checkpoint=ck, init_agent_state=init_agent_state,
                            init_seed=cfg.seed + i)
            if ck is not None:
                slot.stop_reason = ck["counters"].get("stop_reason")
        if resume:
            _restore_batch(bt, out)
        bar = progress_bar(cfg.budget * n_seeds, sum(s.total_episodes for s in bt.slots), progress)
        interrupted = False
        with GracefulInterrupt("this episode round") as stop:
            while any(s.stop_reason is None for s in bt.slots):
                if stop.requested:
                    for k, s in enumerate(bt.slots):
                        if s.stop_reason is None:
                            bt.save(k)
                    _save_batch(bt, out)
                    interrupted = True
                    break
                saved = [s.saved_update for s in bt.slots]
                bt.run_round()
                if saved != [s.saved_update for s in bt.slots]:
                    _save_batch(bt, out)
                bar.n = sum(s.total_episodes for s in bt.slots)
                line = " | ".join(f"seed {k}: {s.total_episodes} eps, mean100 {mean_or_nan(list(s.recent)):.2f}"
                                  + ("" if math.isnan(s.last_compliance) else f", compliance {s.last_compliance:.3f}")
                                  for k, s in enumerate(bt.slots))
                bar.set_postfix_str(line, refresh=True)
                if not progress:
                    print(line, flush=True)
        bar.close()
    finally:
        bt.close()
    return [s.summary() for s in bt.slots], [bt.member(k) for k in range(n_seeds)], interrupted


BATCH_FILE = "batch.pt"
"""``train --seeds``: the batch's own state (RNG, engine, observations), saved next to the seeds' checkpoints."""


def check_batch_file(out: Path, cfg: TrainConfig, updates: list[int]) -> None:
    """The batch state a resume of ``train --seeds`` will read (``_restore_batch``), checked before anything is
    written: readable, and where it goes with the seeds' checkpoints (``updates``, their update counters), a
    snapshot that fits the batch."""
    path = Path(out) / BATCH_FILE
    if not path.is_file():
        return
    snap = load_batch_state(path, cfg.device)
    if snap.get("updates") != updates:
        return   # another moment's state: _restore_batch ignores it
    try:
        check_int("global_step", snap.get("global_step"), 0)
        check_snapshot(snap, cfg, cfg.n_envs * len(updates))
    except ValueError as e:
        raise CheckpointError(f"batch state {path} is damaged ({e}): {BATCH_STATE_FIX}") from None


def _save_batch(bt: BatchedTrainer, out: Path) -> None:
    """The batch's engine snapshot, tagged with the update of each slot's checkpoint it goes with: the seeds share
    one generator and one vector env, so their checkpoints alone would resume on fresh env streams."""
    atomic_save({**bt.engine_snapshot(), "global_step": bt.global_step, "updates": [s.update for s in bt.slots]},
                out / BATCH_FILE)
    bt.commit_saves()


def _reconcile(out: Path, cfg: TrainConfig, n_seeds: int) -> None:
    """(resume) The seeds' staged checkpoints made to agree with the saved batch state (``reconcile_staged``)."""
    path = out / BATCH_FILE
    updates = load_batch_state(path, cfg.device).get("updates") if path.is_file() else None
    committed = ({out / f"seed_{i}" / "checkpoints": u for i, u in enumerate(updates)}
                 if isinstance(updates, list) and len(updates) == n_seeds else {})
    reconcile_staged(out, committed)


def _restore_batch(bt: BatchedTrainer, out: Path) -> bool:
    """Continue the batch's engine where the seeds' checkpoints left it, so a resumed ``train --seeds`` run is
    identical to an uninterrupted one; returns False (fresh episodes, still a valid run) when the file is missing
    or belongs to other checkpoints (``_reconcile`` has already made a kill between the two agree)."""
    path = out / BATCH_FILE
    if not path.is_file():
        return False
    snap = load_batch_state(path, bt.device)
    if snap.get("updates") != [s.update for s in bt.slots]:
        return False
    bt.global_step = snap["global_step"]
    return bt.restore_engine(snap)
