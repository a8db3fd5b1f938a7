"""Issue G: the value protocol, the confidence set, the multiple-comparison test, per-sample GP noise, the random
strategy, the ground truth and regret, bad ground-truth input."""
import csv
import json

import numpy as np
import pytest

from workflow_rl.rl.config import TrainConfig
from workflow_rl.rl.schedule import gate_fires, passed_gate, stop_rule
from workflow_rl.search.answer import best_record, confidence_set
from workflow_rl.search.config import LEGACY_SETTINGS, STRATEGIES, SearchConfig
from workflow_rl.search.ground_truth import COLUMNS, load_ground_truth, score_answer, \
    write_ground_truth
from workflow_rl.search.gp import fit_gp, posterior, seed_noise
from workflow_rl.search.search import WorkflowSearch
from workflow_rl.search.stats import (distinguishable_from_best, holm, median_interval, posterior_confidence_set,
                                     workflow_effect)
from workflow_rl.workflow import all_workflows
from helpers import REPO, run_in_process

ROOT = REPO


# ---------------------------------------------------------------------------------------------- the protocol
def test_stop_rule_trains_exactly_the_post_gate_budget_after_the_gate():
    cfg = TrainConfig(n_envs=10, max_episodes=8, post_gate_episodes=5)
    assert stop_rule(cfg, 3, 30, None) is None
    assert stop_rule(cfg, 8, 80, None) == "max_episodes"          # never passed the gate
    gate = 7                                                       # fired at 7 per env: the cap no longer applies
    assert [stop_rule(cfg, gate + k, (gate + k) * 10, gate) for k in range(6)] == [None] * 5 + ["post_gate"]
    assert stop_rule(TrainConfig(post_gate_episodes=0), 5, 1000, 5) == "compliant"      # old behaviour
    assert stop_rule(TrainConfig(n_envs=10, num_episodes=90, post_gate_episodes=5), 8, 90, 7) == "budget"
    assert passed_gate("post_gate") and passed_gate("compliant") and not passed_gate("budget")
    assert cfg.budget == (8 + 5) * 10


def test_gate_needs_every_condition():
    cfg = TrainConfig(min_episodes=5, min_fixes=10, compliance_threshold=0.9)
    assert gate_fires(cfg, True, 5, 10, 0.9)
    assert not gate_fires(cfg, False, 5, 10, 0.9)
    assert not gate_fires(cfg, True, 4, 10, 0.9)
    assert not gate_fires(cfg, True, 5, 9, 0.9)
    assert not gate_fires(cfg, True, 5, 10, 0.89)


@pytest.mark.slow
def test_trainer_runs_exactly_post_gate_episodes_after_the_gate(tmp_path):
    from workflow_rl.rl.trainer import Trainer

    cfg = TrainConfig(n_envs=4, max_episodes=2, min_episodes=1, min_fixes=1, compliance_threshold=0.01,
                      post_gate_episodes=3, update_every_steps=25)
    s = Trainer(cfg, tmp_path, progress=False).run()
    assert s["stop_reason"] == "post_gate" and s["compliant"]
    assert s["episodes"] - s["gate_episodes"] == 3 * 4


def test_old_search_state_keeps_the_protocol_it_ran_with():
    old = SearchConfig().to_dict()
    for k in LEGACY_SETTINGS:
        old.pop(k)
    cfg = SearchConfig.from_dict(old)
    assert cfg.train.post_gate_episodes == 0 and cfg.strategy == "gp-ucb" and cfg.claims == "lowered"
    assert SearchConfig().train.post_gate_episodes > 0          # a new search uses the protocol
    assert SearchConfig(max_episodes=4, n_envs=10, post_gate_episodes=6, seeds_per_workflow=2).workflow_cap == 200


# ------------------------------------------------------------------------------------------- statistics
def test_holm_step_down():
    assert holm([0.01, 0.04, 0.03, None]) == [True, False, False, False]     # 0.01 <= .05/4; .03 > .05/3
    assert holm([0.001, 0.01, 0.02]) == [True, True, True]                     # .001<=.0167, .01<=.025, .02<=.05
    assert holm([0.03, 0.03]) == [False, False]                                # .03 > .05/2


