"""One run inside a :class:`~workflow_rl.rl.trainer.BatchedTrainer`.

Its settings, counters, log, checkpoint place and budget claim. A search grants claims on its budget
(``search.search``); the slot alone decides what a claim means for its run: when it is spent, the run stops or
(``pauses``) waits for the claim to grow.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from workflow_rl.rl.checkpoint import RunState
from workflow_rl.rl.config import TrainConfig
from workflow_rl.rl.runlog import RunLog, run_summary
from workflow_rl.rl.schedule import most_episodes, stop_rule
from workflow_rl.workflow import Workflow, WorkflowMix, all_workflows


@dataclass(kw_only=True)
class Slot(RunState):
    """One run inside the batch: its settings, counters (``RunState``), log and where its checkpoint goes."""

    cfg: TrainConfig
    workflow: Workflow | None
    out: Path
    ckpt_dir: Path
    log: RunLog
    saved_update: int = 0
    """the update of the last checkpoint (checkpoints every ``cfg.checkpoint_every`` updates)."""
    claim: int | None = None
    """training episodes the run may use for now, below its budget ``cfg.budget`` (None: all of it). A search's
    slot trains within its workflow's claim on the search budget while its config keeps the workflow's cap, so the
    protocol (stop rule, learning-rate schedule) does not depend on how the claim was granted."""
    pauses: bool = False
    """at its claim the run waits (``waiting``) instead of stopping "budget": the claim may still grow
    (``BatchedTrainer.extend``) or be made final (``BatchedTrainer.cut``). An elastic search's slots."""
    waiting: bool = False
    """the run is at its claim, not stopped, and trains no further until ``extend`` or ``cut``."""
    mix: WorkflowMix | None = None
    """a run across workflows (``--workflow`` a list; ``workflow`` is then None): each env draws its own."""

    @property
    def conditioned(self) -> bool:
        """Whether the run has workflows to comply with (one, or a mixture), as opposed to plain PPO."""
        return self.workflow is not None or self.mix is not None

    def worst(self) -> tuple[str, float]:
        """A run across workflows: the least compliant workflow over its recent episodes and that compliance
        (``WorkflowWindow``); ("", NaN) for a single workflow."""
        if self.mix is None:
            return "", float("nan")
        w, c = self.window.worst()
        return ("" if w is None else all_workflows()[w].codes), c

    @property
    def allowance(self) -> int:
        """Training episodes the run may use now: its claim, never above its budget."""
        return self.cfg.budget if self.claim is None else min(self.claim, self.cfg.budget)

    def most_episodes(self, within_claim: bool = True) -> int:
        """The most training episodes this run can have when it stops (``schedule.most_episodes``), within its
        claim or (``within_claim`` False) within its budget: what it would use were its claim to grow."""
        bound = most_episodes(self.cfg, int(self.episodes_per_env.min()), self.total_episodes, self.gate_at,
                              self.stop_reason)
        return min(bound, self.allowance) if within_claim else bound

    def apply_stop_rule(self) -> None:
        """Decide from the counters whether the run stops (``schedule.stop_rule``): after each update, and as a run
        continues from a checkpoint (one written as it stopped stops again at once under the same limits)."""
        self.stop_reason = stop_rule(self.cfg, int(self.episodes_per_env.min()), self.total_episodes, self.gate_at)

    def at_claim(self) -> None:
        """The claim is spent: stop "budget", or wait for the claim to grow if the run ``pauses``."""
        if self.pauses and self.total_episodes < self.cfg.budget:
            self.waiting = True
        else:
            self.stop_reason = "budget"

    def grow(self, claim: int) -> None:
        """Raise the claim to ``claim`` (never below the episodes trained); a waiting run may train on."""
        if claim < self.total_episodes:
            raise ValueError(f"a claim of {claim} is below the {self.total_episodes} episodes this run trained")
        self.claim, self.waiting = claim, self.waiting and claim <= self.total_episodes

    def summary(self) -> dict:
        out = run_summary(self.cfg, self.workflow, self.total_episodes, self.update, self.last_compliance,
                          self.stop_reason, self.recent, self.gate_episodes)
        if self.mix is not None:
            worst, c = self.worst()
            out.update(workflows=[w.codes for w in self.mix.train], held_out=[w.codes for w in self.mix.held_out],
                       none_share=self.mix.none_share,
                       compliance_worst=None if c != c else c, worst_workflow=worst or None)
        return out
