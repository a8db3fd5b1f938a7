"""The examples in examples/ run (at a tiny size): another library's PPO on the registered single env, and a plain
torch loop on the native vector env."""
import importlib.util
import math

import pytest
from helpers import REPO

EXAMPLES = REPO / "examples"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_torch_loop_on_the_vector_env(capsys):
    returns = _load("torch_vector").main(["--iterations", "3", "--num-envs", "8", "--length", "20"])
    assert len(returns) == 3 and all(math.isfinite(r) and r <= 0 for r in returns)
    assert "iteration 2: mean episode return" in capsys.readouterr().out


def test_stable_baselines3_ppo_on_the_single_env(capsys, tmp_path, monkeypatch):
    pytest.importorskip("stable_baselines3", reason="stable-baselines3 is not installed (pip install "
                                                    "'workflow-rl[dev]')")
    monkeypatch.setenv("SB3_LOGDIR", str(tmp_path))   # SB3's logger makes a folder: here, not an SB3-* one in /tmp
    out = _load("sb3_ppo").main(["--timesteps", "64", "--n-steps", "32", "--eval-episodes", "4"])
    assert out["model"].num_timesteps == 64
    assert out["result"].episodes == 4 and math.isfinite(out["result"].mean) and out["result"].mean <= 0
    assert "held-out episodes" in capsys.readouterr().out


def test_every_command_from_python(tmp_path, capsys):
    out = _load("python_api").main(["--out", str(tmp_path), "--episodes", "2", "--eval-episodes", "2"])
    assert out["train"].exit_code == 0 and (tmp_path / "train" / "summary.json").is_file()
    modes = [(r["mode"], r["length"]) for r in out["evaluate"].report["results"]]
    assert modes == [("greedy", 30), ("greedy", 100), ("planned", 30), ("planned", 100)]
    assert out["replay"].out.is_file() and len(out["replay"].episodes) == 2
