"""A checkpoint is data, never a program (issue O): every path that reads a ``.pt`` (``evaluate FILE``,
``--init-checkpoint``, ``--resume``, ``train --seeds`` batch state, the shipped agents) goes through torch's
weights-only unpickler, so a file whose pickle calls ``os.system`` is refused with one ``error:`` line before any of
its code runs; and weights that are not finite are refused where they are read."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from test_bad_input import ENV, TINY
from test_bad_input import _assert_one_error_line as _one_error_line

from workflow_rl.cli import main
from workflow_rl.rl import pretrained
from workflow_rl.rl.checkpoint import CheckpointError, load_checkpoint, safe_load


class _Payload:
    """What an attacker pickles: unpickling it calls ``os.system`` (here: creates a marker file)."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def _malicious(path: Path, marker: Path, inside: dict | None = None) -> Path:
    """A file that looks like a workflow-rl checkpoint with a payload in one of its fields."""
    ck = dict(inside or {"format": "workflow-rl", "version": 1, "config": {}, "counters": {}})
    ck["agent"] = {"actor.0.weight": _Payload(marker)}
    torch.save(ck, path)
    return path


def test_the_payload_really_runs_under_a_plain_unpickler(tmp_path):
    """The test's own malicious file is real: ``weights_only=False`` (what the loader used to do) runs it."""
    marker = tmp_path / "ran"
    path = _malicious(tmp_path / "evil.pt", marker)
    torch.load(path, weights_only=False)
    assert marker.exists()


def test_evaluate_refuses_a_malicious_checkpoint_without_running_it(tmp_path):
    marker = tmp_path / "ran"
    path = _malicious(tmp_path / "evil.pt", marker)
    r = subprocess.run([sys.executable, "-m", "workflow_rl.cli", "evaluate", str(path), "--episodes", "1"],
                       capture_output=True, text=True, env=ENV, cwd=tmp_path, timeout=300)
    _one_error_line(r.returncode, r.stderr, "needs posix.system to load")
    assert not marker.exists()


@pytest.mark.parametrize("where", ["init", "resume", "seeds-batch"])
def test_training_refuses_a_malicious_checkpoint_without_running_it(where, tmp_path, capsys):
    marker, out = tmp_path / "ran", tmp_path / "run"
    if where == "init":
        argv = ["train", *TINY, "--out", str(out), "--init-checkpoint", str(_malicious(tmp_path / "e.pt", marker))]
    else:
        seeds = ["--seeds", "2"] if where == "seeds-batch" else []
        assert main(["train", *TINY, *seeds, "--max-episodes", "1", "--out", str(out)]) == 0
        if where == "resume":
            target = out / "checkpoints" / "latest.pt"
            _malicious(target, marker, load_checkpoint(target))
        else:
            _malicious(out / "batch.pt", marker)
        argv = ["train", *TINY, *seeds, "--out", str(out), "--resume"]
    capsys.readouterr()
    rc = main(argv)
    _one_error_line(rc, capsys.readouterr().err, "needs posix.system to load")
    assert not marker.exists()


def test_a_non_numeric_numpy_array_is_refused(tmp_path):
    """An object array could smuggle arbitrary objects past the array allow-list: refused after loading."""
    good = load_checkpoint(pretrained.path("cage2"))
    torch.save({**good, "counters": {**good["counters"], "episodes_per_env": np.array(["a"], dtype=object)}},
               tmp_path / "obj.pt")
    with pytest.raises(CheckpointError, match="needs numpy.dtypes.ObjectDType to load"):
        load_checkpoint(tmp_path / "obj.pt")


@pytest.mark.parametrize("name", pretrained.names())
def test_shipped_agents_load_weights_only(name):
    """The shipped files need nothing beyond the allow-list (their numpy counters are plain int arrays)."""
    ck = safe_load(pretrained.path(name))
    assert ck["format"] == "workflow-rl" and ck["agent"]


@pytest.mark.parametrize("field,value", [("weights", float("nan")), ("weights", float("inf")),
                                         ("optimizer", float("nan"))])
def test_non_finite_weights_are_refused(field, value, tmp_path, capsys):
    good = load_checkpoint(pretrained.path("cage2"))
    if field == "weights":
        agent = {k: torch.full_like(v, value) if v.is_floating_point() else v for k, v in good["agent"].items()}
        bad = {**good, "agent": agent}
    else:
        bad = {**good, "optimizer": {"state": {0: {"step": torch.tensor(3.0), "exp_avg": torch.tensor([value])}},
                                     "param_groups": []}}
    torch.save(bad, tmp_path / "bad.pt")
    with pytest.raises(CheckpointError, match=f"its {field if field == 'optimizer' else 'weights'}"):
        load_checkpoint(tmp_path / "bad.pt")
    for argv in (["evaluate", str(tmp_path / "bad.pt"), "--episodes", "1"],
                 ["train", *TINY, "--out", str(tmp_path / "run"), "--init-checkpoint", str(tmp_path / "bad.pt")]):
        rc = main(argv)
        _one_error_line(rc, capsys.readouterr().err, "NaN or infinite")
    assert not (tmp_path / "run").exists()


def test_a_checkpoint_config_passes_the_command_lines_checks(tmp_path):
    """A saved config with a value the command line refuses (here a learning rate of 0) is refused on loading."""
    good = load_checkpoint(pretrained.path("cage2"))
    cfg = {**good["config"], "ppo": {**good["config"]["ppo"], "learning_rate": 0.0}}
    torch.save({**good, "config": cfg}, tmp_path / "bad.pt")
    with pytest.raises(CheckpointError, match="--learning-rate must be > 0"):
        load_checkpoint(tmp_path / "bad.pt")
