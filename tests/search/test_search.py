"""GP-UCB search: the GP against closed form, kernel definiteness, UCB, budget, resume, inheritance, bad input."""
import csv
import json

import numpy as np
import pytest
from helpers import run_in_process

from workflow_rl.search import gp as G
from workflow_rl.search.search import SearchConfig, WorkflowSearch
from workflow_rl.workflow import Workflow, all_workflows, kendall


def test_mallows_kernel_is_positive_definite_on_all_120():
    X = G.features()
    for ls in (0.5, 3.0, 30.0):
        K = G.mallows_kernel(1.0, ls, 1e-10, fixed=True)(X)
        assert np.linalg.eigvalsh(K).min() > 0
        # it is an RBF in Kendall distance: ||phi(a) - phi(b)||^2 = 40 * Kendall(a, b)
        ws = all_workflows()
        assert np.isclose(K[0, 7], np.exp(-40 * kendall(ws[0], ws[7]) / (2 * ls * ls)) + (1e-10 if 0 == 7 else 0))


def test_gp_posterior_matches_closed_form_at_fixed_hyperparameters():
    rng = np.random.default_rng(0)
    ws = [all_workflows()[i] for i in rng.choice(120, 12, replace=False)]
    y = rng.normal(-50, 20, 12)
    s2, ls, noise = 1.7, 2.5, 0.05
    gp = G.fit_gp(ws, y, kernel=G.mallows_kernel(s2, ls, noise, fixed=True))
    mu, sd = G.posterior(gp)
    # closed form on standardised targets (normalize_y), then back to the original scale
    m, s = y.mean(), y.std()
    X, Xs = G.features(ws), G.features()

    def k(a, b):
        d2 = ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1)
        return s2 * np.exp(-d2 / (2 * ls * ls))

    K = k(X, X) + noise * np.eye(len(ws))
    Ks = k(Xs, X)
    alpha = np.linalg.solve(K, (y - m) / s)
    mean = Ks @ alpha * s + m
    var = (s2 + noise - np.einsum("ij,ji->i", Ks, np.linalg.solve(K, Ks.T))) * s * s
    assert np.allclose(mu, mean, atol=1e-6)
    assert np.allclose(sd, np.sqrt(var), atol=1e-6)


def test_ucb_picks_the_argmax_of_untried():
    mu = np.zeros(120)
    sd = np.ones(120)
    mu[5], mu[9] = 3.0, 2.0
    assert G.ucb_select(mu, sd, 4.0, exclude=set()) == 5
    assert G.ucb_select(mu, sd, 4.0, exclude={5}) == 9
    sd[30] = 10.0
    assert G.ucb_select(mu, sd, 4.0, exclude={5}) == 30   # exploration wins with a large std


def test_srinivas_beta_grows_with_t():
    assert 0 < G.srinivas_beta(1) < G.srinivas_beta(2) < G.srinivas_beta(50)


def test_initial_design_is_spread_out():
    d = G.initial_design(3)
    assert d[0] == Workflow.parse("critical_first")
    assert kendall(d[0], d[1]) == 1.0          # the reverse order comes second
    assert len(set(d)) == 3


def test_design_start_sets_the_first_design_point_and_random_draws_it_from_the_seed(tmp_path):
    def design(**kw):
        s = WorkflowSearch(_tiny(n_init=3, **kw), tmp_path, progress=False)
        first = s.propose()
        s.state.pending.append(first.dispatched(1, None, 16))
        s.state.dispatched = 1
        return Workflow.parse(first.workflow), Workflow.parse(s.propose().workflow)

    assert design(design_start="critical_first")[0] == Workflow.parse("critical_first")
    assert SearchConfig().design_start == "random"                         # the default (RESULTS.md, issue G)
    old = SearchConfig.from_dict({k: v for k, v in SearchConfig().to_dict().items() if k != "design_start"})
    assert old.design_start == "critical_first"                            # a state saved before it resumes as it ran
    assert design(design_start="U,OH,OS,E,D") == (Workflow.parse("U,OH,OS,E,D"), Workflow.parse("D,E,OS,OH,U"))
    starts = {design(design_start="random", seed=k)[0] for k in range(12)}
    assert len(starts) >= 8                                                # seeds start apart
    assert design(design_start="random", seed=5) == design(design_start="random", seed=5)   # and reproducibly
    a, b = design(design_start="random", seed=3)
    assert kendall(a, b) == 1.0                                            # then farthest point: the reverse
    with pytest.raises(ValueError, match="--design-start"):
        _tiny(design_start="X,Y").validate()


def _tiny(**kw):
    base = dict(n_envs=8, max_episodes=2, total_episodes=60, eval_episodes=16, seed=1, n_init=2)
    base.update(kw)
    return SearchConfig(**base)


def _gp_log(path):
    with open(path / "gp_sampling_log.csv") as f:
        return [{k: v for k, v in r.items() if k != "wall_time"} for r in csv.DictReader(f)]