def test_welch_holm_separates_known_gaps():
    rng = np.random.default_rng(0)
    samples = {"A": list(10 + rng.normal(0, 0.5, 5)), "B": list(9.9 + rng.normal(0, 0.5, 5)),
               "C": list(0 + rng.normal(0, 0.5, 5)), "D": [5.0]}
    best, tests = distinguishable_from_best(samples)
    assert best == "A"
    assert tests["C"][0] and not tests["B"][0]       # far one excluded, close one not
    assert tests["D"] == (False, None)               # one seed: untestable, never excluded


def test_posterior_confidence_set_excludes_only_clearly_worse():
    mu = np.array([10.0, 9.9, 0.0, 5.0])
    cov = np.diag([0.1, 0.1, 0.1, 100.0])
    assert posterior_confidence_set(mu, cov, 0, [0, 1, 2, 3]) == [0, 1, 3]   # 2 is worse; 3 too uncertain
    corr = np.array([[1.0, 0.999], [0.999, 1.0]])                             # strongly correlated pair
    assert posterior_confidence_set(np.array([1.0, 0.8]), corr, 0, [0, 1]) == [0]


def test_median_interval_order_statistics():
    assert median_interval(list(range(10))) == (4.5, 1.0, 8.0)
    assert median_interval(list(range(100)))[1:] == (39.0, 60.0)
    assert median_interval([3.0, 1.0, 2.0]) == (2.0, 1.0, 3.0)          # too few: the range


# -------------------------------------------------------------------------------------------- GP noise
def test_per_sample_noise_widens_the_posterior_at_a_noisy_point():
    ws = all_workflows()[:6]
    y = np.array([1.0, 2, 3, 4, 5, 10])
    precise = fit_gp(ws, y, noise_var=np.full(6, 0.01))
    noisy = fit_gp(ws, y, noise_var=np.array([0.01] * 5 + [100.0]))
    mu_p, sd_p = posterior(precise)
    mu_n, sd_n = posterior(noisy)
    k = ws[5].index
    assert sd_n[k] > 2 * sd_p[k]
    assert abs(mu_p[k] - 10) < 0.5 and mu_n[k] < 8        # the noisy outlier no longer pins the mean
    assert "WhiteKernel" not in str(precise.kernel_) and "WhiteKernel" in str(fit_gp(ws, y).kernel_)


def test_seed_noise_needs_two_seeds_everywhere():
    assert seed_noise([[1.0, 3.0], [2.0, 2.0]]).tolist() == [1.0, 0.0]
    assert seed_noise([[1.0, 3.0], [2.0]]) is None


# --------------------------------------------------------------------------------- answer, eligibility
def test_answer_is_eligible_and_set_holds_it(make_record):
    recs = [make_record("D,E,OS,OH,U", observed_reward=-10.0, seed_rewards=[-10.1, -9.9], eval_compliance=0.99),
            make_record("U,OH,OS,E,D", observed_reward=-5.0, seed_rewards=[-5.1, -4.9], eval_compliance=0.5),
            make_record("E,D,OS,OH,U", observed_reward=-60.0, seed_rewards=[-60.1, -59.9], eval_compliance=1.0)]
    assert best_record(recs, 0.95).workflow == "D,E,OS,OH,U"          # -5 is not compliant in evaluation
    cs = confidence_set(recs, 0.95, seed=0)
    assert cs["workflows"][0] == "D,E,OS,OH,U"
    assert "U,OH,OS,E,D" not in cs["workflows"]                        # ineligible: never in the set
    assert "E,D,OS,OH,U" not in cs["workflows"]                        # 50 worse, se 0.07: excluded
    assert "per-seed" in cs["method"]
    assert len(confidence_set(recs[:1], 0.95, 0)["workflows"]) == 120  # one observation excludes nothing


# ------------------------------------------------------------------------------------------- strategies
def test_answer_line_names_the_excluded_workflows_when_the_set_holds_most_of_them():
    from workflow_rl.search.outputs import answer_line

    codes = [w.codes for w in all_workflows()]
    summary = {"best_workflow_codes": codes[0], "best_reward": -16.0, "best_ci95": 0.4, "best_is_eligible": True,
               "best_seeds": 1, "confidence_set": codes[:117]}
    line = answer_line(summary)
    assert line.startswith(f"answer: {codes[0]} -16.00 ± 0.40 (one seed's episodes) |")
    assert line.endswith(f"117 of 120 workflow(s), all but 3: {', '.join(codes[117:])}")
    small = answer_line({**summary, "confidence_set": codes[:10], "best_seeds": 3})
    assert "(one seed" not in small and small.endswith(f"10 of 120 workflow(s), {', '.join(codes[:8])}, ... (+2; "
                                                       "all in summary.json)")


