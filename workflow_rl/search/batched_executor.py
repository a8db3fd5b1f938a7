"""Run the workflow search's trainings q at a time in this process, in one batch (``search --batch-workflows Q``).

The search is unchanged: it proposes q workflows (GP-BUCB hallucinates the pending ones), claims their budgets at
dispatch and records each as it finishes. This executor puts them into the slots of one
:class:`~workflow_rl.rl.batched.BatchedTrainer`, whose every step and update serves all of them at once, which is
what keeps a GPU busy: a single workflow's few hundred envs are far too small a batch. A finished workflow is
evaluated and its slot refilled at the next episode boundary. Ctrl-C finishes the current episode round, writes every
running workflow's checkpoint and stops; ``--resume`` continues each from it.
"""
from __future__ import annotations

import time

from workflow_rl.rl.batched import BatchedTrainer
from workflow_rl.rl.train import GracefulInterrupt, load_checkpoint
from workflow_rl.workflow import Workflow


class BatchedExecutor:
    """``slots`` workflows trained together in one batch, in this process."""

    def __init__(self, slots: int):
        self.q = int(slots)
        self.trainer: BatchedTrainer | None = None
        self.props: dict[int, dict] = {}              # slot -> proposal being trained there
        self.starts: dict[int, tuple[float, float]] = {}
        self.done: list[tuple[dict, dict]] = []       # finished and evaluated, not yet handed to the search
        self.search = None
        self.interrupt = GracefulInterrupt("this episode round")
        self._bar = None

    def free(self) -> int:
        # while results wait to be handed back, dispatch nothing: the GP should see them first
        return 0 if self.done else self.q - len(self.props)

    def running(self) -> int:
        return len(self.props) + len(self.done)

    def submit(self, prop: dict, search) -> None:
        from workflow_rl.search.search import initial_weights

        self.search = search
        cfg = search.cfg
        tcfg = cfg.train_config(Workflow.parse(prop["workflow"]), prop["budget"])
        if self.trainer is None:
            self.trainer = BatchedTrainer(tcfg, self.q)
        k = self.trainer.free_slots()[0]
        run_dir = search.out / prop["run_dir"]
        ck_path = run_dir / "checkpoints" / "latest.pt"
        ck = load_checkpoint(ck_path, cfg.device) if ck_path.is_file() else None
        init = None if ck is not None else initial_weights(cfg, search.out, prop)
        slot = self.trainer.start(k, tcfg, run_dir, init_agent_state=init, checkpoint=ck,
                                  log_prefix={"iteration": prop["iteration"]})
        self.props[k] = prop
        self.starts[k] = (time.perf_counter(), time.time())
        if ck is not None and ck["counters"].get("stop_reason") not in (None, "interrupted"):
            slot.stop_reason = ck["counters"]["stop_reason"]   # trained before the interruption, not yet evaluated
            self._finish(k)

    def wait_one(self) -> tuple[dict, dict]:
        from workflow_rl.search.search import SearchInterrupted

        try:
            with self.interrupt:
                while not self.done:
                    if self.interrupt.requested:   # between rounds: every running workflow is at an episode boundary
                        for k in self.props:
                            self.trainer.save(k)
                        raise SearchInterrupted("batched search")
                    for k in self.trainer.run_round():
                        self._finish(k)
                    self._show_progress()
        finally:
            if self._bar is not None:   # the search prints its line for the finished workflow next
                self._bar.close()
                self._bar = None
        return self.done.pop(0)

    def _show_progress(self) -> None:
        """One bar over the search budget: episodes of finished workflows plus those of the running ones."""
        if not self.search.progress:
            return
        if self._bar is None:
            from workflow_rl.rl.train import _progress

            self._bar = _progress(self.search.cfg.total_episodes, 0, True)
        running = [s for s in self.trainer.slots if s is not None]
        self._bar.n = self.search.state.episodes_used + sum(s.total_episodes for s in running) + sum(
            r["episodes_trained"] for _, r in self.done)
        comp = " ".join(f"{s.workflow.codes}:{s.last_compliance:.2f}" for s in running
                        if s.last_compliance == s.last_compliance)
        self._bar.set_postfix_str(f"{len(running)} training | compliance {comp}", refresh=False)
        self._bar.refresh()

    def _finish(self, k: int) -> None:
        from workflow_rl.search.search import evaluate_record

        prop = self.props.pop(k)
        t0, started = self.starts.pop(k)
        summary = self.trainer.slots[k].summary()
        record = evaluate_record(self.search.cfg, prop, self.trainer.member(k), summary, t0, started)
        self.trainer.release(k)
        self.done.append((prop, record))

    def shutdown(self) -> None:
        if self.trainer is not None:
            self.trainer.close()
        self.props.clear()
