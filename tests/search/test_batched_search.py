"""The batched search (``--batch-workflows``, ``--seeds-per-workflow``): budget, interrupt and resume, bad input,
parallel claims and the initial design."""
import csv

import numpy as np
import pytest
from helpers import interrupting_executor, read_log, run_in_process

from workflow_rl.search.batched_executor import BatchedExecutor
from workflow_rl.search.records import split_budget
from workflow_rl.search.records import Proposal
from workflow_rl.search.search import SearchConfig, SearchInterrupted, WorkflowSearch
from workflow_rl.rl.checkpoint import load_checkpoint

_log = read_log


def _claim(workflow: str, budget: int) -> Proposal:
    return Proposal(workflow=workflow, reason="test", budget=budget)


def _tiny(**kw):
    """Caps of 16 episodes (no post-gate phase: the gate cannot fire before min-episodes 5 anyway), so two claims
    fit the 60-episode budget and the slots overlap."""
    base = dict(n_envs=8, max_episodes=2, total_episodes=60, eval_episodes=16, seed=1, n_init=2, batch_workflows=2,
                post_gate_episodes=0)
    base.update(kw)
    return SearchConfig(**base)


@pytest.mark.parametrize("total", [60, 37, 5])
def test_batched_search_spends_the_budget_exactly(tmp_path, total):
    s = WorkflowSearch(_tiny(total_episodes=total), tmp_path, progress=False)
    summary = s.run()
    assert sum(r.episodes_trained for r in s.state.iterations) == summary["episodes_used"] == total
    assert len({r.workflow for r in s.state.iterations}) == len(s.state.iterations)
    assert (tmp_path / "best_policy.pt").exists() and (tmp_path / "report.md").exists()
    # the slots overlapped: the second workflow started before the first finished
    its = sorted(s.state.iterations, key=lambda r: r.iteration)
    if len(its) >= 2:
        assert its[1].started_at < its[0].finished_at


def test_batched_search_interrupt_and_resume(tmp_path):
    cfg = _tiny(total_episodes=120, max_episodes=6)
    s = WorkflowSearch(cfg, tmp_path, progress=False)
    with pytest.raises(SearchInterrupted):
        s.run(interrupting_executor(2, rounds=2))
    assert len(s.state.pending) == 2
    for p in s.state.pending:   # both running workflows saved their progress
        ck = load_checkpoint(tmp_path / p.run_dir / "checkpoints" / "latest.pt")
        assert ck["counters"]["total_episodes"] == 16
    resumed = WorkflowSearch.resume(tmp_path, progress=False)
    summary = resumed.run()
    assert summary["episodes_used"] == 120 == sum(r.episodes_trained for r in resumed.state.iterations)
    first = next(r for r in resumed.state.iterations if r.iteration == 1)
    updates = [int(r["update"]) for r in _log(tmp_path / first.run_dir)]
    assert updates == list(range(1, len(updates) + 1))   # continued, not restarted


@pytest.mark.parametrize("kw,match", [
    (dict(update_every_steps=30), "divide"),
    (dict(batch_workflows=0), "batch-workflows"),
    (dict(vectorization="episodes", update_every_steps=100), "one vector env"),
])
def test_bad_batched_config(tmp_path, kw, match):
    with pytest.raises(ValueError, match=match):
        WorkflowSearch(_tiny(**kw), tmp_path)


def test_cli_ray_and_batch_is_one_line_error(tmp_path):
    r = run_in_process(["search", "--batch-workflows", "2", "--ray", "--out", str(tmp_path / "s")])
    assert r.returncode == 2
    lines = [ln for ln in r.stderr.strip().splitlines() if ln]
    assert len(lines) == 1 and "use one" in lines[0], r.stderr


