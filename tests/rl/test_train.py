"""Training loop: determinism, exact resume, the CLI, Ctrl-C, and bad input."""
import json
import signal
import subprocess
import sys
import time

import pytest
import torch
from helpers import read_log, run_in_process, sigint_default, train_cfg

from workflow_rl.rl.checkpoint import CheckpointError, load_checkpoint

from workflow_rl.rl.trainer import Trainer

_cfg, _log = train_cfg, read_log


def _params(trainer):
    return torch.cat([p.detach().flatten() for p in trainer.agent.parameters()])


@pytest.mark.slow
def test_same_seed_identical_logs_and_weights(tmp_path):
    a, b = Trainer(_cfg(), tmp_path / "a", progress=False), Trainer(_cfg(), tmp_path / "b", progress=False)
    a.run(), b.run()
    assert _log(tmp_path / "a") == _log(tmp_path / "b")
    assert torch.equal(_params(a), _params(b))
    c = Trainer(_cfg(seed=4), tmp_path / "c", progress=False)
    c.run()
    assert not torch.equal(_params(a), _params(c))


@pytest.mark.slow
def test_resume_equals_uninterrupted(tmp_path):
    full = Trainer(_cfg(), tmp_path / "full", progress=False)
    full.run()
    part = Trainer(_cfg(num_episodes=32), tmp_path / "part", progress=False)   # stops half way (budget)
    part.run()
    assert part.total_episodes == 32
    resumed = Trainer(_cfg(), tmp_path / "part", progress=False)
    resumed.restore(load_checkpoint(tmp_path / "part" / "checkpoints" / "latest.pt"))
    resumed.run()
    assert torch.equal(_params(full), _params(resumed))
    assert _log(tmp_path / "full") == _log(tmp_path / "part")


@pytest.mark.slow
@pytest.mark.parametrize("steps,expected", [(100, 37), (25, 37), (200, 36)])
def test_budget_is_exact_and_never_exceeded(tmp_path, steps, expected):
    """Exact when rollouts hold whole episodes or episodes span whole rollouts; with two episodes per env per
    rollout an odd remainder cannot be trained, so it stops one short rather than exceed."""
    t = Trainer(_cfg(update_every_steps=steps, num_episodes=37, max_episodes=10), tmp_path, progress=False)
    s = t.run()
    assert s["episodes"] == expected and s["stop_reason"] == "budget"


def test_compliance_gate_stops_early(tmp_path):
    t = Trainer(_cfg(compliance_threshold=0.01, min_fixes=1, max_episodes=20), tmp_path, progress=False)
    s = t.run()
    assert s["stop_reason"] == "compliant" and s["episodes"] < 20 * 16


@pytest.mark.slow
def test_unconditioned_ppo_has_no_compliance(tmp_path):
    t = Trainer(_cfg(workflow=None, max_episodes=2), tmp_path, progress=False)
    s = t.run()
    assert s["workflow"] is None and s["compliance"] is None


@pytest.mark.parametrize("kw,match", [
    (dict(workflow="D,E,E,OH,U"), "repeated"),
    (dict(red_agent="Greedy"), "unknown red agent"),
    (dict(n_envs=0), "n-envs"),
    (dict(compliance_threshold=0.0), "compliance-threshold"),
    (dict(compliance_threshold=1.5), "compliance-threshold"),
])
def test_bad_config(tmp_path, kw, match):
    with pytest.raises(ValueError, match=match):
        Trainer(_cfg(**kw), tmp_path, progress=False)


def test_corrupt_and_mismatched_checkpoints(tmp_path):
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match="corrupt"):
        load_checkpoint(bad)
    torch.save({"hello": 1}, tmp_path / "other.pt")
    with pytest.raises(CheckpointError, match="not a workflow-rl checkpoint"):
        load_checkpoint(tmp_path / "other.pt")
    with pytest.raises(CheckpointError, match="no checkpoint"):
        load_checkpoint(tmp_path / "missing.pt")
    t = Trainer(_cfg(max_episodes=1), tmp_path / "r", progress=False)
    t.run()
    ck = load_checkpoint(tmp_path / "r" / "checkpoints" / "latest.pt")
    other = Trainer(_cfg(workflow="reverse"), tmp_path / "r2", progress=False)
    with pytest.raises(CheckpointError, match="workflow"):
        other.restore(ck)


