"""Run the workflow search's trainings in this process, in one batch.

The executor of ``search --batch-workflows Q --seeds-per-workflow K``.

The search is unchanged: it proposes Q workflows (GP-BUCB hallucinates the pending ones), claims their budgets at
dispatch and records each as it finishes. This executor puts each workflow's K seeds into slots of one
:class:`~workflow_rl.rl.trainer.BatchedTrainer`, whose every step and update serves all Q x K runs at once, which is
what keeps a GPU busy: a single run's few hundred envs are far too small a batch. A workflow whose seeds have all
stopped is evaluated and its slots are refilled at the next episode boundary. Ctrl-C finishes the current episode
round, writes every running seed's checkpoint and stops; ``--resume`` continues each from it. With the checkpoints
the batch's own state is saved (``STATE_FILE``: engine, random streams, which seed holds which slot, what the empty
slots hold) after every round that wrote a checkpoint, whenever it returns to the search and on Ctrl-C, so a search
stopped at any moment, kill -9 included, resumes exactly as the uninterrupted search runs.

Each seed trains under its workflow's cap (its config) within its share of the workflow's claim (``Slot.claim``).
The executor reports how far below the claim each seed can still go (``claims``: the search lowers the claim) and,
with elastic claims (``--claims elastic``), what each could use were its claim to grow (``needs``): its seeds then
wait at their claims instead of stopping, until the search tops them up (``extend``) or, when every running
workflow waits and none can be topped up, the newest is cut where it stands.
"""
from __future__ import annotations

import time
from pathlib import Path

import torch

from workflow_rl.checks import check_bool, check_int

from workflow_rl.files import check_inside
from workflow_rl.interrupt import GracefulInterrupt
from workflow_rl.rl.checkpoint import (MAX_WEIGHT, CheckpointError, atomic_save, check_finite, load_batch_state,
                                       load_checkpoint)
from workflow_rl.rl.memory import Memory
from workflow_rl.rl.ppo import WORKFLOW_DIM, Agent
from workflow_rl.rl.resumable import check_like, check_snapshot
from workflow_rl.rl.runlog import progress_bar
from workflow_rl.rl.trainer import BatchedTrainer, reconcile_staged
from workflow_rl.search.evaluation import SearchInterrupted, initial_weights
from workflow_rl.search.executors import SearchJob
from workflow_rl.search.records import Proposal, Record
from workflow_rl.workflow import Workflow

STATE_FILE = "search_batch.pt"
"""A batched search's own state (``BatchedExecutor._save_state``), beside the running workflows' checkpoints."""
STATE_FORMAT = "workflow-rl search batch"


def seed_dir(run_dir: str, seed: int, seeds: int) -> str:
    """Where seed ``seed`` of a workflow writes: the workflow's own folder when it trains one seed."""
    return run_dir if seeds == 1 else str(Path(run_dir) / f"seed_{seed}")


