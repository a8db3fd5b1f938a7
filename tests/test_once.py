"""A command validates its settings once, at its boundary (``checks.ValidatedOnce``), and reads its starting
checkpoint (``--init-checkpoint``) once: every later ask is answered from memory (``rl.pretrained.read_spec``),
unless the file changed meanwhile."""
import collections
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


@pytest.fixture
def validations(monkeypatch):
    """How often each settings class's full ``validate`` ran, by class name."""
    from workflow_rl.rl.config import TrainConfig
    from workflow_rl.search.config import SearchConfig

    count = collections.Counter()
    for cls in (TrainConfig, SearchConfig):
        def counting(self, _real=cls.validate, _name=cls.__name__):
            count[_name] += 1
            return _real(self)

        monkeypatch.setattr(cls, "validate", counting)
    return count


@pytest.mark.parametrize("seeds", [1, 2])
def test_train_validates_once_and_reads_its_init_checkpoint_once(tmp_path, capsys, start, loads, validations, seeds):
    rc, _, err = run_main(["train", *TINY, "--init-checkpoint", str(start), "--seeds", str(seeds),
                           "--out", str(tmp_path / "t")], capsys)
    assert rc == 0, err
    assert loads.count(os.path.realpath(start)) == 1, loads
    assert validations == {"TrainConfig": 1}


def test_search_validates_once_and_reads_its_init_checkpoint_once(tmp_path, capsys, start, loads, validations):
    rc, _, err = run_main(["search", *TINY, "--init-checkpoint", str(start), "--workflows",
                           "critical_first;U,OH,OS,E,D", "--total-episodes", "8", "--eval-episodes", "2",
                           "--out", str(tmp_path / "s")], capsys)
    assert rc == 0, err
    assert loads.count(os.path.realpath(start)) == 1, loads
    assert validations == {"SearchConfig": 1, "TrainConfig": 1}   # the search's, and its training settings'


def test_a_trainer_built_by_hand_validates_its_config(tmp_path):
    """A library user's config, never validated, is validated by the trainer; a validated one changed since is
    validated again."""
    from workflow_rl.rl.config import TrainConfig
    from workflow_rl.rl.trainer import Trainer

    with pytest.raises(ValueError, match="--n-envs"):
        Trainer(TrainConfig(n_envs=0), tmp_path / "a", progress=False)
    cfg = TrainConfig(n_envs=4, max_episodes=1)
    cfg.validate()
    assert cfg.validated
    cfg.n_envs = 0
    assert not cfg.validated
    with pytest.raises(ValueError, match="--n-envs"):
        Trainer(cfg, tmp_path / "b", progress=False)


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


def test_a_resumed_search_validates_once_and_reads_its_init_checkpoint_once(tmp_path, capsys, start, loads,
                                                                            validations, monkeypatch):
    """``search --resume`` rebuilds the settings it saved: they are validated once there too (the state's check
    against them reuses the validated settings rather than building and validating a second copy)."""
    out = tmp_path / "s"
    args = ["search", *TINY, "--init-checkpoint", str(start), "--workflows", "critical_first;U,OH,OS,E,D",
            "--total-episodes", "8", "--eval-episodes", "2"]
    rc, _, err = run_main([*args, "--out", str(out)], capsys)
    assert rc == 0, err
    # from a folder whose runs/search (the default --out) holds another search: a resume is not a new search there
    monkeypatch.chdir(tmp_path)
    rc, _, err = run_main([*args], capsys)
    assert rc == 0 and (tmp_path / "runs" / "search" / "search_state.json").is_file(), err
    loads.clear()
    validations.clear()
    rc, text, err = run_main(["search", "--resume", str(out), "--no-progress"], capsys)
    assert rc == 0, err
    assert loads.count(os.path.realpath(start)) <= 1, loads
    assert validations == {"SearchConfig": 1, "TrainConfig": 1}, validations


def test_a_state_file_changed_before_the_lock_is_read_again(tmp_path, capsys, start, loads, validations,
                                                           monkeypatch):
    """What another process left in the folder by the time the lock is held is what the resumed search runs on:
    a state file rewritten between the first read and the lock is read, and its settings validated, again."""
    import contextlib
    import json

    from workflow_rl.runs import search as cli_search

    out = tmp_path / "s"
    rc, _, err = run_main(["search", *TINY, "--init-checkpoint", str(start), "--workflows", "critical_first",
                           "--total-episodes", "8", "--eval-episodes", "2", "--out", str(out)], capsys)
    assert rc == 0, err
    real = cli_search.RunDirLock

    @contextlib.contextmanager
    def rewritten_first(path):
        state = json.loads((out / "search_state.json").read_text())
        state["config"]["total_episodes"] = 12   # another process grew the budget meanwhile
        (out / "search_state.json").write_text(json.dumps(state))
        with real(path):
            yield

    monkeypatch.setattr(cli_search, "RunDirLock", rewritten_first)
    validations.clear()
    rc, _, err = run_main(["search", "--resume", str(out), "--no-progress"], capsys)
    assert rc == 0, err
    assert validations["SearchConfig"] == 2
    assert json.loads((out / "search_state.json").read_text())["config"]["total_episodes"] == 12
    assert json.loads((out / "summary.json").read_text())["total_episodes"] == 12