def test_resume_under_other_learning_settings_is_refused_budget_may_change(tmp_path):
    """``train --resume`` with another learning rate, network, reward weight or decoy memory would continue a
    different run under the old run's name: refused, naming the flag and the way to start from the weights; a
    larger budget is what resuming is for."""
    base = ["train", "--n-envs", "4", "--max-episodes", "1", "--eval-episodes", "0", "--out", str(tmp_path / "r"),
            "--no-progress"]
    assert _cli(*base).returncode == 0
    for extra, name in ((["--learning-rate", "1e-4"], "--learning-rate"), (["--hidden", "32", "32"], "--hidden"),
                        (["--alignment-lambda", "10"], "--alignment-lambda"), (["--decoy-memory"], "--decoy-memory"),
                        (["--alignment-reward", "violations"], "--alignment-reward")):
        r = _cli(*base, "--resume", *extra)
        assert r.returncode != 0 and "Traceback" not in r.stderr
        msg = r.stdout + r.stderr
        assert f"written with {name}" in msg and "--init-checkpoint" in msg, msg
    r = _cli(*base[:-3], "--max-episodes", "2", *base[-3:], "--resume")
    assert r.returncode == 0, r.stderr
    assert load_checkpoint(tmp_path / "r" / "checkpoints" / "latest.pt")["counters"]["total_episodes"] == 8


def _cli(*args):
    return run_in_process(args)


@pytest.mark.slow
def test_cli_tiny_train_and_evaluate(tmp_path):
    out = tmp_path / "run"
    r = _cli("train", "--workflow", "D,E,OS,OH,U", "--n-envs", "8", "--max-episodes", "2", "--eval-episodes", "20",
             "--out", str(out), "--no-progress")
    assert r.returncode == 0, r.stderr
    s = json.loads((out / "summary.json").read_text())
    assert s["workflow"] == ["defender", "enterprise", "op_server", "op_host", "user"]
    assert s["red_agent"] == "B_lineAgent" and s["episodes"] == 16
    assert set(s["eval"]) >= {"length", "episodes", "mean", "ci95"} and s["eval"]["episodes"] == 20
    assert (out / "config.json").exists() and (out / "training_log.csv").exists()
    r = _cli("evaluate", str(out / "checkpoints" / "latest.pt"), "--episodes", "10", "--lengths", "30",
             "--red-agents", "sleep", "--out", str(tmp_path / "ev"))
    assert r.returncode == 0, r.stderr
    ev = json.loads((tmp_path / "ev" / "evaluation.json").read_text())
    assert {x["mode"] for x in ev["results"]} == {"greedy", "sampled"}
    assert all(x["mean"] <= 0.0 and x["red_agent"] == "SleepAgent" for x in ev["results"])  # only Restore costs


@pytest.mark.parametrize("args,match", [
    (["train", "--workflow", "D,E,OS"], "missing"),
    (["train", "--red-agent", "nobody"], "unknown red agent"),
    (["train", "--n-envs", "0"], "n-envs"),
    (["train", "--compliance-threshold", "1.2"], "compliance-threshold"),
    (["evaluate", "/nonexistent.pt"], "no checkpoint"),
])
def test_cli_bad_input_is_one_line(args, match):
    r = _cli(*args)
    assert r.returncode == 2
    lines = [ln for ln in r.stderr.strip().splitlines() if ln]
    assert len(lines) == 1 and lines[0].startswith("error:") and __import__("re").search(match, lines[0]), r.stderr


