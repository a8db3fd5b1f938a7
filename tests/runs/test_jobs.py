"""The Python API runs every job a command runs: ``workflow_rl.cli.job(argv)`` gives the configs a command line
stands for, and the ``workflow_rl.runs`` function given them writes what the command writes."""
import errno
import json
import os

import pytest
from helpers import run_main

from workflow_rl.cli import job
from workflow_rl.runs.evaluate import EvaluateConfig, evaluate
from workflow_rl.runs.failures import failure
from workflow_rl.runs.reports import compare_report
from workflow_rl.runs.replay import ReplayConfig, replay
from workflow_rl.runs.train import train

TINY_TRAIN = ["--n-envs", "4", "--max-episodes", "2", "--min-episodes", "1", "--update-every-steps", "50",
              "--no-progress", "--eval-episodes", "2"]


def _results(folder) -> list[dict]:
    """evaluation.json's cells without their wall time."""
    rows = json.loads((folder / "evaluation.json").read_text())["results"]
    return [{k: v for k, v in r.items() if k != "seconds"} for r in rows]


def test_evaluate_from_python_writes_what_the_command_writes(tmp_path, capsys):
    argv = ["evaluate", "pretrained:universal", "--workflow", "D,OS,E,OH,U", "--episodes", "3", "--lengths", "5",
            "10", "--red-agents", "meander", "--mode", "both"]
    assert run_main([*argv, "--out", str(tmp_path / "cli")], capsys)[0] == 0
    (cfg,) = job([*argv, "--out", str(tmp_path / "api")])
    assert isinstance(cfg, EvaluateConfig) and cfg.episodes == 3 and cfg.red_agents == ("meander",)
    result = evaluate(cfg)
    assert _results(tmp_path / "api") == _results(tmp_path / "cli")
    assert [p.name for p in result.written] == ["evaluation.json", "evaluation.md", "episodes.csv"]
    assert (tmp_path / "api" / "episodes.csv").read_text() == (tmp_path / "cli" / "episodes.csv").read_text()
    assert run_main(["compare", str(tmp_path / "cli"), str(tmp_path / "api"), "--out", str(tmp_path / "cli.md")],
                    capsys)[0] == 0
    report = compare_report(tmp_path / "cli", tmp_path / "api", out=tmp_path / "api.md")
    assert report.written == tmp_path / "api.md" and report.exit_code == 0
    assert (tmp_path / "api.md").read_text() == (tmp_path / "cli.md").read_text()


