"""The training reward is one function of named terms (``rl.reward``), and docs/extending.md's "A new reward term"
recipe, done: a toy term (a penalty per Restore) added in a copy of the package -- its function in rl/reward.py and
its weight's one line in TrainConfig -- appears in the log, the episode snapshot and the resume identity, trains on
both rollout paths, is refused by the planner and expert iteration, and at weight 0 changes nothing, bit for bit."""
import csv
import json
import math
import os
import shutil
import subprocess
import sys

import pytest
import torch
from helpers import REPO, read_log

from workflow_rl.rl import reward, runlog, trainer
from workflow_rl.rl.config import TrainConfig
from workflow_rl.rl.resumable import snapshot_reference


def test_the_built_in_terms_keep_the_files_as_they_were():
    """The log's columns, the episode-end record and the snapshot's keys are derived from the terms: with the
    built-ins alone they are the lists written out before the registry."""
    assert [t.name for t in reward.TERMS] == ["env", "align"]
    assert runlog.LOG_COLUMNS[:8] == ["workflow_id", "workflow", "update", "episodes", "total_episodes", "env_reward",
                                      "alignment_bonus", "total_reward"]
    assert trainer.ENDED == ("compliant", "violations", "neutral", "env_return", "align_return", "ended",
                             "workflow_id")
    assert set(snapshot_reference(TrainConfig(), 2)["episode_running"]) == {"env", "align"}


def test_compose_is_env_plus_align_times_the_scale_bit_for_bit():
    g = torch.Generator().manual_seed(0)
    env = -torch.randint(0, 130, (4096,), generator=g).to(torch.float32) / 10   # CAGE2's rewards, -0.0 included
    align = torch.where(torch.rand(4096, generator=g) < 0.5, torch.randn(4096, generator=g), torch.zeros(4096))
    align[:8] = -0.0
    for scale in (0.1, 1.0, 0.37):
        got = reward.compose({"env": env, "align": align}, scale)
        want = (env + align) * scale
        assert torch.equal(got, want) and torch.equal(got.signbit(), want.signbit())
    assert reward.active([TrainConfig(alignment_lambda=0.0)]) == reward.TERMS   # the built-ins are always summed


def test_a_term_the_planner_does_not_value_is_refused_in_one_line(monkeypatch):
    toy = reward.RewardTerm("toy", "toy_reward", "alignment_lambda", lambda s, w: -w * s.env)
    monkeypatch.setattr(reward, "TERMS", (*reward.TERMS, toy))
    reward.check_valued(TrainConfig(alignment_lambda=0.0), "the planner")   # at weight 0: valued
    with pytest.raises(ValueError, match=r"^the planner values the env term .* only: the agent was trained with "
                                         r"the toy reward term too \(--alignment-lambda 30\); use an agent trained "
                                         r"with --alignment-lambda 0$"):
        reward.check_valued(TrainConfig().to_dict(), "the planner")


IMPORT_ANCHOR = "import torch\n"
IMPORT = "from workflow_rl.sim import tables\n"
FUNCTION_ANCHOR = "TERMS: tuple[RewardTerm, ...] = ("
FUNCTION = '''def restore_penalty(s: Step, w: torch.Tensor) -> torch.Tensor:
    """A toy term: -w for each Restore blue plays (tests/rl/test_reward_terms.py)."""
    return -w * (s.actions >= tables.A_RESTORE).to(torch.float32)


'''
ENTRY_ANCHOR = ')\n"""The training reward\'s terms'
ENTRY = '    RewardTerm("restore", "restore_reward", "restore_penalty", restore_penalty),\n'
SETTING_ANCHOR = "    alignment_lambda: float = setting("
SETTING = ('    restore_penalty: float = setting(0.0, range=Range(0.0, 100.0, "a toy weight", float), scope="run", '
           'resume="must_match")\n    """a toy reward term\'s weight: -this per Restore (tests/rl/test_reward_terms.py)'
           '"""\n')


