"""A search from a universal agent (``search.universal``, ``search.multifidelity``): the two-fidelity GP, the phases
((b) trains its own universal agent inside the budget; (a) starts from a given one, not counted), resume in any
phase, the calls and the confidence set, bad input."""
import csv
import json

import numpy as np
import pytest

from workflow_rl.search import multifidelity as F
from workflow_rl.search import universal as U
from workflow_rl.search.search import SearchConfig, WorkflowSearch
from workflow_rl.workflow import all_workflows
from helpers import REPO, run_in_process


def _synthetic(offset, high_idx, noise=0.0, seed=0):
    rng = np.random.default_rng(seed)
    ws = list(all_workflows())
    f = np.array([w.pairwise() @ np.linspace(-1, 1, 10) for w in ws])   # a smooth function of the order
    low = [(w, f[i], 0.01) for i, w in enumerate(ws)]
    high = [(ws[i], f[i] + offset + noise * rng.normal(), 0.0) for i in high_idx]
    return f, F.Observations.of(low, high)


def test_two_fidelity_gp_learns_the_offset_and_shifts_every_workflow():
    f, obs = _synthetic(2.0, [3, 40, 77, 100, 111])
    model = F.fit(obs)
    assert model.offset == pytest.approx(2.0, abs=0.05)
    mu, cov = F.posterior_high(model, list(all_workflows()))
    assert np.allclose(mu, f + 2.0, atol=0.1)               # untried ones too: their low value plus the offset
    assert np.all(np.diag(cov) > -1e-9)


def test_two_fidelity_gp_learns_the_fine_tuning_noise():
    _, quiet = _synthetic(1.0, list(range(0, 120, 6)), noise=0.0)
    _, noisy = _synthetic(1.0, list(range(0, 120, 6)), noise=1.5)
    assert F.fit(noisy).tau > 5 * F.fit(quiet).tau
    assert F.fit(noisy).offset == pytest.approx(1.0, abs=0.8)


def test_a_workflows_own_fine_tuning_deviation_is_part_of_its_value():
    """An untried workflow keeps the fine-tuning spread tau in its posterior (it could land anywhere within it); a
    fine-tuned one is worth what its fine-tuning gave, not that value shrunk back towards its universal one."""
    high = list(range(0, 120, 6))
    f, obs = _synthetic(1.0, high, noise=1.5)
    model = F.fit(obs)
    mu, cov = F.posterior_high(model, list(all_workflows()))
    sd = np.sqrt(np.diag(cov))
    untried = [i for i in range(120) if i not in high]
    assert sd[untried].min() >= 0.9 * model.tau
    assert np.allclose(mu[high], obs.y[120:], atol=0.05) and sd[high].max() < 0.2 * model.tau


def test_without_high_observations_the_offset_is_zero():
    f, obs = _synthetic(0.0, [])
    model = F.fit(obs)
    assert model.offset == 0.0
    mu, _ = F.posterior_high(model, list(all_workflows()))
    assert np.argmax(mu) == np.argmax(f)


def _tiny(**kw):
    base = dict(n_envs=8, max_episodes=2, total_episodes=96, eval_episodes=4, seed=1, min_episodes=1, min_fixes=1, post_gate_episodes=1,
                compliance_threshold=0.3)   # a tiny agent complies ~0.3: some workflows called eligible, some not
    base.update(kw)
    return SearchConfig(**base)


def _log(path):
    with open(path / "gp_sampling_log.csv") as f:
        return [{k: v for k, v in r.items() if k != "wall_time"} for r in csv.DictReader(f)]