@pytest.mark.parametrize("total,n_envs,cap", [(60, 8, 2), (37, 8, 2), (5, 8, 2), (100, 16, 3)])
def test_budget_never_exceeded_and_spent_exactly(tmp_path, total, n_envs, cap):
    s = WorkflowSearch(_tiny(total_episodes=total, n_envs=n_envs, max_episodes=cap), tmp_path, progress=False)
    summary = s.run()
    trained = sum(r.episodes_trained for r in s.state.iterations)
    assert trained == summary["episodes_used"] == total
    assert all(r.episodes_trained <= n_envs * cap for r in s.state.iterations)
    assert len({r.workflow for r in s.state.iterations}) == len(s.state.iterations)   # nothing retried


def test_outputs_and_gp_log(tmp_path):
    s = WorkflowSearch(_tiny(), tmp_path, progress=False)
    summary = s.run()
    for f in ("gp_sampling_log.csv", "training_log.csv", "best_workflow.json", "best_policy.pt", "summary.json",
              "report.md", "plots/learning_curves.png", "plots/gp_posterior.png", "plots/reward_per_iteration.png"):
        assert (tmp_path / f).exists(), f
    log = _gp_log(tmp_path)
    assert [r["reason"].split(" ")[0] for r in log[:3]] == ["initial", "initial", "UCB"]
    assert log[2]["ucb_score"] != "" and float(log[2]["posterior_std"]) >= 0
    saved = json.loads((tmp_path / "summary.json").read_text())
    assert set(saved) >= {"best_workflow", "best_reward", "episodes_used", "total_episodes", "workflows_evaluated"}
    assert saved["workflows_evaluated"] == len(log) == summary["workflows_evaluated"]


@pytest.mark.slow   # two searches (~7 s)
def test_resume_equals_uninterrupted(tmp_path):
    full = WorkflowSearch(_tiny(), tmp_path / "full", progress=False)
    full.run()
    part = WorkflowSearch(_tiny(max_iterations=2), tmp_path / "part", progress=False)
    part.run()
    assert len(part.state.iterations) == 2
    first_session = json.loads((tmp_path / "part" / "search_state.json").read_text())["wall_seconds"]
    assert first_session > 0
    resumed = WorkflowSearch.resume(tmp_path / "part", progress=False, max_iterations=None)
    resumed.state.finished = False
    summary = resumed.run()
    assert _gp_log(tmp_path / "full") == _gp_log(tmp_path / "part")
    # the summary's wall time counts every session: a finished search resumed (only its files written again)
    # reports the time it took, not the instant of its last session
    assert summary["wall_time_s"] > first_session
    again = WorkflowSearch.resume(tmp_path / "part", progress=False).run()
    assert again["wall_time_s"] >= summary["wall_time_s"]


def test_inheritance_picks_nearest_trained_workflow(tmp_path, make_record):
    s = WorkflowSearch(_tiny(), tmp_path, progress=False)
    a, b = Workflow.parse("D,E,OS,OH,U"), Workflow.parse("U,OH,OS,E,D")
    s.state.iterations = [make_record(a.codes), make_record(b.codes)]
    assert s._parent(Workflow.parse("E,D,OS,OH,U")).workflow == a.codes     # Kendall 0.1 vs 0.9
    assert s._parent(Workflow.parse("OH,U,OS,E,D")).workflow == b.codes
    s.cfg.inherit = "previous"
    assert s._parent(Workflow.parse("E,D,OS,OH,U")).workflow == b.codes
    s.cfg.inherit = "none"
    assert s._parent(Workflow.parse("E,D,OS,OH,U")) is None


@pytest.mark.parametrize("kw,match", [
    (dict(total_episodes=0), "total-episodes"),
    (dict(red_agent="zerg"), "unknown red agent"),
    (dict(gp_beta=-1.0), "gp-beta"),
    (dict(inherit="parent"), "inherit"),
])
def test_bad_search_config(tmp_path, kw, match):
    with pytest.raises(ValueError, match=match):
        WorkflowSearch(_tiny(**kw), tmp_path)


def test_cli_search_bad_input_one_line(tmp_path):
    for args, match in ((["--total-episodes", "0"], "total-episodes"), (["--gp-beta", "-2"], "gp-beta"),
                        (["--red-agent", "x"], "unknown red agent")):
        r = run_in_process(["search", *args, "--out", str(tmp_path / "never")])
        assert r.returncode == 2 and r.stderr.startswith("error:") and match in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1


def test_init_checkpoint_is_the_shared_starting_point(tmp_path):
    from workflow_rl.rl.checkpoint import CheckpointError, load_checkpoint
    from workflow_rl.rl.config import TrainConfig
    from workflow_rl.rl.trainer import Trainer

    base = Trainer(TrainConfig(workflow=None, n_envs=8, max_episodes=1), tmp_path / "base", progress=False)
    base.run()
    ck = tmp_path / "base" / "checkpoints" / "latest.pt"
    s = WorkflowSearch(_tiny(workflows=["D,E,OS,OH,U", "U,OH,OS,E,D"], init_checkpoint=str(ck), total_episodes=16,
                             max_episodes=1), tmp_path / "exh", progress=False)
    s.run()
    assert [r.parent for r in s.state.iterations] == [None, None]    # exhaustive: no inheritance
    assert all(r.episodes_trained == 8 for r in s.state.iterations)
    with pytest.raises(CheckpointError, match="no checkpoint"):
        WorkflowSearch(_tiny(init_checkpoint=str(tmp_path / "nope.pt")), tmp_path / "x")
    assert load_checkpoint(ck)["workflow"] is None
