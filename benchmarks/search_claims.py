"""How much lowering claims at the gate shortens a batched search (issue H's 100k search target).

A batched search (``--batch-workflows Q``) dispatches a workflow only while a full cap is unclaimed; running
workflows used to keep their whole cap until they finished. Now a workflow's claim drops to what it can still use
once its gate fires (``rl.schedule.most_episodes``; ``WorkflowSearch._tighten``), so more workflows train at once.
This runs the same search twice in one process — claims lowered (the search as shipped) and claims kept whole (the
executor reports no bounds: the old behaviour) — and reports for each:

* ``rounds``: episode rounds the batch ran (every round steps all slots 100 steps and updates them 4 times). On a
  GPU a round costs about the same whatever the number of workflows in it (the loop is launch-bound), so rounds
  are the device-independent measure of a batched search's wall time there;
* the most workflows in flight, workflows trained, wall time on this machine, and the answer.

    PYTHONPATH=. python benchmarks/search_claims.py --total-episodes 100000 --batch-workflows 16 --out runs/claims

Results: BENCHMARKS.md ("Search: claims lowered at the gate").
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from workflow_rl.search.batched_executor import BatchedExecutor
from workflow_rl.search.search import SearchConfig, WorkflowSearch


class CountingExecutor(BatchedExecutor):
    """The batched executor, counting episode rounds and the most workflows in flight; ``whole`` hides every
    bound, so claims stay whole until a workflow finishes (the search before claims were lowered)."""

    def __init__(self, workflows: int, whole: bool):
        super().__init__(workflows)
        self.whole, self.rounds, self.most = whole, 0, 0

    def claims(self) -> dict[int, list[int]]:
        return {} if self.whole else super().claims()

    def submit(self, prop) -> None:
        super().submit(prop)
        self.most = max(self.most, len(self.props))
        if not hasattr(self.trainer, "_counted"):
            orig = self.trainer.run_round

            def counted():
                self.rounds += 1
                return orig()

            self.trainer.run_round, self.trainer._counted = counted, True


TINY = dict(n_envs=8, max_episodes=4, post_gate_episodes=2, min_episodes=1, min_fixes=1, compliance_threshold=0.01,
            eval_episodes=8)
"""``--tiny``: gates that fire in the first episodes, caps of 48 (a smoke test of this script, not a measurement)."""


def run(mode: str, args) -> dict:
    cfg = SearchConfig(total_episodes=args.total_episodes, batch_workflows=args.batch_workflows, seed=args.seed,
                       red_agent=args.red_agent, device=args.device, **(TINY if args.tiny else {}))
    ex = CountingExecutor(args.batch_workflows, whole=mode == "whole")
    t0 = time.perf_counter()
    s = WorkflowSearch(cfg, Path(args.out) / mode, progress=False)
    summary = s.run(ex)
    return {"mode": mode, "rounds": ex.rounds, "most_in_flight": ex.most,
            "workflows": len(s.state.iterations), "episodes_used": summary["episodes_used"],
            "wall_s": round(time.perf_counter() - t0, 1), "answer": summary["best_workflow_codes"]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--total-episodes", type=int, default=100_000)
    p.add_argument("--batch-workflows", type=int, default=16)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--red-agent", default="B_lineAgent")
    p.add_argument("--device", default="cpu")
    p.add_argument("--modes", nargs="+", default=["lowered", "whole"], choices=["lowered", "whole"])
    p.add_argument("--tiny", action="store_true", help="a smoke test at toy scale (tests/test_benchmarks.py)")
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    rows = []
    for mode in a.modes:
        rows.append(run(mode, a))
        print(json.dumps(rows[-1]), flush=True)
    Path(a.out).mkdir(parents=True, exist_ok=True)
    (Path(a.out) / "claims.json").write_text(json.dumps({"args": vars(a), "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