def _add_toy_term(pkg):
    """The recipe in ``pkg``, a copy of the package: the term in rl/reward.py, its weight in rl/config.py."""
    for path, edits in ((pkg / "rl" / "reward.py", ((IMPORT_ANCHOR, IMPORT, False), (FUNCTION_ANCHOR, FUNCTION, True),
                                                     (ENTRY_ANCHOR, ENTRY, True))),
                        (pkg / "rl" / "config.py", ((SETTING_ANCHOR, SETTING, True),))):
        text = path.read_text()
        for anchor, line, before in edits:
            assert text.count(anchor) == 1, anchor
            text = text.replace(anchor, line + anchor if before else anchor + line)
        path.write_text(text)


SMALL = dict(workflow="critical_first", n_envs=4, max_episodes=2, min_episodes=1, update_every_steps=50, seed=5)

CHECK = r"""
import contextlib, io, json, pathlib, sys
import numpy as np
import torch
from workflow_rl.cli import main
from workflow_rl.rl import reward, runlog, trainer
from workflow_rl.rl.checkpoint import SAME_RUN, load_checkpoint
from workflow_rl.rl.config import TrainConfig
from workflow_rl.rl.planning.planner import PlanConfig, make_act
from workflow_rl.rl.trainer import Trainer

out, small = pathlib.Path(sys.argv[1]), json.loads(sys.argv[2])
res = {"terms": [t.name for t in reward.TERMS], "columns": runlog.LOG_COLUMNS, "ended": list(trainer.ENDED),
       "same_run": "restore_penalty" in SAME_RUN}


def cli(*args):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            rc = main([str(a) for a in args])
        except SystemExit as e:
            rc = e.code
    return [rc, err.getvalue()]


tiny = ["--n-envs", "4", "--max-episodes", "2", "--min-episodes", "1", "--update-every-steps", "50",
        "--eval-episodes", "0", "--no-progress", "--seed", "5"]
res["train"] = cli("train", *tiny, "--restore-penalty", "0.5", "--out", out / "run")
res["resume"] = cli("train", *tiny, "--restore-penalty", "0.25", "--out", out / "run", "--resume")
ck = out / "run" / "checkpoints" / "latest.pt"
plan = ["--plan-particles", "4", "--plan-rollouts", "2", "--plan-horizon", "2"]
res["evaluate"] = cli("evaluate", ck, "--plan", *plan, "--episodes", "1", "--lengths", "5", "--red-agents",
                      "B_lineAgent", "--out", out / "eval")
res["expert"] = cli("expert-iterate", "--init", ck, "--rounds", "1", "--episodes-per-round", "2", "--episode-length",
                    "5", *plan, "--out", out / "exit")
res["expert_wrote"] = sorted(p.name for p in (out / "exit").rglob("*")) if (out / "exit").exists() else []
try:
    make_act(str(ck), PlanConfig())
    res["make_act"] = None
except ValueError as e:
    res["make_act"] = str(e)

# the vector-env rollout: a mid-episode snapshot holds the term's running return; resuming it is exact
cfg = TrainConfig(**small, restore_penalty=0.5, checkpoint_every=1)
full = Trainer(cfg, out / "full", progress=False)
full.run()
part = Trainer(cfg, out / "part", progress=False)
plan_ = part.batch.plan(0)
part.batch.update(plan_[0], np.array([plan_[1]]))
mid = part.checkpoint()
res["mid_running"] = sorted(mid["episode_running"])
res["mid_restore"] = mid["episode_running"]["restore"].tolist()
part.close()
resumed = Trainer(cfg, out / "resumed", progress=False)
resumed.restore(mid)
resumed.run()
res["resume_exact"] = all(torch.equal(a, b) for a, b in zip(full.agent.state_dict().values(),
                                                             resumed.agent.state_dict().values()))
try:
    Trainer(TrainConfig(**small, restore_penalty=0.25, checkpoint_every=1), out / "other", progress=False).restore(mid)
    res["restore_other"] = None
except ValueError as e:
    res["restore_other"] = str(e)

# weight 0: the run the package without the term trains (compared by the test)
zero = Trainer(TrainConfig(**small), out / "zero", progress=False)
zero.run()
torch.save(zero.agent.state_dict(), out / "zero.pt")

# episode workers
Trainer(TrainConfig(**{**small, "n_envs": 2, "episode_length": 30, "update_every_steps": 30}, n_workers=1,
                    vectorization="episodes", restore_penalty=0.5), out / "workers", progress=False).run()
print(json.dumps(res))
"""