def test_random_strategy_never_repeats_and_is_reproducible(tmp_path, make_record):
    s = WorkflowSearch(SearchConfig(strategy="random", n_envs=8, seed=3), tmp_path, progress=False)
    picks = []
    for it in range(120):
        p = s.propose()
        assert p.reason.startswith("random among")
        picks.append(p.workflow)
        s.state.dispatched += 1
        s.state.iterations.append(make_record(p.workflow, iteration=it + 1))
    assert len(set(picks)) == 120 and s.propose() is None
    s2 = WorkflowSearch(SearchConfig(strategy="random", n_envs=8, seed=3), tmp_path / "b", progress=False)
    assert s2.propose().workflow == picks[0]


def test_strategy_names_match_their_implementations(tmp_path):
    assert set(WorkflowSearch(SearchConfig(), tmp_path)._strategies()) == set(STRATEGIES)


# ----------------------------------------------------------------------------------- ground truth, regret
def _gt(tmp_path, make_record, **protocol):
    cfg = SearchConfig(**protocol)
    recs = [make_record("D,E,OS,OH,U", seed_rewards=[-10.0, -10.2, -9.8], observed_reward=-10.0),
            make_record("E,D,OS,OH,U", seed_rewards=[-10.5, -9.5, -10.0], observed_reward=-10.0 - 1e-9),
            make_record("U,OH,OS,E,D", seed_rewards=[-30.0, -31.0, -29.0], observed_reward=-30.0),
            make_record("OH,U,OS,E,D", seed_rewards=[-1.0, -1.0, -1.0], observed_reward=-1.0, status="not_compliant")]
    path = tmp_path / "ground_truth.csv"
    write_ground_truth(recs, cfg, path)
    return cfg, path


def test_ground_truth_columns_and_decisions(tmp_path, make_record):
    cfg, path = _gt(tmp_path, make_record)
    with open(path) as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == COLUMNS
    by = {r["workflow"]: r for r in rows}
    assert rows[0]["workflow"] == "D,E,OS,OH,U" and by["D,E,OS,OH,U"]["rank"] == "1"
    assert by["E,D,OS,OH,U"]["distinguishable_from_best"] == "False"
    assert by["U,OH,OS,E,D"]["distinguishable_from_best"] == "True"
    assert by["OH,U,OS,E,D"]["eligible"] == "False" and by["OH,U,OS,E,D"]["rank"] == ""
    assert by["D,E,OS,OH,U"]["n_seeds"] == "3" and float(by["D,E,OS,OH,U"]["ci95"]) > 0


def test_regret_and_rank(tmp_path, make_record):
    cfg, path = _gt(tmp_path, make_record)
    table = load_ground_truth(path, cfg)
    assert score_answer(table, "D,E,OS,OH,U")["regret"] == 0.0
    s = score_answer(table, "U,OH,OS,E,D")
    assert s["regret"] == pytest.approx(20.0) and s["answer_rank"] == 3 and s["answer_in_top_set"] is False
    assert score_answer(table, "E,D,OS,OH,U")["answer_in_top_set"] is True
    missing = score_answer(table, "OS,OH,E,D,U")
    assert missing["regret"] is None and missing["answer_rank"] is None      # not in the file: not guessed
    bad = score_answer(table, "OH,U,OS,E,D")       # scores -1 (best of all) but never complied: not a valid answer
    assert bad["regret"] is None and bad["answer_eligible_in_ground_truth"] is False and not bad["answer_in_top_set"]


@pytest.mark.parametrize("content,match", [
    (None, "no such file"), ("a,b\n1,2\n", "missing columns"), ("", "no rows"),
])
def test_bad_ground_truth_file(tmp_path, content, match):
    path = tmp_path / "gt.csv"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ValueError, match=match):
        load_ground_truth(path, SearchConfig())


def test_ground_truth_of_another_protocol_is_refused(tmp_path, make_record):
    _, path = _gt(tmp_path, make_record, red_agent="RedMeanderAgent")
    with pytest.raises(ValueError, match="red_agent"):
        load_ground_truth(path, SearchConfig())
    _, path = _gt(tmp_path, make_record, post_gate_episodes=7)
    with pytest.raises(ValueError, match="post_gate_episodes"):
        load_ground_truth(path, SearchConfig())