class BatchedExecutor:
    """``workflows`` workflows, ``seeds`` runs each, trained together in one batch in this process."""

    def __init__(self, workflows: int, seeds: int = 1):
        self.q, self.k = int(workflows), int(seeds)
        self.trainer: BatchedTrainer | None = None
        self.props: dict[int, Proposal] = {}                  # iteration -> proposal being trained
        self.runs: dict[int, list[tuple[int, int]]] = {}      # iteration -> its (slot, seed) pairs
        self.starts: dict[int, tuple[float, float]] = {}
        self.done: list[tuple[Proposal, Record]] = []         # evaluated, not yet handed to the search
        self.job: SearchJob | None = None
        self.interrupt = GracefulInterrupt("this episode round")
        self.elastic = False
        self._stalled = False   # wait_one returned on a stall and nothing was topped up or started since
        self._bar = None
        self._trained = False   # rounds trained since the batch state was last saved
        self._submitted = 0     # the latest iteration submitted
        self._restore: dict | None = None   # (resume) the saved batch state, until applied
        self._places: dict[tuple[int, int], tuple[int, int]] = {}   # (resume) (iteration, seed) -> (slot, claim)
        self._topped = False    # a claim grew since the batch state was saved

    def open(self, job: SearchJob) -> None:
        self.job = job
        self.elastic = job.cfg.claims == "elastic"

    def free(self) -> int:
        # while results wait to be handed back, dispatch nothing: the GP should see them first
        return 0 if self.done else self.q - len(self.props)

    def running(self) -> int:
        return len(self.props) + len(self.done)

    def submit(self, prop: Proposal) -> None:
        cfg, out, it = self.job.cfg, self.job.out, prop.iteration
        wf = Workflow.parse(prop.workflow)
        budgets = prop.shares(self.k)
        seed_cfg = cfg.train_config(wf, cfg.train.budget)   # each seed's cap; its share of the claim bounds it
        if self.trainer is None:
            self.trainer = BatchedTrainer(seed_cfg, self.q * self.k)
            self.trainer.stage_saves()   # committed with the batch state (_save_state)
            self._load_state()
        if self._restore is not None and not any((it, seed) in self._places for seed in range(self.k)):
            self._apply_restore()   # dispatched after the state was saved: it enters the batch as it was then
        self._submitted = max(self._submitted, it)
        init, runs = None, []
        for seed, budget in enumerate(budgets):
            if budget == 0:        # a claim smaller than the number of seeds
                continue
            run_dir = out / seed_dir(prop.run_dir, seed, self.k)
            ck_path = run_dir / "checkpoints" / "latest.pt"
            ck = load_checkpoint(ck_path, cfg.train.device) if ck_path.is_file() else None
            if ck is None and init is None:
                init = initial_weights(cfg, out, prop)
            prefix = {"iteration": it} if self.k == 1 else {"iteration": it, "seed": seed}
            slot_id, claim_then = self._slot_for(it, seed)
            self._topped |= claim_then is not None and budget > claim_then   # topped up after the state was saved
            slot = self.trainer.start(slot_id, seed_cfg, run_dir, init_agent_state=None if ck is not None else init,
                                      checkpoint=ck, log_prefix=prefix, init_seed=cfg.train.seed + seed,
                                      claim=budget, pauses=self.elastic)
            if ck is not None and ck["counters"].get("stop_reason") not in (None, "interrupted"):
                slot.stop_reason = ck["counters"]["stop_reason"]   # trained before a crash, not yet evaluated
            runs.append((slot_id, seed))
        self.props[it], self.runs[it] = prop, runs
        self.starts[it] = (time.perf_counter(), time.time())
        self._stalled = False
        self._finish_ready()

    def claims(self) -> dict[int, list[int]]:
        """Per running workflow, per seed, the most training episodes it can still have in total (0 for a seed
        given no budget)."""
        return self._bounds(within_claim=True)

    def needs(self) -> dict[int, list[int]] | None:
        """(elastic) Per running workflow, per seed, the most training episodes it could have within its cap."""
        return self._bounds(within_claim=False) if self.elastic else None

    def _bounds(self, within_claim: bool) -> dict[int, list[int]]:
        out = {}
        for it, runs in self.runs.items():
            bound = [0] * self.k
            for slot_id, seed in runs:
                bound[seed] = self.trainer.slots[slot_id].most_episodes(within_claim)
            out[it] = bound
        return out

    def extend(self, iteration: int, seed_budgets: list[int]) -> None:
        for slot_id, seed in self.runs[iteration]:
            self.trainer.extend(slot_id, seed_budgets[seed])
        self._stalled = False
        self._topped = True

    def wait_one(self) -> tuple[Proposal, Record] | None:
        """Train rounds until a workflow is evaluated; None earlier, after a round in which a running workflow's
        claim shrank (a gate fired) while a slot is free, so the search can give that budget to a new workflow now,
        or (elastic) when every running workflow waits at its claim, so the search can top them up; if it did not,
        the newest is cut where it stands (nothing else can free budget for it).

        The batch's state is saved (``_save_state``) after every round that wrote a checkpoint and whenever it
        returns after training: a search killed at any moment resumes from the last such point exactly as if it
        had never stopped."""
        self._apply_restore()
        early = False
        try:
            with self.interrupt:
                before = self._claimed()
                while not self.done:
                    if self.interrupt.requested:   # between rounds: every running seed is at an episode boundary
                        self._save_state(returned=False)
                        raise SearchInterrupted("batched search")
                    if self._all_waiting():
                        if not self._stalled:
                            self._stalled = early = True
                            if self._trained:
                                self._save_state(returned=True)
                            return None
                        for slot_id, _ in self.runs[max(self.runs)]:
                            if self.trainer.slots[slot_id].waiting:
                                self.trainer.cut(slot_id)
                        self._save_state(returned=bool(self._ready()))
                        self._finish_ready()
                        continue
                    saved = [s and s.saved_update for s in self.trainer.slots]
                    self.trainer.run_round()
                    self._trained = True
                    ready = self._ready()
                    early = not ready and self.free() > 0 and self._claimed() < before
                    if ready or early or saved != [s and s.saved_update for s in self.trainer.slots]:
                        self._save_state(returned=bool(ready) or early)
                    self._finish_ready()
                    self._show_progress()
                    if early:
                        return None
        finally:
            if not early:   # the search prints its line for the finished workflow next
                self._close_bar()
        return self.done.pop(0)

    # ---------------------------------------------------------------------------------------- batch state
    def _save_state(self, returned: bool) -> None:
        """Save every running seed (its checkpoint at its current update) and the batch's own state beside them
        (``STATE_FILE``: the engine snapshot, which workflow's seed holds which slot, what the empty slots hold,
        and whether this is the moment ``wait_one`` returns, after which the search reviews its claims)."""
        t = self.trainer
        slots = [None] * t.q
        for it, runs in self.runs.items():
            for slot_id, seed in runs:
                s = t.slots[slot_id]
                if s.saved_update != s.update or not (s.ckpt_dir / "latest.pt").exists():
                    t.save(slot_id)
                slots[slot_id] = {"iteration": it, "seed": seed, "run_dir": str(s.out.relative_to(self.job.out)),
                                  "update": s.update, "claim": s.claim}
        atomic_save({"format": STATE_FORMAT, "global_step": t.global_step, **t.engine_snapshot(),
                     "wf_enc": t.wf_enc.clone(), "rank": t.rank.clone(), "lam": t.lam.clone(),
                     "members": t.agents.flat.detach().clone(), "slots": slots, "stalled": self._stalled,
                     "returned": returned, "submitted": self._submitted}, self.job.out / STATE_FILE)
        t.commit_saves()
        self._trained = False

    def _load_state(self) -> None:
        """(resume) The batch state saved with the checkpoints the pending seeds resume from, kept for
        ``_apply_restore``, after the seeds' staged checkpoints are made to agree with it (``reconcile_staged``: a
        kill between the two); none where it is missing or still belongs to other checkpoints: the seeds then
        continue on fresh episodes, still a valid search."""
        path = self.job.out / STATE_FILE
        snap = load_batch_state(path, self.job.cfg.train.device) if path.is_file() else None
        reconcile_staged(self.job.out, {self.job.out / e["run_dir"] / "checkpoints": e["update"]
                                        for e in (snap or {}).get("slots", []) if e})
        if snap is None:
            return
        for e in snap["slots"]:
            ck = self.job.out / e["run_dir"] / "checkpoints" / "latest.pt" if e else None
            if e and (load_checkpoint(ck)["counters"]["update"] if ck.is_file() else 0) != e["update"]:
                return
        self._restore = snap
        self._places = {(e["iteration"], e["seed"]): (k, e["claim"]) for k, e in enumerate(snap["slots"]) if e}

    def _slot_for(self, it: int, seed: int) -> tuple[int, int | None]:
        """Where a submitted seed trains: (resume) the slot it held, with the claim it had then; else the first
        free slot."""
        free = self.trainer.free_slots()
        place = self._places.pop((it, seed), None) if self._restore is not None else None
        return place if place is not None and place[0] in free else (free[0], None)

    def _apply_restore(self) -> None:
        """(resume) Before the first round, or before a workflow dispatched after the state was saved takes its
        slot: the batch's engine, random streams and empty slots as they were when the state was saved."""
        snap, self._restore = self._restore, None
        if snap is None:
            return
        t = self.trainer
        t.global_step = snap["global_step"]
        t.restore_engine(snap)
        t.wf_enc.copy_(snap["wf_enc"])
        t.rank.copy_(snap["rank"])
        t.lam.copy_(snap["lam"])
        with torch.no_grad():
            for k in t.free_slots():
                t.agents.flat[k] = snap["members"][k]
        self._stalled = snap["stalled"] and not self._topped

    @property
    def review_owed(self) -> bool:
        """(resume) The state was saved as ``wait_one`` returned and the search recorded nothing since: the review
        of claims that follows every return (``WorkflowSearch._review``) is owed before anything else."""
        snap = self._restore
        return bool(snap and snap["returned"] and not self._places and self._submitted <= snap["submitted"])

    def _all_waiting(self) -> bool:
        """Every running seed is at its claim or stopped, some wait: no round can train anything."""
        slots = [self.trainer.slots[s] for runs in self.runs.values() for s, _ in runs]
        return any(s.waiting for s in slots) and all(s.waiting or s.stop_reason is not None for s in slots)

    def _claimed(self) -> int:
        return sum(sum(c) for c in self.claims().values())

    def _close_bar(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def _show_progress(self) -> None:
        """One bar over the search budget: episodes of finished workflows plus those of the running ones."""
        if not self.job.progress:
            return
        if self._bar is None:
            self._bar = progress_bar(self.job.cfg.total_episodes, 0, True)
        running = [s for s in self.trainer.slots if s is not None]
        self._bar.n = self.job.episodes_used() + sum(s.total_episodes for s in running) + sum(
            r.episodes_trained for _, r in self.done)
        comp = " ".join(f"{s.workflow.codes}:{s.last_compliance:.2f}" for s in running
                        if s.last_compliance == s.last_compliance)
        self._bar.set_postfix_str(f"{len(running)} training | compliance {comp}", refresh=False)
        self._bar.refresh()

    def _ready(self) -> list[int]:
        """The running workflows whose seeds have all stopped training."""
        return [i for i, runs in self.runs.items() if all(self.trainer.slots[s].stop_reason is not None for s, _ in runs)]

    def _finish_ready(self) -> None:
        """Evaluate and hand back every workflow whose seeds have all stopped training."""
        for it in self._ready():
            self._finish(it)

    def _finish(self, it: int) -> None:
        prop, runs = self.props.pop(it), self.runs.pop(it)
        t0, started = self.starts.pop(it)
        summaries = [self.trainer.slots[s].summary() for s, _ in runs]
        agents = [self.trainer.member(s) for s, _ in runs]
        checkpoints = [str(Path(seed_dir(prop.run_dir, seed, self.k)) / "checkpoints" / "latest.pt")
                       for _, seed in runs]
        record = self.job.evaluate_record(self.job.cfg, prop, agents, summaries, t0, started, checkpoints)
        for s, _ in runs:
            self.trainer.release(s)
        self.done.append((prop, record))

    def shutdown(self) -> None:
        self._close_bar()
        if self.trainer is not None:
            self.trainer.close()
        self.props.clear()
        self.runs.clear()


def check_workflow_tables(enc: torch.Tensor, rank: torch.Tensor, lam: torch.Tensor) -> None:
    """A saved batch's workflow inputs (their shapes checked) hold what workflows give: 0/1 encodings, each env's
    type ranks an ordering of the five unit types, alignment weights >= 0. A rank of 9 would index past the unit
    types; a negative weight would pay for violations."""
    if not bool(((enc == 0) | (enc == 1)).all()):
        raise ValueError("wf_enc holds values other than the 0/1 bits of workflow encodings")
    if not bool((rank.sort(-1).values == torch.arange(rank.shape[-1], device=rank.device)).all()):
        raise ValueError("rank holds a row that is not an ordering of the five unit types")
    if bool((lam < 0).any()):
        raise ValueError("lam holds a negative alignment weight")


def check_batch_state(out: Path, cfg, state) -> None:
    """(resume) The batch state a batched search (``cfg``, a SearchConfig, with ``state`` its SearchState) will
    read, checked before anything is written: readable, and every field of the type and shape its batch has."""
    path = Path(out) / STATE_FILE
    if not path.is_file():
        return
    snap = load_batch_state(path, cfg.train.device)
    t, q = cfg.train, cfg.batch_slots * cfg.seeds_per_workflow   # the slots its executor has
    total = q * t.n_envs
    try:
        if snap.get("format") != STATE_FORMAT:
            raise ValueError("not a batched search's state")
        if check_int("global_step", snap["global_step"], 0) % t.episode_length:
            raise ValueError("global_step is not at an episode boundary")
        check_snapshot(snap, t, total)
        with torch.random.fork_rng(devices=[]):   # building a network draws its initial weights
            params = sum(v.numel() for v in Agent(t.ppo.hidden, Memory.of(t.ppo)).state_dict().values())
        check_like("wf_enc", snap["wf_enc"], torch.zeros(q, t.n_envs, WORKFLOW_DIM))
        check_like("rank", snap["rank"], torch.zeros(total, 5, dtype=torch.int64))
        check_like("lam", snap["lam"], torch.zeros(total, dtype=torch.float64))
        check_like("members", snap["members"], torch.zeros(q, params))
        check_finite("members (the empty slots' weights)", snap["members"], MAX_WEIGHT)
        check_workflow_tables(snap["wf_enc"], snap["rank"], snap["lam"])
        for name in ("stalled", "returned"):
            check_bool(name, snap[name])
        check_int("submitted", snap["submitted"], 0, state.dispatched)
        if not isinstance(snap["slots"], list) or len(snap["slots"]) != q:
            raise ValueError(f"slots is not a list of {q}")
        for e in snap["slots"]:
            if e is not None:
                check_int("iteration", e["iteration"], 1, state.dispatched)
                check_int("seed", e["seed"], 0, cfg.seeds_per_workflow - 1)
                check_int("update", e["update"], 0)
                check_int("claim", e["claim"], 0, cfg.workflow_cap)
                check_inside("run_dir", e["run_dir"], out)
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        why = str(e) if isinstance(e, ValueError) else f"{type(e).__name__}: {e}"
        raise CheckpointError(f"batch state {path} is damaged ({why}): delete it and resume again (the running "
                              "workflows then continue from their checkpoints on fresh episodes)") from None
