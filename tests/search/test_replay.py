"""Replaying searches against a finished ground truth (``search.ground_truth_replay``): the real search loop, training looked up."""
import numpy as np
import pytest

from workflow_rl.search.config import SearchConfig
from workflow_rl.search.ground_truth import write_ground_truth
from workflow_rl.search.records import Proposal, SearchState
from workflow_rl.search.ground_truth_replay import load_exhaustive, replay_search, replayed_record, seed_costs
from workflow_rl.workflow import Workflow, all_workflows
from helpers import REPO, run_in_process

EPISODES = 3000   # per workflow, its 3 seeds together


def true_value(codes: str) -> float:
    """Structured values: the later the user hosts, the better (tiers 5 apart), plus a small per-workflow term."""
    order = codes.split(",")
    return -10.0 - 5.0 * (4 - order.index("U")) - 0.01 * (sum(ord(c) * i for i, c in enumerate(codes)) % 50)


@pytest.fixture
def ground_truth_run(tmp_path, make_record):
    """A finished exhaustive run (search_state.json + ground_truth.csv) over all 120 workflows, 3 seeds each."""
    codes = [w.codes for w in all_workflows()]
    cfg = SearchConfig(workflows=codes, seeds_per_workflow=3, n_envs=10, post_gate_episodes=50)   # gate 500 + 500
    recs = []
    for i, c in enumerate(codes):
        v = true_value(c)
        seeds = [v - 0.3, v, v + 0.3]
        bad = c.startswith("OH")          # never complies: ineligible whatever it scores
        recs.append(make_record(c, iteration=i + 1, observed_reward=v, seed_rewards=seeds,
                                seed_status=["not_compliant" if bad else "compliant"] * 3,
                                status="not_compliant" if bad else "compliant", seed_eval_compliance=[0.97] * 3,
                                eval_compliance=0.97, episodes_trained=EPISODES, gate_episodes=[500] * 3))
    SearchState(config=cfg.to_dict(), iterations=recs, episodes_used=EPISODES * 120, dispatched=120,
                finished=True).save(tmp_path / "search_state.json")
    write_ground_truth(recs, cfg, tmp_path / "ground_truth.csv")
    return tmp_path


def test_a_replayed_workflow_observes_recorded_seeds_and_costs_what_they_cost(make_record):
    truth = make_record("D,E,OS,OH,U", seed_rewards=[-1.0, -2.0, -3.0], seed_status=["compliant"] * 3,
                        seed_eval_compliance=[0.9, 1.0, 0.8], episodes_trained=3000, gate_episodes=[1, 2, 3])
    prop = Proposal(workflow="D,E,OS,OH,U", reason="x", iteration=4, run_dir="w", budget=5000)
    rec = replayed_record(prop, truth, 2, np.random.default_rng(0))
    assert len(rec.seed_rewards) == 2 and set(rec.seed_rewards) < {-1.0, -2.0, -3.0}
    assert rec.observed_reward == pytest.approx(np.mean(rec.seed_rewards)) and rec.episodes_trained == 2000
    assert rec.status == "compliant" and rec.iteration == 4
    short = replayed_record(prop.__class__(**{**prop.to_dict(), "budget": 500}), truth, 1, np.random.default_rng(0))
    assert short.episodes_trained == 500 and short.status == "budget_cut"
    with pytest.raises(ValueError, match="at most --seeds-per-workflow 3"):
        replayed_record(prop, truth, 4, np.random.default_rng(0))


