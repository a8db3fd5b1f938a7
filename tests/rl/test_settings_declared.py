"""Every training setting declared once, on its field (rl.config.setting), and the tables derived from that."""
import dataclasses

from workflow_rl.ranges import numeric_fields
from workflow_rl.rl.config import DECLARED, PER_RUN, PPO_DECLARED, RESUMES, SCOPES, Declared, TrainConfig
from workflow_rl.rl.ppo import PPOConfig


def test_every_field_is_declared_with_its_range_scope_and_resume_rule():
    own = [f for f in dataclasses.fields(TrainConfig) if f.name != "ppo"]
    assert all(isinstance(f.metadata.get("setting"), Declared) for f in own), \
        [f.name for f in own if "setting" not in f.metadata]
    assert set(PPO_DECLARED) == {f.name for f in dataclasses.fields(PPOConfig)}
    numeric = set(numeric_fields(TrainConfig)) | set(numeric_fields(PPOConfig))
    for name, d in DECLARED.items():
        assert d.scope in SCOPES and d.resume in RESUMES, name
        assert (d.range is not None) == (name in numeric), f"{name}: a range exactly where it is numeric"


def test_the_derived_tables_are_the_ones_written_before():
    from workflow_rl.rl.checkpoint import SAME_RUN
    from workflow_rl.runs.settings import INHERITED
    from workflow_rl.search.config import LEGACY_SETTINGS, PER_WORKFLOW, SEARCH_TRAINING_DEFAULTS

    assert set(PER_RUN) == {"workflow", "hold_out", "none_share", "num_episodes", "max_episodes", "min_episodes",
                            "compliance_threshold", "min_fixes", "post_gate_episodes", "alignment_lambda",
                            "n_workers", "checkpoint_every", "tensorboard"}
    assert set(SAME_RUN) == {"workflow", "hold_out", "red_agent", "engine", "n_envs", "episode_length",
                             "update_every_steps", "seed", "alignment_lambda", "alignment_reward", "anneal_lr",
                             "official_bugs"} | {f.name for f in dataclasses.fields(PPOConfig)}
    assert PER_WORKFLOW == ("workflow", "hold_out", "none_share", "num_episodes", "tensorboard")
    assert SEARCH_TRAINING_DEFAULTS == {"update_every_steps": 25, "post_gate_episodes": 40}
    assert LEGACY_SETTINGS == {"post_gate_episodes": 0, "strategy": "gp-ucb", "design_start": "critical_first",
                               "claims": "lowered", "pick_margin": 0.0}
    assert set(INHERITED) == {"alignment_reward", "opening", "hidden", "decoy_memory", "red_memory", "mask_decoys",
                              "clock_memory"}


def test_a_start_from_a_checkpoint_takes_its_network_unless_typed(monkeypatch, capsys):
    from workflow_rl.rl import pretrained
    from workflow_rl.runs.settings import inherit_settings

    trained = TrainConfig(ppo=PPOConfig(hidden=(16,), decoy_memory=True, mask_decoys=True))
    monkeypatch.setattr(pretrained, "trained_config", lambda spec: trained)
    given = inherit_settings(frozenset(), "ck.pt", TrainConfig().flat())
    assert given["hidden"] == (16,) and given["decoy_memory"] and given["mask_decoys"]
    said = capsys.readouterr().out
    assert "hidden: 16, the hidden layers ck.pt was trained with (--hidden to choose another)" in said
    typed = inherit_settings(frozenset({"hidden"}), "ck.pt", {**TrainConfig().flat(), "hidden": (8,)})
    assert typed["hidden"] == (8,) and typed["decoy_memory"]


def test_check_same_names_the_first_difference():
    import pytest

    from workflow_rl.checks import check_same

    check_same({"hidden": [64, 64]}, {"hidden": (64, 64)}, ["hidden"], "checkpoint", "fix")   # JSON lists as tuples
    with pytest.raises(ValueError, match=r"^checkpoint was written with --seed 0, this run has 1: fix$"):
        check_same({"seed": 0, "gamma": 1}, {"seed": 1, "gamma": 2}, ["seed", "gamma"], "checkpoint", "fix")


def test_train_and_search_from_a_checkpoint_build_its_network_without_retyping_it(tmp_path, capsys):
    """``--init-checkpoint`` of a non-default network (hidden 16, decoy memory with masks): train and search
    without --hidden or the memory flags build that network; a typed --hidden that does not fit is refused."""
    import json

    from helpers import run_main

    from workflow_rl.rl.checkpoint import load_checkpoint

    tiny = ["--n-envs", "4", "--max-episodes", "1", "--eval-episodes", "0", "--no-progress"]
    net = ["--hidden", "16", "--decoy-memory", "--mask-decoys"]
    assert run_main(["train", *tiny, *net, "--out", str(tmp_path / "a")], capsys)[0] == 0
    start = str(tmp_path / "a" / "checkpoints" / "latest.pt")
    rc, said, err = run_main(["train", *tiny, "--init-checkpoint", start, "--out", str(tmp_path / "b")], capsys)
    assert rc == 0, err
    ppo = load_checkpoint(tmp_path / "b" / "checkpoints" / "latest.pt")["config"]["ppo"]
    assert (tuple(ppo["hidden"]), ppo["decoy_memory"], ppo["mask_decoys"]) == ((16,), True, True)
    assert "hidden: 16, the hidden layers" in said
    rc, _, err = run_main(["search", *tiny, "--init-checkpoint", start, "--workflows", "critical_first",
                           "--total-episodes", "4", "--eval-episodes", "2", "--out", str(tmp_path / "s")], capsys)
    assert rc == 0, err
    assert json.loads((tmp_path / "s" / "search_state.json").read_text())["config"]["hidden"] == [16]
    rc, _, err = run_main(["train", *tiny, "--init-checkpoint", start, "--hidden", "8", "--out",
                           str(tmp_path / "c")], capsys)
    assert rc == 2 and "train with the same --hidden and memory flags" in err
