"""Run the workflow search's trainings in this process, in one batch (``search --batch-workflows Q
--seeds-per-workflow K``).

The search is unchanged: it proposes Q workflows (GP-BUCB hallucinates the pending ones), claims their budgets at
dispatch and records each as it finishes. This executor puts each workflow's K seeds into slots of one
:class:`~workflow_rl.rl.trainer.BatchedTrainer`, whose every step and update serves all Q x K runs at once, which is
what keeps a GPU busy: a single run's few hundred envs are far too small a batch. A workflow whose seeds have all
stopped is evaluated and its slots are refilled at the next episode boundary. Ctrl-C finishes the current episode
round, writes every running seed's checkpoint and stops; ``--resume`` continues each from it.

Each seed trains under its workflow's cap (its config) within its share of the workflow's claim (``Slot.claim``).
The executor reports how far below the claim each seed can still go (``claims``: the search lowers the claim) and,
with elastic claims (``--claims elastic``), what each could use were its claim to grow (``needs``): its seeds then
wait at their claims instead of stopping, until the search tops them up (``extend``) or, when every running
workflow waits and none can be topped up, the newest is cut where it stands.
"""
from __future__ import annotations

import time
from pathlib import Path

from workflow_rl.rl.checkpoint import load_checkpoint
from workflow_rl.rl.interrupt import GracefulInterrupt
from workflow_rl.rl.runlog import progress_bar
from workflow_rl.rl.trainer import BatchedTrainer
from workflow_rl.search.evaluation import SearchInterrupted, initial_weights
from workflow_rl.search.executors import SearchJob
from workflow_rl.search.records import Proposal, Record
from workflow_rl.workflow import Workflow


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
        free = self.trainer.free_slots()
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
            slot_id = free[len(runs)]
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

    def wait_one(self) -> tuple[Proposal, Record] | None:
        """Train rounds until a workflow is evaluated; None earlier, after a round in which a running workflow's
        claim shrank (a gate fired) while a slot is free, so the search can give that budget to a new workflow now,
        or (elastic) when every running workflow waits at its claim, so the search can top them up; if it did not,
        the newest is cut where it stands (nothing else can free budget for it)."""
        early = False
        try:
            with self.interrupt:
                before = self._claimed()
                while not self.done:
                    if self.interrupt.requested:   # between rounds: every running seed is at an episode boundary
                        for runs in self.runs.values():
                            for slot_id, _ in runs:
                                self.trainer.save(slot_id)
                        raise SearchInterrupted("batched search")
                    if self._all_waiting():
                        if not self._stalled:
                            self._stalled = early = True
                            return None
                        for slot_id, _ in self.runs[max(self.runs)]:
                            if self.trainer.slots[slot_id].waiting:
                                self.trainer.cut(slot_id)
                        self._finish_ready()
                        continue
                    self.trainer.run_round()
                    self._finish_ready()
                    self._show_progress()
                    if not self.done and self.free() > 0 and self._claimed() < before:
                        early = True
                        return None
        finally:
            if not early:   # the search prints its line for the finished workflow next
                self._close_bar()
        return self.done.pop(0)

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

    def _finish_ready(self) -> None:
        """Evaluate and hand back every workflow whose seeds have all stopped training."""
        for it in [i for i, runs in self.runs.items()
                   if all(self.trainer.slots[s].stop_reason is not None for s, _ in runs)]:
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