def test_each_seed_costs_its_gate_plus_the_post_gate_phase_or_its_cap(make_record):
    truth = make_record("D,E,OS,OH,U", seed_rewards=[-1.0, -2.0, -3.0],
                        seed_status=["compliant", "not_compliant", "compliant"], gate_episodes=[1000, None, 1500],
                        episodes_trained=1400 + 10_000 + 1900, seed_eval_compliance=[1.0, 0.5, 1.0])
    costs = seed_costs(truth, post_gate_episodes=40, n_envs=10)
    assert costs == [1400, 10_000, 1900]
    prop = Proposal(workflow="D,E,OS,OH,U", reason="x", iteration=1, run_dir="w", budget=3000)
    rec = replayed_record(prop, truth, 3, np.random.default_rng(0), costs)    # 1,000 of the claim per seed
    assert rec.seed_status == ["budget_cut"] * 3 and rec.episodes_trained == 3000
    prop = Proposal(workflow="D,E,OS,OH,U", reason="x", iteration=1, run_dir="w", budget=3 * 1500)
    rec = replayed_record(prop, truth, 3, np.random.default_rng(0), costs)
    assert rec.seed_status == ["compliant", "budget_cut", "budget_cut"]   # only the cheap seed fits its share
    assert rec.episodes_trained == 1400 + 1500 + 1500 and rec.status == "budget_cut"


def test_replayed_search_spends_its_budget_and_is_scored_against_the_ground_truth(ground_truth_run):
    r = replay_search(ground_truth_run, seed=1, strategy="random", total_episodes=10_000)
    assert r["workflows_evaluated"] == 10 and r["episodes_used"] == 10_000   # 1,000 episodes per seed
    best = max(true_value(w.codes) for w in all_workflows() if not w.codes.startswith("OH"))
    assert r["regret"] == pytest.approx(best - true_value(r["answer"])) and r["regret"] >= 0
    assert replay_search(ground_truth_run, seed=1, strategy="random", total_episodes=10_000) == r   # deterministic


@pytest.mark.slow   # ~7 s
def test_a_replayed_search_that_sees_everything_finds_a_best_workflow_up_to_seed_noise(ground_truth_run):
    r = replay_search(ground_truth_run, seed=0, strategy="gp-ucb", total_episodes=120 * 1000)
    assert r["workflows_evaluated"] == 120
    assert not r["answer"].startswith("OH") and r["regret"] <= 0.6 + 1e-9   # one seed drawn: within +-0.3 of truth


def test_replay_refuses_an_unfinished_ground_truth(ground_truth_run):
    state = SearchState.load(ground_truth_run / "search_state.json")
    state.iterations, state.episodes_used = state.iterations[:50], EPISODES * 50
    state.save(ground_truth_run / "search_state.json")
    with pytest.raises(ValueError, match="holds 50 of 120 workflows"):
        load_exhaustive(ground_truth_run)