def test_batched_search_cli(tmp_path):
    r = run_in_process(["search", "--batch-workflows", "3", "--n-envs", "8", "--max-episodes", "2", "--total-episodes",
                        "40", "--eval-episodes", "8", "--n-init", "2", "--out", str(tmp_path / "s"), "--no-progress"])
    assert r.returncode == 0, r.stderr
    assert "40 / 40 episodes" in r.stdout
    assert np.isfinite(float(open(tmp_path / "s" / "best_workflow.json").read().split('"observed_reward": ')[1]
                             .split(",")[0]))


def test_batched_resume_evaluates_a_workflow_trained_before_the_crash(tmp_path, monkeypatch):
    """Killed between a workflow's last checkpoint and its evaluation: --resume evaluates it without retraining."""
    import workflow_rl.search.search as S

    orig = S.evaluate_record

    def crash(*args, **kwargs):
        raise KeyboardInterrupt

    s = WorkflowSearch(_tiny(total_episodes=32), tmp_path, progress=False)
    monkeypatch.setattr(S, "evaluate_record", crash)
    with pytest.raises(KeyboardInterrupt):
        s.run()
    monkeypatch.setattr(S, "evaluate_record", orig)
    first = next(Proposal.from_dict(p) for p in json_state(tmp_path)["pending"] if p["iteration"] == 1)
    rows_before = _log(tmp_path / first.run_dir)
    resumed = WorkflowSearch.resume(tmp_path, progress=False)
    summary = resumed.run()
    assert summary["episodes_used"] == 32 == sum(r.episodes_trained for r in resumed.state.iterations)
    assert _log(tmp_path / first.run_dir) == rows_before   # not trained again


def json_state(path):
    import json
    return json.loads((path / "search_state.json").read_text())


def test_seeds_per_workflow_average_and_keep_the_best_seed(tmp_path):
    s = WorkflowSearch(_tiny(total_episodes=80, seeds_per_workflow=3, batch_workflows=1), tmp_path, progress=False)
    summary = s.run()
    assert summary["episodes_used"] == 80 == sum(r.episodes_trained for r in s.state.iterations)
    for r in s.state.iterations:
        assert r.episodes_trained <= 3 * 8 * 2                      # each seed capped at max_episodes x n_envs
        if r.episodes_trained >= 3:                                  # every seed trained
            assert len(r.seed_rewards) == 3
            assert r.observed_reward == pytest.approx(np.mean(r.seed_rewards))
            kept = int(r.checkpoint.split("seed_")[1].split("/")[0])
            pool = [i for i, x in enumerate(r.seed_status) if x == "compliant"] or range(3)
            assert r.seed_rewards[kept] == max(r.seed_rewards[i] for i in pool)
        assert (tmp_path / r.checkpoint).exists()
    first = s.state.iterations[0]
    logs = [_log(tmp_path / first.run_dir / f"seed_{i}") for i in range(3)]
    assert all(len(rows) > 0 for rows in logs)
    with open(tmp_path / "training_log.csv") as f:
        rows = list(csv.DictReader(f))
    assert {r["seed"] for r in rows if r["iteration"] == "1"} == {"0", "1", "2"}


def test_split_budget():
    assert split_budget(10, 3) == [4, 3, 3] and sum(split_budget(7, 4)) == 7 and split_budget(2, 3) == [1, 1, 0]


def test_only_the_initial_design_trains_from_scratch_in_parallel(tmp_path):
    """Four slots, two initial-design workflows: nothing else starts before both are back (the GP needs two
    results; anything earlier would be a far-off pick)."""
    s = WorkflowSearch(_tiny(total_episodes=96, batch_workflows=4, n_init=2), tmp_path, progress=False)
    s.run()
    its = sorted(s.state.iterations, key=lambda r: r.iteration)
    assert len(its) >= 4
    assert [r.parent is None for r in its[:2]] == [True, True]
    assert all(r.parent is not None for r in its[2:])
    design_done = max(r.finished_at for r in its[:2])
    assert all(r.started_at >= design_done for r in its[2:])
    assert all(r.reason.startswith("UCB") for r in its[2:])


