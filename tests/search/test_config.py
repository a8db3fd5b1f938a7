"""One config source: the flags of `train` and `search` come from the dataclasses, the search state keeps its keys,
and a device this machine lacks is one error line."""
import dataclasses
import json
import subprocess
import sys

import pytest
import torch

from workflow_rl.cli import build_parser, main
from workflow_rl.devices import check_engine_device
from workflow_rl.rl.config import TrainConfig
from workflow_rl.rl.ppo import PPOConfig
from workflow_rl.search.config import PER_WORKFLOW, SEARCH_TRAINING_DEFAULTS, SearchConfig
from workflow_rl.search.records import Proposal, Record, SearchState
from workflow_rl.search.search import WorkflowSearch

OLD_STATE_CONFIG = {   # search_state.json's config block as the version before the embedded TrainConfig wrote it
    "red_agent": "B_lineAgent", "engine": "native", "total_episodes": 60, "n_envs": 8, "max_episodes": 2,
    "min_episodes": 5, "compliance_threshold": 0.95, "min_fixes": 50, "alignment_lambda": 30.0,
    "update_every_steps": 25, "learning_rate": 0.0005, "inherit": "nearest", "gp_beta": None, "n_init": 2,
    "eval_episodes": 16, "eval_length": 100, "seed": 1, "device": "cpu", "workflows": None, "max_iterations": None,
    "init_checkpoint": None, "vectorization": "sync", "compile": False, "batch_workflows": 1,
    "seeds_per_workflow": 1, "n_workers": None, "parallel_start_method": None, "scenario": None}


def _defaults(command: str) -> dict:
    return vars(build_parser().parse_args([command]))


def test_every_train_setting_is_a_flag_with_the_dataclass_default():
    args = _defaults("train")
    expected = TrainConfig().flat()
    assert set(expected) <= set(args)
    assert {k: args[k] for k in expected} == expected
    assert set(PPOConfig().__dict__) <= set(args)


def test_every_search_setting_is_a_flag_with_the_dataclass_default():
    args = _defaults("search")
    expected = SearchConfig().to_dict()
    assert {k: args[k] for k in expected} == expected
    trained = {f.name for f in dataclasses.fields(TrainConfig)} - {"ppo"}
    assert trained - set(expected) == set(PER_WORKFLOW)           # every other training setting is searchable
    assert not set(PER_WORKFLOW) & set(args)
    # the one place the two commands differ, declared once
    assert args["update_every_steps"] == SEARCH_TRAINING_DEFAULTS["update_every_steps"] == 25
    assert _defaults("train")["update_every_steps"] == TrainConfig().update_every_steps == 100


def test_flags_reach_the_config():
    args = build_parser().parse_args(["search", "--n-envs", "8", "--hidden", "32", "32", "--no-norm-adv",
                                      "--batch-workflows", "2", "--no-official-bugs"])
    cfg = SearchConfig(**{n: getattr(args, n) for n in args.config_names})
    assert cfg.train.n_envs == 8 and cfg.batch_workflows == 2 and not cfg.train.official_bugs
    assert cfg.train.ppo.hidden == (32, 32) and cfg.train.ppo.norm_adv is False


def test_setting_names_never_collide():
    """The flat namespace (flags, state file) routes each name to one dataclass."""
    names = [{f.name for f in dataclasses.fields(c)} - {"train", "ppo"} for c in (SearchConfig, TrainConfig, PPOConfig)]
    assert not (names[0] & names[1] or names[0] & names[2] or names[1] & names[2])


def test_search_config_routes_flat_settings_and_round_trips():
    cfg = SearchConfig(n_envs=8, learning_rate=1e-3, total_episodes=60, hidden=(16,))
    assert cfg.train.n_envs == 8 and cfg.train.ppo.learning_rate == 1e-3 and cfg.total_episodes == 60
    assert cfg.train.update_every_steps == 25
    again = SearchConfig.from_dict(json.loads(json.dumps(cfg.to_dict())))
    assert again == cfg
    # every key an older state file holds, but `compile`, removed with the torch tensor path (resume ignores it)
    assert set(OLD_STATE_CONFIG) - {"compile"} <= set(cfg.to_dict())
    with pytest.raises(TypeError, match="per workflow"):
        SearchConfig(num_episodes=5)
    with pytest.raises(TypeError):
        SearchConfig(no_such_setting=1)