def test_regret_benchmark_replay_writes_a_table_per_strategy_and_budget(ground_truth_run, tmp_path):
    import csv

    root = REPO
    studies = root / "benchmarks" / "studies"
    out = tmp_path / "replay"
    r = run_in_process(["replay", "--ground-truth-run", str(ground_truth_run), "--budgets", "6000", "--search-seeds",
                        "3", "--out", str(out)], script=studies / "regret.py", cwd=root)
    assert r.returncode == 0, r.stderr[-2000:]
    with open(out / "replay.csv") as f:
        rows = list(csv.DictReader(f))
    assert [(x["strategy"], x["search_seed"]) for x in rows] == [("gp-ucb", "0"), ("gp-ucb", "1"), ("gp-ucb", "2"),
                                                                  ("random", "0"), ("random", "1"), ("random", "2")]
    assert all(x["episodes_used"] == "6000" and float(x["regret"]) >= 0 for x in rows)
    md = (out / "replay.md").read_text()
    assert "| gp-ucb | 6,000 | 3 (3 scored) |" in md and "| random | 6,000 | 3 (3 scored) |" in md
    assert "- budget 6,000: gp-ucb median regret" in md and "Mann-Whitney" in md
    assert "distinct answers" in md and "median held-out regret" in md and "the ground truth's noise included" in md
    again = run_in_process(["table", str(out / "replay.csv"), "--ground-truth", str(ground_truth_run /
                            "ground_truth.csv"), "--figure", str(out / "fig.png")], script=studies / "regret.py",
                           cwd=root)
    assert again.returncode == 0 and again.stdout.strip() == md.strip()   # the table is rebuilt from the CSV alone
    assert (out / "fig.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_held_out_regret_values_the_answer_by_the_seeds_the_search_did_not_see(ground_truth_run):
    for seed in range(4):
        r = replay_search(ground_truth_run, seed=seed, strategy="random", total_episodes=10_000)
        # seeds v-0.3, v, v+0.3: whichever one was observed, the other two average to v+0.15, v or v-0.15
        assert min(abs(r["heldout_regret"] - r["regret"] - d) for d in (-0.15, 0.0, 0.15)) < 1e-6


def test_noise_aware_comparison_counts_the_ground_truths_error_of_each_answered_workflow(tmp_path):
    import csv
    import importlib.util

    spec = importlib.util.spec_from_file_location("regret", REPO / "benchmarks" /
                                                  "studies" / "regret.py")
    regret = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(regret)
    gt = tmp_path / "ground_truth.csv"
    with open(gt, "w", newline="") as f:   # two eligible workflows, 3 seeds each, seed variance 1.0 in both
        w = csv.writer(f)
        w.writerow(["workflow", "eligible", "seed_values"])
        w.writerow(["D,E,OS,OH,U", "True", "-16;-17;-18"])
        w.writerow(["E,D,OS,OH,U", "True", "-17;-18;-19"])
    rows = [{"strategy": "random", "budget": 10, "answer": "D,E,OS,OH,U"} for _ in range(50)] + \
           [{"strategy": "gp-ucb", "budget": 10, "answer": "E,D,OS,OH,U"} for _ in range(50)]
    line = regret.against_random_noise_aware(rows, gt)
    # gp-ucb always answers the worse workflow: +1.00 regret; its error is the two means' (1/3 + 1/3), nothing else
    z = 1.0 / (2 / 3) ** 0.5
    assert "mean regret minus random's +1.00" in line and f"z {z:+.2f}" in line and "1 vs 1 distinct answers" in line
    # held-out regret: random saw seed -16 of its answer (held out -17, -18), gp-ucb saw -17 of its (held out -18,
    # -19): +1.00; each score is the mean of two seeds, disjoint between the two, so the error is 4 x (1/2)^2 x 1.0
    held = [{**r, "heldout_regret": 0.5} for r in rows[:50]] + [{**r, "heldout_regret": 1.5} for r in rows[50:]]
    line = regret.against_random_noise_aware(held, gt, key="heldout_regret")
    assert "mean held-out regret minus random's +1.00 ± 1.96" in line and "z +1.00" in line
    with open(gt, "w", newline="") as f:   # one seed per workflow: its noise cannot be estimated, so no test
        w = csv.writer(f)
        w.writerow(["workflow", "eligible", "seed_values"])
        w.writerow(["D,E,OS,OH,U", "True", "-16"])
        w.writerow(["E,D,OS,OH,U", "True", "-17"])
    assert "cannot be estimated" in regret.against_random_noise_aware(rows, gt)


def test_eligibility_model_learns_an_order_rule_and_constrained_ei_avoids_it():
    """Workflows with U before E never comply (a pairwise-order rule, as in the B_line ground truth): after a few
    observations the classifier ranks the rule's two sides apart, and constrained EI picks an untried workflow on the
    eligible side."""
    from workflow_rl.search.gp import cei_select, eligibility, fit_gp, posterior
    from workflow_rl.workflow import Workflow

    def ok(w: Workflow) -> bool:
        c = w.codes.split(",")
        return c.index("E") < c.index("U")

    ws = all_workflows()
    seen = [ws[i] for i in (0, 7, 30, 55, 80, 101, 119, 64)]
    elig = [ok(w) for w in seen]
    assert 0 < sum(elig) < len(elig)
    p = eligibility(seen, elig, seed=0)
    good, bad = np.mean([p[w.index] for w in ws if ok(w)]), np.mean([p[w.index] for w in ws if not ok(w)])
    assert good > bad + 0.2
    y = np.array([-17.0 if e else -25.0 for e in elig])
    mu, sd = posterior(fit_gp(seen, y, seed=0))
    k = cei_select(mu, sd, max(y[elig]), p, {w.index for w in seen})
    assert ok(ws[k]) and ws[k] not in seen


def test_replayed_gp_cei_search_runs_and_answers_an_eligible_workflow(ground_truth_run):
    r = replay_search(ground_truth_run, seed=2, strategy="gp-cei", total_episodes=12_000)
    assert r["workflows_evaluated"] == 12 and not r["answer"].startswith("OH") and r["regret"] >= 0


def test_random_eligible_draws_only_workflows_the_model_deems_eligible_once_both_kinds_are_seen(tmp_path,
                                                                                                  make_record):
    """Eight observations of the ground truth's rule (users before enterprise never complies): later draws of
    random-eligible keep enterprise before users far more often than uniform draws would (>= 0.7 of 40 vs ~0.5; the
    classifier has seen 8 points); before both kinds are seen it draws among all untried."""
    from workflow_rl.search.search import WorkflowSearch

    def ok(codes: str) -> bool:
        c = codes.split(",")
        return c.index("E") < c.index("U")

    ws = all_workflows()
    seen = [ws[i].codes for i in (0, 7, 30, 55, 80, 101, 119, 64)]
    s = WorkflowSearch(SearchConfig(strategy="random-eligible"), tmp_path, progress=False)
    s.state.iterations = [make_record(c, status="compliant" if ok(c) else "not_compliant",
                                      observed_reward=-17.0 if ok(c) else -25.0) for c in seen]
    tried = {Workflow.parse(c).index for c in seen}
    picks = [s._random_eligible(it, tried, set()) for it in range(8, 48)]
    assert all("P(eligible)" in p.reason for p in picks)
    share = sum(ok(p.workflow) for p in picks) / len(picks)
    assert share >= 0.7                    # uniform over the untried would give ~0.5
    assert len({p.workflow for p in picks}) > 5                       # still random among them
    s.state.iterations = s.state.iterations[:1]                       # one kind only: all untried
    assert s._random_eligible(1, tried, set()).reason == f"random among {120 - len(tried)} untried"


@pytest.mark.slow   # replays of a batched search: ~5 s
def test_search_claims_replay_models_a_batch_round_by_round(ground_truth_run, tmp_path):
    """``benchmarks/studies/search_claims.py --replay``: every mode replays whole searches in rounds. Here every seed
    uses its whole cap (gate 500 + post-gate 500 of a 1,000 cap), so no claim rule can free anything: the four modes
    must agree exactly, and a 10,000-episode search at 1,000 per workflow needs at least 10 rounds of 10 envs x 10."""
    import json

    script = REPO / "benchmarks" / "studies" / "search_claims.py"
    r = run_in_process(["--replay", str(ground_truth_run), "--search-seeds", "3", "--total-episodes", "10000",
                        "--batch-workflows", "4", "--modes", "lowered", "whole", "oracle", "elastic", "--out",
                        str(tmp_path)], script=script)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = {row["mode"]: row for row in json.loads((tmp_path / "claims.json").read_text())["rows"]}
    assert rows["lowered"]["rounds"] == rows["whole"]["rounds"] == rows["oracle"]["rounds"] == rows["elastic"]["rounds"]
    assert rows["elastic"]["mean_cut"] == rows["whole"]["mean_cut"]   # elastic claims cut nothing more here
    assert all(x >= 100 for x in rows["whole"]["rounds"])   # 10 workflows x 100 episodes-per-env deep / 4 at once
    assert rows["whole"]["median_most_in_flight"] == 4