def test_parallel_claims_never_cut_a_workflow_short_before_the_end(tmp_path, make_record):
    """Running workflows claim a full cap each (16 here); a new one waits rather than take a smaller claim, since
    the running ones hand back what they do not use. Only with nothing running is the remainder dispatched."""
    s = WorkflowSearch(_tiny(total_episodes=100, batch_workflows=3), tmp_path, progress=False)
    done = [make_record(w, episodes_trained=16) for w in ("D,E,OS,OH,U", "U,OH,OS,E,D")]
    s.state.iterations, s.state.episodes_used = done, 32
    s.state.pending = [_claim("E,D,OS,OH,U", 16), _claim("D,OS,E,OH,U", 16)]
    assert s.budget_unclaimed == 36 and s._may_dispatch()          # a full cap is free
    s.state.pending.append(_claim("OS,D,E,OH,U", 16))
    s.state.pending.append(_claim("OH,D,E,OS,U", 16))
    assert s.budget_unclaimed == 4 and not s._may_dispatch()       # 4 < 16 while others run: wait
    s.state.pending = []
    s.state.episodes_used = 96
    assert s.budget_unclaimed == 4 and s._may_dispatch()           # nothing running: the last one gets the 4


def test_a_fired_gate_hands_the_rest_of_the_claim_to_a_new_workflow(tmp_path):
    """Caps of 40 (4 episodes per env + 1 post-gate), gates firing at the first episode: once a running workflow's
    gate fires it can use 16 at most, so a third workflow starts while the first two still train (with whole
    claims only two caps fit the 100). The budget is still spent exactly and no workflow exceeds its claim."""
    cfg = _tiny(total_episodes=100, max_episodes=4, post_gate_episodes=1, min_episodes=1, min_fixes=1,
                compliance_threshold=0.01, batch_workflows=4, inherit="none", claims="lowered")
    s = WorkflowSearch(cfg, tmp_path, progress=False)
    seen = []
    orig = s._lower

    def spy(claims):
        changed = orig(claims)
        seen.append([(p.iteration, p.budget, p.seed_budgets) for p in s.state.pending])
        return changed

    s._lower = spy
    summary = s.run()
    its = sorted(s.state.iterations, key=lambda r: r.iteration)
    assert summary["episodes_used"] == 100 == sum(r.episodes_trained for r in its)
    assert cfg.workflow_cap == 40 and len(its) >= 3
    assert its[2].started_at < min(its[0].finished_at, its[1].finished_at)
    lowered = [(i, b, sb) for snap in seen for i, b, sb in snap if sb is not None]
    assert lowered and all(sum(sb) == b < 40 for _, b, sb in lowered)
    for r in its:                             # nobody trained past the claim it was left with
        final = [b for snap in seen for i, b, _ in snap if i == r.iteration]
        assert r.episodes_trained <= min(final, default=40)


@pytest.mark.slow   # two batched searches, one resumed: ~5 s each
@pytest.mark.parametrize("claims", ["lowered", "elastic"])
def test_resumed_workflows_train_within_their_lowered_claims(tmp_path, claims):
    cfg = _tiny(total_episodes=100, max_episodes=4, post_gate_episodes=2, min_episodes=1, min_fixes=1,
                compliance_threshold=0.01, batch_workflows=4, inherit="none", seeds_per_workflow=2, claims=claims)
    s = WorkflowSearch(cfg, tmp_path, progress=False)
    with pytest.raises(SearchInterrupted):
        s.run(interrupting_executor(cfg.batch_slots, rounds=2, seeds=2))   # the slots a resumed search has
    lowered = {p.iteration: p.seed_budgets for p in s.state.pending if p.seed_budgets}
    assert lowered                                   # saved with the state
    resumed = WorkflowSearch.resume(tmp_path, progress=False)
    assert {p.iteration: p.seed_budgets for p in resumed.state.pending if p.seed_budgets} == lowered
    summary = resumed.run()
    assert summary["episodes_used"] == 100 == sum(r.episodes_trained for r in resumed.state.iterations)
    for r in resumed.state.iterations:
        if r.iteration in lowered:
            assert r.episodes_trained <= sum(lowered[r.iteration])