def test_typed_records_round_trip_through_the_state_file(tmp_path):
    prop = Proposal(workflow="D,E,OS,OH,U", reason="UCB argmax", ucb=1.5, mean=-20.0, std=3.0, beta=2.0)
    record = Record(iteration=1, workflow="U,OH,OS,E,D", reason="initial design 1/3", observed_reward=-12.5,
                    observed_ci95=1.25, compliance=0.97, episodes_trained=16, status="compliant", wall_time=3.0,
                    started_at=10.0, finished_at=13.0, run_dir="workflows/001_U-OH-OS-E-D",
                    checkpoint="workflows/001_U-OH-OS-E-D/checkpoints/latest.pt", seed_rewards=[-12.5],
                    seed_status=["compliant"])
    dispatched = prop.dispatched(2, record, 16)
    assert dispatched.parent == "U,OH,OS,E,D" and dispatched.run_dir == "workflows/002_D-E-OS-OH-U"
    state = SearchState(config=SearchConfig().to_dict(), iterations=[record], episodes_used=16,
                        pending=[dispatched], dispatched=2)
    state.save(tmp_path / "search_state.json")
    raw = json.loads((tmp_path / "search_state.json").read_text())
    assert raw["iterations"][0]["observed_reward"] == -12.5 and raw["pending"][0]["parent_checkpoint"] == \
        record.checkpoint                                         # the JSON keys earlier versions wrote
    assert SearchState.load(tmp_path / "search_state.json") == state


def test_a_state_file_from_the_previous_version_resumes(tmp_path):
    state = {"config": OLD_STATE_CONFIG, "iterations": [], "episodes_used": 0, "pending": [], "dispatched": 0,
             "finished": False}
    (tmp_path / "search_state.json").write_text(json.dumps(state))
    s = WorkflowSearch.resume(tmp_path, progress=False, max_iterations=1)
    assert s.cfg.train.n_envs == 8 and s.cfg.train.seed == 1 and s.cfg.train.ppo.learning_rate == 5e-4
    s.run()
    assert len(s.state.iterations) == 1 and s.state.iterations[0].episodes_trained == 16


def test_one_engine_device_rule():
    """Real CybORG runs on the CPU; the native engine on the CPU or CUDA (the device picks its build)."""
    check_engine_device("native", "cpu")
    check_engine_device("native", "cuda:1")
    check_engine_device("cyborg", "cpu")
    with pytest.raises(ValueError, match="cyborg engine runs on the CPU"):
        check_engine_device("cyborg", "cuda")
    with pytest.raises(ValueError, match="CPU or an NVIDIA GPU"):
        check_engine_device("native", "mps")
    with pytest.raises(TypeError, match="compile"):   # the torch tensor path's setting is gone
        TrainConfig(compile=True)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA GPU")
@pytest.mark.parametrize("device,match", [("cuda", "no CUDA GPU"), ("cuda:7", "no CUDA GPU"),
                                          ("gpu", "unknown device"), ("cuda:x", "unknown device")])
def test_a_missing_device_is_one_error_line(capsys, tmp_path, device, match):
    for command in (["train"], ["search"], ["evaluate", "sleep"]):
        assert main([*command, "--device", device, "--out", str(tmp_path / "never-written")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error:") and match in err[0], err


@pytest.mark.slow   # a fresh Python (~2 s)
@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA GPU")
def test_device_cuda_from_the_shell_has_no_traceback(tmp_path):
    r = subprocess.run([sys.executable, "-m", "workflow_rl.cli", "train", "--device", "cuda", "--out",
                        str(tmp_path / "never-written")], capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines() == [r.stderr.strip()] and r.stderr.startswith("error: --device cuda")
