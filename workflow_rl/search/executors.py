"""How the search's trainings run: the contract every executor keeps, and the default one (one at a time, here).

The search hands an executor a :class:`SearchJob` (the settings, the output folder and the functions that train
and evaluate a workflow) rather than itself, so executors never import the search loop.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Protocol

from workflow_rl.search.config import SearchConfig
from workflow_rl.search.records import Proposal, Record


@dataclass(frozen=True)
class SearchJob:
    """What an executor needs from the search that feeds it."""

    cfg: SearchConfig
    out: Path
    """the search's RUN_DIR; a proposal's ``run_dir`` is relative to it"""
    progress: bool
    train_and_evaluate: Callable[[SearchConfig, Path, Proposal, bool], Record]
    evaluate_record: Callable[..., Record]
    """builds a record from trained policies (``search.evaluation.evaluate_record``'s signature)"""
    episodes_used: Callable[[], int]
    """training episodes of the workflows recorded so far (for a progress bar over the search budget)"""


class Executor(Protocol):
    """Trains proposals handed to it and returns their records, in any order."""

    def open(self, job: SearchJob) -> None:
        """Called once by the search before the first ``submit``."""

    def free(self) -> int:
        """How many more proposals it takes now."""

    def running(self) -> int:
        """Proposals submitted and not yet returned by ``wait_one``."""

    def submit(self, prop: Proposal) -> None: ...

    def wait_one(self) -> tuple[Proposal, Record] | None:
        """Block until one submitted proposal is trained and evaluated; an executor that reports ``claims`` may
        return None earlier, when a running proposal's claim shrank, so the search can dispatch again, or (one
        that grows claims) when every running proposal waits at its claim, so the search can top them up; if the
        search could not, the next call cuts the newest where it stands."""

    def claims(self) -> dict[int, list[int]]:
        """Per running proposal (by iteration), per seed, the most training episodes it can still have in total,
        where the executor knows a bound below the claim (``rl.schedule.most_episodes``); {} where it does not."""

    def needs(self) -> dict[int, list[int]] | None:
        """Per running proposal, per seed, the most training episodes it could have were its claim to grow (a
        seed's cap before its gate); None where the executor cannot grow claims (``extend``)."""

    def extend(self, iteration: int, seed_budgets: list[int]) -> None:
        """Raise a running proposal's per-seed claims (only where ``needs`` is not None)."""

    def shutdown(self) -> None: ...


class SerialExecutor:
    """Trains one workflow at a time, in this process (Ctrl-C saves and stops cleanly)."""

    def __init__(self):
        self.queue: list[Proposal] = []
        self.job: SearchJob | None = None

    def open(self, job: SearchJob) -> None:
        self.job = job

    def free(self) -> int:
        return 1 - len(self.queue)

    def running(self) -> int:
        return len(self.queue)

    def submit(self, prop: Proposal) -> None:
        self.queue.append(prop)

    def claims(self) -> dict[int, list[int]]:
        return {}   # one workflow at a time: nothing else could use a lowered claim

    def needs(self) -> None:
        return None   # one workflow at a time: it always gets a full cap (or, last, what is left)

    def extend(self, iteration: int, seed_budgets: list[int]) -> None:
        raise NotImplementedError("a serial search's claims do not grow")

    def wait_one(self) -> tuple[Proposal, Record]:
        prop = self.queue.pop(0)
        job = self.job
        return prop, job.train_and_evaluate(job.cfg, job.out, prop, job.progress)

    def shutdown(self) -> None:
        self.queue.clear()