class _Watch(BatchedExecutor):
    """The batched executor, noting each dispatch (iteration, claim, workflows already running) and each top-up."""

    def __init__(self, *args):
        super().__init__(*args)
        self.submits, self.extends = [], []

    def submit(self, prop):
        self.submits.append((prop.iteration, prop.budget, len(self.props)))
        super().submit(prop)

    def extend(self, iteration, seed_budgets):
        self.extends.append((iteration, list(seed_budgets)))
        super().extend(iteration, seed_budgets)


@pytest.mark.slow   # ~8 s
def test_elastic_claims_start_workflows_on_what_is_unclaimed(tmp_path):
    """Caps of 40, gates at the first episode, so a finished workflow costs 16 (1 episode + 1 post-gate, 8 envs):
    with elastic claims (the default) a workflow starts while others run once the median cost is unclaimed,
    holding less than a cap; with lowered claims it waits for a full cap. Either way the budget is spent exactly and
    no workflow trains past its cap; the last one, whose claim cannot grow, waits, is cut where it stands and is
    recorded budget_cut."""
    kw = dict(total_episodes=100, max_episodes=4, post_gate_episodes=1, min_episodes=1, min_fixes=1,
              compliance_threshold=0.01, batch_workflows=4, inherit="none")
    partial = {}
    for claims in ("elastic", "lowered"):
        cfg = _tiny(**kw, claims=claims)
        ex = _Watch(4)
        s = WorkflowSearch(cfg, tmp_path / claims, progress=False)
        summary = s.run(ex)
        its = s.state.iterations
        assert summary["episodes_used"] == 100 == sum(r.episodes_trained for r in its)
        assert all(r.episodes_trained <= cfg.workflow_cap == 40 for r in its)
        partial[claims] = [b for _, b, running in ex.submits if b < cfg.workflow_cap and running]
        last = max(its, key=lambda r: r.iteration)
        assert last.status == "budget_cut" and last.episodes_trained == ex.submits[-1][1]
    assert partial["elastic"] and not partial["lowered"]
    assert SearchConfig().claims == "elastic"


class _Needs:
    """What ``_top_up`` reads of an executor: each running workflow's needs; records the top-ups."""

    def __init__(self, needs):
        self._needs, self.extended = needs, []

    def needs(self):
        return self._needs

    def extend(self, iteration, seed_budgets):
        self.extended.append((iteration, seed_budgets))


def test_top_ups_go_to_the_oldest_workflow_first_and_never_exceed_the_budget(tmp_path):
    s = WorkflowSearch(_tiny(total_episodes=100, seeds_per_workflow=2), tmp_path, progress=False)
    s.state.pending = [_claim(w, b).dispatched(it, None, b)
                       for w, b, it in (("OS,D,E,OH,U", 20, 2), ("OH,D,E,OS,U", 30, 1), ("D,E,OS,OH,U", 10, 3))]
    s.state.episodes_used = 25                       # 75 left, 60 claimed: 15 to share out
    ex = _Needs({1: [20, 20], 2: [16, 16], 3: [5, 5]})   # 1 needs +10, 2 needs +12, 3 has more than it needs
    assert s._top_up(ex)
    assert ex.extended == [(1, [20, 20]), (2, [15, 10])]   # oldest in full, then what is left, seed by seed
    assert s.budget_unclaimed == 0 and {p.iteration: p.budget for p in s.state.pending} == {1: 40, 2: 25, 3: 10}
    assert not s._top_up(ex)                         # nothing left: no change