@pytest.mark.slow
def test_ctrl_c_saves_and_resume_continues(tmp_path):
    out = tmp_path / "run"
    p = subprocess.Popen([sys.executable, "-m", "workflow_rl.cli", "train", "--n-envs", "64", "--max-episodes",
                          "400", "--eval-episodes", "0", "--out", str(out), "--no-progress"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=sigint_default)
    log = out / "training_log.csv"
    deadline = time.time() + 300
    while time.time() < deadline and (not log.exists() or len(log.read_text().splitlines()) < 3):
        time.sleep(0.5)
    p.send_signal(signal.SIGINT)
    stdout, stderr = p.communicate(timeout=300)
    assert p.returncode == 130, stderr
    ck = load_checkpoint(out / "checkpoints" / "latest.pt")
    assert ck["counters"]["stop_reason"] == "interrupted" and ck["counters"]["update"] >= 2
    r = _cli("train", "--n-envs", "64", "--max-episodes", str(ck["counters"]["update"] + 1), "--eval-episodes", "0",
             "--out", str(out), "--no-progress", "--resume")
    assert r.returncode == 0, r.stderr
    assert "resumed" in r.stdout


def test_tensorboard_scalars_on_request(tmp_path):
    pytest.importorskip("tensorboard", reason="tensorboard is not installed (pip install 'workflow-rl[tb]')")
    t = Trainer(_cfg(max_episodes=2, tensorboard=True), tmp_path, progress=False)
    t.run()
    events = list((tmp_path / "tb").glob("events.out.tfevents.*"))
    assert events and events[0].stat().st_size > 0



def test_init_checkpoint_starts_from_those_weights(tmp_path, capsys):
    """``train --init-checkpoint``: the run starts from the given weights (with a vanishing step size they are
    still there after training; a fresh initialisation is far from them) and its summary names the source."""
    from workflow_rl.cli import main
    from workflow_rl.rl.checkpoint import load_checkpoint

    base = ["train", "--workflow", "D,E,OS,OH,U", "--n-envs", "4", "--max-episodes", "2", "--eval-episodes", "0",
            "--no-progress"]
    assert main([*base, "--out", str(tmp_path / "a"), "--seed", "1"]) == 0
    src = tmp_path / "a" / "checkpoints" / "latest.pt"
    assert main([*base, "--out", str(tmp_path / "b"), "--seed", "2", "--init-checkpoint", str(src),
                 "--learning-rate", "1e-12"]) == 0
    assert main([*base, "--out", str(tmp_path / "c"), "--seed", "2", "--learning-rate", "1e-12"]) == 0
    a, b, c = (load_checkpoint(tmp_path / r / "checkpoints" / "latest.pt")["agent"] for r in "abc")
    assert all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)
    assert not all(torch.allclose(a[k], c[k], atol=1e-3) for k in a)
    assert json.loads((tmp_path / "b" / "summary.json").read_text())["init_checkpoint"] == str(src)


def test_fine_tuning_keeps_the_starting_agents_alignment_reward_unless_one_is_typed(tmp_path, capsys):
    """``--init-checkpoint`` without ``--alignment-reward``: train and search fine-tune with the form the starting
    agent was trained with, and say so; a typed form wins, silently. (A violations-trained agent fine-tuned under
    the ratio form is paid again for diluting its violations.)"""
    from helpers import run_main

    tiny = ["--n-envs", "4", "--max-episodes", "1", "--eval-episodes", "0", "--no-progress"]
    assert run_main(["train", *tiny, "--alignment-reward", "violations", "--out", str(tmp_path / "v")], capsys)[0] == 0
    start = str(tmp_path / "v" / "checkpoints" / "latest.pt")
    for typed, want in (([], "violations"), (["--alignment-reward", "ratio"], "ratio")):
        out = tmp_path / f"t{len(typed)}"
        rc, said, _ = run_main(["train", *tiny, "--init-checkpoint", start, *typed, "--out", str(out)], capsys)
        assert rc == 0 and json.loads((out / "config.json").read_text())["alignment_reward"] == want
        assert ("alignment reward: violations, the form" in said) == (not typed), said
        s = tmp_path / f"s{len(typed)}"
        rc, said, _ = run_main(["search", *tiny, "--init-checkpoint", start, *typed, "--workflows", "critical_first",
                                "--total-episodes", "4", "--eval-episodes", "2", "--out", str(s)], capsys)
        assert rc == 0 and json.loads((s / "search_state.json").read_text())["config"]["alignment_reward"] == want
        assert said.count("alignment reward: violations, the form") == (0 if typed else 1), said
