"""A command reads its starting checkpoint (``--init-checkpoint``) once: every later ask is answered from memory
(``rl.pretrained.read_spec``), unless the file changed meanwhile."""
import os

import pytest
import torch

from helpers import run_main

TINY = ["--n-envs", "4", "--max-episodes", "1", "--eval-episodes", "0", "--no-progress"]


@pytest.fixture(scope="module")
def start(tmp_path_factory):
    """A tiny trained checkpoint (one workflow) to start from."""
    from workflow_rl.rl.config import TrainConfig
    from workflow_rl.rl.trainer import Trainer

    out = tmp_path_factory.mktemp("start")
    Trainer(TrainConfig(workflow="critical_first", n_envs=4, max_episodes=1), out, progress=False).run()
    return out / "checkpoints" / "latest.pt"


@pytest.fixture
def loads(monkeypatch):
    """The files ``torch.load`` opened, resolved, in order (every checkpoint read goes through it)."""
    from workflow_rl.rl import pretrained

    monkeypatch.setattr(pretrained, "_READ", {}, raising=False)   # nothing remembered from an earlier test
    seen, real = [], torch.load

    def counting(f, *a, **kw):
        seen.append(os.path.realpath(f) if isinstance(f, (str, os.PathLike)) else f)
        return real(f, *a, **kw)

    monkeypatch.setattr(torch, "load", counting)
    return seen


def test_train_reads_its_init_checkpoint_once(tmp_path, capsys, start, loads):
    rc, _, err = run_main(["train", *TINY, "--init-checkpoint", str(start), "--out", str(tmp_path / "t")], capsys)
    assert rc == 0, err
    assert loads.count(os.path.realpath(start)) == 1, loads


def test_search_reads_its_init_checkpoint_once(tmp_path, capsys, start, loads):
    rc, _, err = run_main(["search", *TINY, "--init-checkpoint", str(start), "--workflows", "critical_first;U,OH,OS,E,D",
                           "--total-episodes", "8", "--eval-episodes", "2", "--out", str(tmp_path / "s")], capsys)
    assert rc == 0, err
    assert loads.count(os.path.realpath(start)) == 1, loads


def test_a_replaced_checkpoint_is_read_again(tmp_path, start, loads):
    from workflow_rl.rl.pretrained import read_spec

    ck = tmp_path / "ck.pt"
    ck.write_bytes(start.read_bytes())
    first = read_spec(str(ck))
    assert read_spec(str(ck)) is first and len(loads) == 1
    os.replace(ck, tmp_path / "moved.pt")
    (tmp_path / "new.pt").write_bytes(start.read_bytes())
    os.replace(tmp_path / "new.pt", ck)   # another file under the same name
    assert read_spec(str(ck)) is not first and len(loads) == 2
    with pytest.raises(ValueError, match="no checkpoint"):
        read_spec(str(tmp_path / "gone.pt"))