def test_cli_bad_ground_truth_is_one_error_line(tmp_path, make_record):
    _, other = _gt(tmp_path, make_record, red_agent="RedMeanderAgent")
    bad = tmp_path / "bad.csv"
    bad.write_text("\x00garbage")
    for gt, match in ((tmp_path / "none.csv", "no such file"), (bad, "not a ground_truth.csv"),
                      (other, "red_agent")):
        r = run_in_process(["search", "--ground-truth", str(gt), "--out", str(tmp_path / "s")])
        assert r.returncode == 2 and r.stderr.startswith("error:") and match in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1


# ------------------------------------------------------------------------------------ end to end (toy)
@pytest.mark.slow
def test_regret_benchmark_at_toy_scale(tmp_path):
    """The prepared experiment: a 2-workflow, 2-seed ground truth, then 2 strategies x 1 budget x 2 search seeds
    against it; a rerun skips every finished search."""
    toy = ["--n-envs", "4", "--max-episodes", "2", "--min-episodes", "1", "--min-fixes", "1",
           "--compliance-threshold", "0.01", "--post-gate-episodes", "1", "--eval-episodes", "8"]
    script = str(ROOT / "benchmarks" / "studies" / "regret.py")
    r = run_in_process(["ground-truth", "--seeds-per-workflow", "2", "--out", str(tmp_path / "gt"), "--workflows",
                        "D,E,OS,OH,U;U,OH,OS,E,D;E,D,OS,OH,U", *toy, "--total-episodes", "200"], script=script,
                       cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    gt = tmp_path / "gt" / "ground_truth.csv"
    args = ["runs", "--ground-truth", str(gt), "--budgets", "24", "--search-seeds", "2", "--out",
            str(tmp_path / "reg"), "--workflows", "D,E,OS,OH,U;U,OH,OS,E,D", *toy]
    r = run_in_process(args, script=script, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    with open(tmp_path / "reg" / "regret.csv") as f:
        rows = list(csv.DictReader(f))
    assert [(x["strategy"], x["search_seed"]) for x in rows] == [("gp-ucb", "0"), ("gp-ucb", "1"),
                                                                  ("random", "0"), ("random", "1")]
    assert all(int(x["episodes_used"]) <= 24 for x in rows)
    assert "| gp-ucb | 24 |" in (tmp_path / "reg" / "regret.md").read_text()
    summary = json.loads((tmp_path / "reg" / "gp-ucb-24-seed0" / "summary.json").read_text())
    assert {"confidence_set", "regret", "answer_rank"} <= set(summary)
    stamp = (tmp_path / "reg" / "gp-ucb-24-seed0" / "summary.json").stat().st_mtime
    r = run_in_process(args, script=script, cwd=ROOT)
    assert r.returncode == 0 and (tmp_path / "reg" / "gp-ucb-24-seed0" / "summary.json").stat().st_mtime == stamp


def test_workflow_effect_matches_scipy_anova_and_finds_a_real_effect():
    from scipy.stats import f_oneway

    rng = np.random.default_rng(3)
    groups = {f"w{i}": list(rng.normal(i * 1.0, 1.0, size=3 + i % 2)) for i in range(8)}   # unbalanced
    e = workflow_effect(groups)
    ref = f_oneway(*groups.values())
    assert e["f"] == pytest.approx(ref.statistic) and e["p"] == pytest.approx(ref.pvalue)
    assert e["p"] < 1e-6 and e["between_sd"] > 1.5 and e["between_sd_upper"] > e["between_sd"]


def test_workflow_effect_upper_bound_covers_the_true_spread_about_95_percent_of_the_time():
    rng = np.random.default_rng(0)
    covered, nulls = 0, []
    for _ in range(400):
        true = rng.normal(0.0, 0.5, size=30)   # 30 workflows whose values spread with sd 0.5; 3 seeds of sd 1.8
        covered += workflow_effect({str(i): list(t + rng.normal(0, 1.8, 3)) for i, t in enumerate(true)}
                                   )["between_sd_upper"] >= 0.5
        nulls.append(workflow_effect({str(i): list(rng.normal(0, 1.8, 3)) for i in range(30)})["p"])
    assert 0.91 <= covered / 400 <= 0.99
    assert 0.02 <= np.mean(np.array(nulls) < 0.05) <= 0.09   # no effect: p below 0.05 about 5% of the time


def test_workflow_effect_needs_seeds_and_two_workflows():
    assert workflow_effect({"a": [1.0, 2.0]}) is None
    assert workflow_effect({"a": [1.0], "b": [2.0]}) is None
