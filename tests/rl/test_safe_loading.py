"""A checkpoint is data, never a program (issue O): every path that reads a ``.pt`` (``evaluate FILE``,
``--init-checkpoint``, ``--resume``, ``train --seeds`` batch state, the shipped agents) goes through torch's
weights-only unpickler, so a file whose pickle calls ``os.system`` is refused with one ``error:`` line before any of
its code runs; and weights that are not finite are refused where they are read."""
import collections
import os
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import run_in_process
from helpers import TINY
from helpers import assert_one_error_line as _one_error_line

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
    r = run_in_process(["evaluate", str(path), "--episodes", "1"], cwd=tmp_path)
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
    good = load_checkpoint(pretrained.path("universal"))
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
    good = load_checkpoint(pretrained.path("universal"))
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
    good = load_checkpoint(pretrained.path("universal"))
    cfg = {**good["config"], "ppo": {**good["config"]["ppo"], "learning_rate": 0.0}}
    torch.save({**good, "config": cfg}, tmp_path / "bad.pt")
    with pytest.raises(CheckpointError, match="--learning-rate must be > 0"):
        load_checkpoint(tmp_path / "bad.pt")


# ------------------------------------------------------------------------------- what every tensor is (issue Q)
def _nan_with_a_planted_method(w: torch.Tensor) -> torch.Tensor:
    """NaN weights whose ``is_floating_point`` is shadowed by an instance attribute the unpickler's tensor rebuild
    restores: ``OrderedDict()`` (an allowed global) is falsy, so a check asking the tensor itself saw no floats."""
    t = torch.full_like(w, float("nan"))
    t.is_floating_point = collections.OrderedDict
    return t


HOSTILE_WEIGHTS = {
    "planted attribute": (_nan_with_a_planted_method, "carrying attributes \\(is_floating_point\\)"),
    "complex with NaN parts": (lambda w: torch.complex(torch.full_like(w, float("nan")), w), "complex64 tensor"),
    "half precision": (lambda w: w.half(), "float16 tensor"),
    "absurd finite size": (lambda w: torch.full_like(w, 3e38), "3e\\+38, beyond 1e\\+06"),
    "sparse": (lambda w: w.to_sparse(), "sparse tensor"),
    "zero-stride expansion": (lambda w: torch.zeros(1).expand(10**7, 10**7), "strides \\(0, 0\\), 4 bytes stored"),
    "meta": (lambda w: torch.empty_like(w, device="meta"), "meta tensor"),
    "parameter with an attribute": (lambda w: _with_attr(torch.nn.Parameter(w.clone())), "carrying attributes"),
}


def _with_attr(p: torch.nn.Parameter) -> torch.nn.Parameter:
    p.note = "x"
    return p


@pytest.mark.parametrize("case", list(HOSTILE_WEIGHTS))
def test_every_tensor_is_checked_for_what_it_is_before_use(case, tmp_path, capsys):
    """Each of these got past the old finite check (evaluated, replayed, trained on) or raised a traceback deep in
    torch (the expansion tried to allocate 400 TB). Now refused on loading, before any value is read."""
    good = load_checkpoint(pretrained.path("universal"))
    make, match = HOSTILE_WEIGHTS[case]
    first = next(iter(good["agent"]))
    torch.save({**good, "agent": {**good["agent"], first: make(good["agent"][first])}}, tmp_path / "bad.pt")
    with pytest.raises(CheckpointError, match=match):
        load_checkpoint(tmp_path / "bad.pt")
    rc = main(["evaluate", str(tmp_path / "bad.pt"), "--episodes", "1", "--out", str(tmp_path / "ev")])
    _one_error_line(rc, capsys.readouterr().err, match)
    assert not (tmp_path / "ev").exists()


def test_a_planted_tensor_in_an_optimizer_state_is_refused_too(tmp_path):
    """Every tensor of the file, not only the weights: the Adam state, the engine snapshot."""
    good = load_checkpoint(pretrained.path("universal"))
    w = next(iter(good["agent"].values()))
    opt = {"state": {0: {"step": torch.tensor(1.0), "exp_avg": _nan_with_a_planted_method(w)}}, "param_groups": []}
    torch.save({**good, "optimizer": opt}, tmp_path / "bad.pt")
    with pytest.raises(CheckpointError, match="carrying attributes"):
        load_checkpoint(tmp_path / "bad.pt")


def test_a_numpy_array_of_a_dtype_no_file_holds_is_refused(tmp_path):
    """Half precision passes the unpickler's numeric allow-list; no workflow-rl file holds it."""
    good = load_checkpoint(pretrained.path("universal"))
    per_env = np.asarray(good["counters"]["episodes_per_env"]).astype(np.float16)
    torch.save({**good, "counters": {**good["counters"], "episodes_per_env": per_env}}, tmp_path / "bad.pt")
    with pytest.raises(CheckpointError, match="array of dtype <f2"):
        load_checkpoint(tmp_path / "bad.pt")


class _RawPickle:
    """A ``pickle_module`` for ``torch.save`` that writes the bytes it is given as the file's pickle: how a test
    builds a pickle no Python object could be dumped to (the pickler itself recurses)."""

    class Pickler:
        def __init__(self, f, protocol=None):
            self.f = f

        def dump(self, raw: bytes) -> None:
            self.f.write(raw)


def _deep_pickle(depth: int) -> bytes:
    """{"agent": [[[...]]]}, ``depth`` lists deep, in the opcodes torch's weights-only unpickler reads."""
    key = pickle.BINUNICODE + len(b"agent").to_bytes(4, "little") + b"agent"
    return (pickle.PROTO + b"\x02" + pickle.EMPTY_DICT + key + pickle.EMPTY_LIST * depth
            + pickle.APPEND * (depth - 1) + pickle.SETITEM + pickle.STOP)


def test_200000_deep_nesting_is_refused_not_a_recursion_error(tmp_path, capsys):
    path = tmp_path / "deep.pt"
    torch.save(_deep_pickle(200_000), path, pickle_module=_RawPickle)
    assert isinstance(torch.load(path, weights_only=True)["agent"], list)   # it loads: the unpickler is a loop
    with pytest.raises(CheckpointError, match="nested deeper than 32 levels"):
        load_checkpoint(path)
    rc = main(["evaluate", str(path), "--episodes", "1"])
    _one_error_line(rc, capsys.readouterr().err, "nested deeper")


@pytest.mark.parametrize("hidden,match", [([10**9], "--hidden must be in"),
                                          ([4096, 4096], "do not fit the network its config describes")])
def test_a_config_claiming_a_huge_network_is_refused_before_building_it(hidden, match, tmp_path, capsys):
    """The saved hidden sizes are bounded like the flag's, and the weights must be the network's the config
    describes, name for name and shape for shape, checked on the meta device before any network is built."""
    good = load_checkpoint(pretrained.path("universal"))
    torch.save({**good, "config": {**good["config"], "ppo": {**good["config"]["ppo"], "hidden": hidden}}},
               tmp_path / "bad.pt")
    with pytest.raises(CheckpointError, match=match):
        load_checkpoint(tmp_path / "bad.pt")
    rc = main(["evaluate", str(tmp_path / "bad.pt"), "--episodes", "1"])
    _one_error_line(rc, capsys.readouterr().err, match)


def test_the_hidden_flag_is_bounded(tmp_path, capsys):
    rc = main(["train", *TINY, "--hidden", str(10**9), "--out", str(tmp_path / "run")])
    _one_error_line(rc, capsys.readouterr().err, "--hidden must be in")
    assert not (tmp_path / "run").exists()
