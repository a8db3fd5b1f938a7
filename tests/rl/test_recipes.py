"""``train --recipe``: a named recipe's settings at its device's scale, flags typed on the command line winning, and
the recipe named in the run's summary."""
import json
import re

import pytest
from helpers import run_main

from workflow_rl.rl.config import TrainConfig
from workflow_rl.rl.recipes import OPENING, RECIPES, check_recipes, recipe


def test_every_recipe_validates_at_every_scale():
    check_recipes()
    assert "universal" in RECIPES


def test_a_recipe_scales_by_device_kind_and_keeps_everything_else():
    r = recipe("universal")
    cpu, cuda = r.for_device("cpu"), r.for_device("cuda:0")
    assert cpu["n_envs"] == 200 and cuda["n_envs"] == 16_384
    shared = {k: v for k, v in cpu.items() if k not in r.scale["cpu"]}
    assert shared == {k: v for k, v in cuda.items() if k not in r.scale["cuda"]} and shared["opening"] == OPENING
    # the flags it stands for give back the same settings
    assert "--opening 51 116 55" in r.command("cpu") and "--decoy-memory" in r.command("cpu")


def test_an_unknown_recipe_is_one_error_line(capsys, tmp_path):
    rc, _, err = run_main(["train", "--recipe", "best", "--out", str(tmp_path / "r")], capsys)
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "universal" in err
    with pytest.raises(ValueError, match="use one of universal"):
        recipe("best")


def test_train_with_a_recipe_runs_its_settings_and_typed_flags_win(capsys, tmp_path):
    """Tiny scale typed over the recipe: the run's config holds the recipe's network, memories, opening, reward and
    workflows, the typed sizes, and the summary names the recipe; a typed --opening wins too."""
    out = tmp_path / "r"
    rc, stdout, err = run_main(["train", "--recipe", "universal", "--n-envs", "8", "--num-episodes", "16",
                                "--hidden", "16", "16", "--opening", "51", "--out", str(out), "--no-progress"], capsys)
    assert rc == 0, err
    assert re.search(r"recipe universal on cpu: .*--none-share 0.5 .*--hidden 16 16 .*--n-envs 8 ", stdout)
    assert "typed over the recipe: --n-envs, --num-episodes, --hidden, --opening" in stdout
    cfg = TrainConfig.from_dict(json.loads((out / "config.json").read_text()))
    assert (cfg.workflow, cfg.none_share, cfg.red_agent) == ("all", 0.5, "B_lineAgent:0.5,RedMeanderAgent:0.5")
    assert cfg.ppo.decoy_memory and cfg.ppo.mask_decoys and cfg.ppo.opening == (51,)
    assert (cfg.alignment_reward, cfg.anneal_lr, cfg.n_envs, cfg.ppo.hidden) == ("violations", True, 8, (16, 16))
    summary = json.loads((out / "summary.json").read_text())
    assert summary["recipe"] == "universal" and summary["episodes"] == 16 and summary["none_share"] == 0.5