@pytest.mark.slow
def test_own_universal_agent_counts_in_the_budget_and_resumes_in_every_phase(tmp_path, monkeypatch):
    cfg = _tiny(universal_fraction=0.5)
    full = WorkflowSearch(cfg, tmp_path / "full", progress=False)
    summary = full.run()
    st = full.state
    assert st.phase == "fine-tune" and st.universal_episodes == 48 and len(st.screen) == 120
    assert st.episodes_used == 48 + sum(r.episodes_trained for r in st.iterations) <= 96
    assert st.iterations and all(r.parent is None for r in st.iterations)
    assert all("fine-tuned from the universal agent" in r.reason for r in st.iterations)
    assert (tmp_path / "full" / "universal" / "checkpoints" / "latest.pt").is_file()
    u = summary["universal"]
    assert u["training_episodes_counted"] == 48 and "part of the budget" in u["budget_note"]
    with open(tmp_path / "full" / "screen.csv") as f:
        assert u["calls_eligible"] + u["calls_ineligible"] == 120 == len(list(csv.DictReader(f)))
    assert u["confidence_set_keeps_ineligible"] == 0
    assert "two-fidelity" in summary["confidence_set_method"]

    # killed after the universal agent trained, before the screen finished: resumed in phase 'screen'
    real = U.screen
    monkeypatch.setattr(U, "screen", lambda *a: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        WorkflowSearch(cfg, tmp_path / "part", progress=False).run()
    saved = json.loads((tmp_path / "part" / "search_state.json").read_text())
    assert saved["phase"] == "screen" and saved["episodes_used"] == 48 and not saved["screen"]
    monkeypatch.setattr(U, "screen", real)
    WorkflowSearch.resume(tmp_path / "part", progress=False).run()
    assert _log(tmp_path / "part") == _log(tmp_path / "full")
    again = json.loads((tmp_path / "part" / "search_state.json").read_text())
    assert again["screen"] == json.loads((tmp_path / "full" / "search_state.json").read_text())["screen"]


@pytest.fixture(scope="module")
def universal_checkpoint(tmp_path_factory):
    """A tiny agent trained across all 120 workflows (the trainer's own path)."""
    from workflow_rl.rl.config import TrainConfig
    from workflow_rl.rl.trainer import Trainer

    out = tmp_path_factory.mktemp("universal")
    Trainer(TrainConfig(workflow="all", n_envs=8, max_episodes=1), out, progress=False).run()
    return str(out / "checkpoints" / "latest.pt")


@pytest.mark.slow
def test_given_universal_agent_is_not_counted_and_a_resumed_search_equals_the_whole(tmp_path, universal_checkpoint,
                                                                                    capsys):
    cfg = _tiny(init_checkpoint=universal_checkpoint, total_episodes=48)
    full = WorkflowSearch(cfg, tmp_path / "full", progress=False)
    summary = full.run()
    assert full.state.universal_episodes == 0 and full.state.episodes_used == 48
    assert summary["universal"]["agent"] == universal_checkpoint
    assert "not counted" in summary["universal"]["budget_note"]
    assert full.state.screen_source == "computed" and "includes computing its screen" in summary["universal"][
        "wall_note"]
    threshold = cfg.train.compliance_threshold
    calls = U.calls(full.state.iterations, full.state.screen, threshold)
    kept = set(summary["confidence_set"])
    kept_ineligible = [w for w, (ok, _) in calls.items() if not ok and w in kept]
    # no workflow called ineligible is kept, except the answer itself when no fine-tuned workflow is eligible
    assert kept_ineligible in ([], [summary["best_workflow_codes"]] if not summary["best_is_eligible"] else [])
    ok = {s.workflow for s in full.state.screen if s.eligible(threshold)}
    assert all(r.workflow in ok for r in full.state.iterations) or not ok    # fine-tunes only eligible-called ones

    part = WorkflowSearch(_tiny(init_checkpoint=universal_checkpoint, total_episodes=48, max_iterations=1),
                          tmp_path / "part", progress=False)
    part.run()
    assert part.state.screen_source == "cache" and part.state.screen == full.state.screen   # same agent, same key
    resumed = WorkflowSearch.resume(tmp_path / "part", progress=False, max_iterations=None)
    resumed.state.finished = False
    resumed.run()
    assert _log(tmp_path / "part") == _log(tmp_path / "full")

    # the command line says the mode, that the screen was reused, and what the budget and wall time leave out
    from tests.helpers import run_main

    rc, out, _ = run_main(["search", "--init-checkpoint", universal_checkpoint, "--total-episodes", "48",
                           "--n-envs", "8", "--max-episodes", "2", "--eval-episodes", "4", "--seed", "1",
                           "--min-episodes", "1", "--min-fixes", "1", "--post-gate-episodes", "1",
                           "--compliance-threshold", "0.3", "--no-progress", "--out", str(tmp_path / "cli")], capsys)
    lines = out.strip().splitlines()
    assert rc == 0 and lines[-1].startswith("answer: ") and lines[-2].startswith(
        f"mode: fine-tuned the GP's picks from the universal agent {universal_checkpoint}")
    assert "not counted in budget or wall time: its training and its screen of all 120 workflows (cached)" in lines[-2]
    assert "read from the cache" in (tmp_path / "cli" / "report.md").read_text()

    # the measurement script scores it against a ground truth and the universal agent's own calls
    root = REPO
    studies = root / "benchmarks" / "studies"
    r = run_in_process([str(tmp_path / "full"), "--ground-truth", str(root / "benchmarks/results/ground_truth/"
                        "ground_truth.csv"), "--out", str(tmp_path / "score")], script=studies / "universal_search.py",
                       cwd=root)
    assert r.returncode == 0, r.stderr[-2000:]
    with open(tmp_path / "score" / "universal_search.csv") as f:
        row = next(csv.DictReader(f))
    with open(tmp_path / "full" / "screen.csv") as f:
        screen = list(csv.DictReader(f))
    assert int(row["agree_universal"]) == sum(x["eligible"] == x["universal_eligible"] for x in screen)
    assert int(row["confidence_set_size"]) == summary["confidence_set_size"]
    assert row["answer"] == summary["best_workflow_codes"] and row["universal_episodes_counted"] == "0"


@pytest.mark.parametrize("kw,match", [
    (dict(universal_fraction=0.0), r"in \(0, 1\)"),
    (dict(universal_fraction=1.0), r"in \(0, 1\)"),
    (dict(universal_fraction=-0.2), r"in \(0, 1\)"),
    (dict(universal_fraction=0.01), "at least one round"),
    (dict(universal_fraction=0.5, init_checkpoint="pretrained:universal", hidden=(256, 256), decoy_memory=True,
          mask_decoys=True), "drop one of them"),
    (dict(universal_fraction=0.5, workflows=["D,E,OS,OH,U"]), "picks workflows"),
    (dict(universal_fraction=0.5, strategy="gp-cei"), "gp-ucb or random"),
])
def test_bad_universal_settings(tmp_path, kw, match):
    with pytest.raises(ValueError, match=match):
        WorkflowSearch(_tiny(**kw), tmp_path)


def test_cli_bad_universal_fraction_one_line(tmp_path, capsys):
    from tests.helpers import run_main

    rc, _, err = run_main(["search", "--universal-fraction", "1.5", "--out", str(tmp_path / "x")], capsys)
    assert rc == 2 and err.startswith("error:") and "--universal-fraction" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("edit,match", [
    ({"phase": "warmup"}, "phase 'warmup'"),
    ({"universal_episodes": -1}, "universal_episodes"),
    ({"universal_episodes": 8}, "episodes_used 0 is not the sum"),
    ({"screen": [{"workflow": "D,E,OS,OH,U", "observed_reward": "high", "observed_ci95": 0.1}]}, "observed_reward"),
])
def test_an_edited_universal_state_is_refused(tmp_path, edit, match):
    from workflow_rl.search.config import SearchConfig
    from workflow_rl.search.records import SearchState

    path = tmp_path / "search_state.json"
    path.write_text(json.dumps({**SearchState(config=SearchConfig().to_dict()).to_dict(), **edit}))
    with pytest.raises(ValueError, match=match):
        SearchState.load(path)