def _rows(path):
    with open(path / "training_log.csv") as f:
        return [r for r in csv.DictReader(f) if int(r["episodes"])]


def _check_term_column(rows, weight):
    """Each logged mean of the toy term is -weight x a whole number of Restores over the update's episodes, the
    total is the sum of the terms, and Restores were played."""
    for r in rows:
        restores = -float(r["restore_reward"]) * int(r["episodes"]) / weight
        assert restores >= 0 and restores == pytest.approx(round(restores), abs=1e-6), r
        parts = float(r["env_reward"]) + float(r["alignment_bonus"]) + float(r["restore_reward"])
        assert float(r["total_reward"]) == pytest.approx(parts, abs=1e-6), r
    assert any(float(r["restore_reward"]) < 0 for r in rows)


@pytest.mark.slow
def test_a_new_reward_term_is_its_function_and_its_setting(tmp_path):
    pkg = tmp_path / "workflow_rl"
    # __pycache__ comes along (its times kept): numba's compiled kernels are found there, not compiled again
    shutil.copytree(REPO / "workflow_rl", pkg, ignore=shutil.ignore_patterns("*.pt"))
    shutil.copytree(REPO / "workflow_rl" / "pretrained", pkg / "pretrained", dirs_exist_ok=True)
    _add_toy_term(pkg)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(tmp_path),
           "HOME": os.environ.get("HOME", str(tmp_path))}
    r = subprocess.run([sys.executable, "-c", CHECK, str(tmp_path / "out"), json.dumps(SMALL)], capture_output=True,
                       text=True, cwd=tmp_path, env=env, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads(r.stdout.strip().splitlines()[-1])
    out = tmp_path / "out"

    # the registry: its column, its episode-end record, its resume rule
    assert res["terms"] == ["env", "align", "restore"]
    assert res["columns"][5:9] == ["env_reward", "alignment_bonus", "restore_reward", "total_reward"]
    assert "restore_return" in res["ended"] and res["same_run"]

    # the vector-env rollout trains on it and logs it; the episode workers too
    assert res["train"][0] == 0, res["train"][1]
    _check_term_column(_rows(out / "run"), 0.5)
    _check_term_column(_rows(out / "workers"), 0.5)

    # the resume identity: another weight is refused in one line, by the command and by the trainer
    rc, err = res["resume"]
    assert rc == 2 and err.strip().startswith("error:") and len(err.strip().splitlines()) == 1, err
    assert "--restore-penalty 0.5, this run has 0.25" in err
    assert "--restore-penalty 0.5, this run has 0.25" in res["restore_other"]

    # the snapshot holds the term's running return (a mid-episode checkpoint), and resuming it is exact
    assert res["mid_running"] == ["align", "env", "restore"]
    assert all(v <= 0 for v in res["mid_restore"]) and any(v < 0 for v in res["mid_restore"])
    assert res["resume_exact"]

    # the planner and expert iteration do not value it: one error line each, nothing written
    for key in ("evaluate", "expert"):
        rc, err = res[key]
        assert rc == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
        assert "trained with the restore reward term too (--restore-penalty 0.5)" in err, err
    assert res["evaluate"][1].startswith("error: --plan values")
    assert res["expert"][1].startswith("error: expert iteration values")
    assert "expert_iteration.json" not in res["expert_wrote"]
    assert res["make_act"].startswith("the planner values the env term")

    # at weight 0 the term changes nothing: the package without it trains the same run, bit for bit
    plain = trainer.Trainer(TrainConfig(**SMALL), tmp_path / "plain", progress=False)
    plain.run()
    zero = torch.load(out / "zero.pt", weights_only=True)
    assert all(torch.equal(zero[k], v) for k, v in plain.agent.state_dict().items())
    with_term, without = read_log(out / "zero"), read_log(tmp_path / "plain")
    assert len(with_term) == len(without)
    for a, b in zip(with_term, without):
        zeroed = a.pop("restore_reward")
        assert a == b and (zeroed == "" or math.isnan(float(zeroed)) or float(zeroed) == 0.0)