def test_a_failure_that_is_no_bug_is_one_line():
    """``runs.failures.failure``: the rule by which the command line prints one ``error:`` line, for scripts."""
    assert failure(ValueError("--x must be > 0")) == ("--x must be > 0", 2)
    line, status = failure(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/x/log.csv"))
    assert status == 2 and line.startswith(f"{os.strerror(errno.ENOSPC)} writing /x/log.csv: make room")
    assert failure(RuntimeError("a bug")) is None and failure(KeyError("k")) is None


def test_an_evaluation_config_takes_its_kinds_defaults():
    one = EvaluateConfig("sleep").resolved()
    many = EvaluateConfig("sleep", workflow="all").resolved()
    assert (one.episodes, one.lengths, one.mode) == (1000, (30, 50, 100), "both")
    assert (many.episodes, many.lengths, many.mode) == (100, (100,), "greedy")
    assert EvaluateConfig("sleep", episodes=7, workflow="all").resolved().episodes == 7


def test_replay_from_python_writes_what_the_command_writes(tmp_path, capsys):
    argv = ["replay", "pretrained:universal", "--workflow", "none", "--episodes", "1", "--length", "6"]
    assert run_main([*argv, "--out", str(tmp_path / "cli.html")], capsys)[0] == 0
    (cfg,) = job([*argv, "--out", str(tmp_path / "api.html")])
    assert isinstance(cfg, ReplayConfig)
    result = replay(cfg)
    assert result.out == tmp_path / "api.html" and len(result.episodes) == 1
    assert (tmp_path / "api.html").read_text() == (tmp_path / "cli.html").read_text()


def test_train_from_python_writes_what_the_command_writes(tmp_path, capsys):
    argv = ["train", "--workflow", "D,OS,E,OH,U", *TINY_TRAIN]
    assert run_main([*argv, "--out", str(tmp_path / "cli")], capsys)[0] == 0
    result = train(*job([*argv, "--out", str(tmp_path / "api")]))
    assert result.exit_code == 0
    cli, api = (json.loads((tmp_path / d / "summary.json").read_text()) for d in ("cli", "api"))
    assert api["eval"] == cli["eval"] and api["episodes"] == cli["episodes"]


@pytest.mark.parametrize("argv,match", [(["compare", "a", "b"], "compare is no job"),
                                        (["evaluate", "sleep", "--episodes", "0"], None)])
def test_job_refuses_what_is_no_job(argv, match, capsys):
    with pytest.raises((ValueError, SystemExit)) as e:
        job(argv)
    if match:
        assert match in str(e.value)


def test_search_job_reads_resume_as_no_config(tmp_path):
    cfg, run = job(["search", "--resume", str(tmp_path)])
    assert cfg is None and run.resume and run.out == tmp_path


@pytest.mark.parametrize("job,kwargs,match", [
    ("evaluate", dict(agent=5), "agent must be a string"),
    ("evaluate", dict(agent="sleep", mode="fast"), "mode 'fast': use one of greedy, sampled, both"),
    ("evaluate", dict(agent="sleep", out=5), "out must be a path"),
    ("evaluate", dict(agent="sleep", engines="native"), "engines must be a list"),
    ("replay", dict(agent=5), "agent must be a string"),
    ("replay", dict(agent="sleep", out=5), "out must be a path"),
    ("evaluate", None, "cfg must be of type EvaluateConfig, got dict"),
    ("replay", None, "cfg must be of type ReplayConfig, got dict"),
])
def test_the_job_functions_check_their_configs_at_the_call(job, kwargs, match):
    """A config built in Python with a wrong type or an unknown mode is one ValueError naming the setting before
    anything loads or plays (it was an AttributeError from string code, a TypeError from pathlib, or a silent
    greedy evaluation for mode='fast')."""
    from workflow_rl.runs.evaluate import EvaluateConfig, evaluate
    from workflow_rl.runs.replay import ReplayConfig, replay

    run, config = {"evaluate": (evaluate, EvaluateConfig), "replay": (replay, ReplayConfig)}[job]
    with pytest.raises(ValueError, match=match):
        run({"agent": "sleep"} if kwargs is None else config(**kwargs))


@pytest.mark.parametrize("job,args,match", [
    ("train", lambda T, R: (None, R(out="x")), "cfg must be of type TrainConfig, got NoneType"),
    ("train", lambda T, R: ({"n_envs": 2}, R(out="x")), "cfg must be of type TrainConfig, got dict"),
    ("train", lambda T, R: (T(), R(out=5)), "--out must be a path"),
    ("train", lambda T, R: (T(), R(out="x", resume="no")), "--resume must be True or False"),
    ("search", lambda S, R: (S(), None), "run must be of type SearchRun, got NoneType"),
    ("search", lambda S, R: (S(), R(out=5)), "--out must be a path"),
    ("search", lambda S, R: (S(), R(out="x", overwrite=1)), "--overwrite must be True or False"),
])
def test_train_and_search_check_their_arguments_at_the_call(job, args, match, tmp_path, monkeypatch):
    """train(cfg, run) and search(cfg, run) refuse a wrong kind of argument in one ValueError before anything is
    written (``resume='no'`` was taken for True; None or a dict was an AttributeError)."""
    from workflow_rl.rl.config import TrainConfig
    from workflow_rl.runs.search import SearchRun, search
    from workflow_rl.runs.train import TrainRun, train
    from workflow_rl.search.config import SearchConfig

    monkeypatch.chdir(tmp_path)
    run, config, run_type = {"train": (train, TrainConfig, TrainRun), "search": (search, SearchConfig, SearchRun)}[job]
    with pytest.raises(ValueError, match=match):
        run(*args(config, run_type))
    assert list(tmp_path.iterdir()) == []


def test_a_threads_setting_of_any_of_its_kinds_passes_the_call_checks():
    """``threads`` is a count, 'auto' or 'off' (``int | str | None``): each passes check_config (a Union was checked
    as its first kind only, so train --threads auto was refused)."""
    from workflow_rl.checks import check_config
    from workflow_rl.runs.search import SearchRun
    from workflow_rl.runs.train import TrainRun

    for threads in (None, 2, "auto", "off"):
        check_config("run", TrainRun(threads=threads), TrainRun)
        check_config("run", SearchRun(threads=threads), SearchRun)
    with pytest.raises(ValueError, match="threads must be an integer"):
        check_config("run", TrainRun(threads=1.5), TrainRun)
