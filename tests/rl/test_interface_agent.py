"""Any agent class with CybORG's agent interface evaluates beside ours (issue Z item 1): a submission-style class
(tests/data/agents/restorer.py, written without workflow-rl) plays the same episodes as the restore_compromised
baseline, episode for episode, on the native engine and on real CybORG, through evaluate, compare and replay."""
import csv
import json

import pytest

from helpers import REPO, run_main

AGENT = str(REPO / "tests" / "data" / "agents" / "restorer.py") + ":Restorer"


def _episodes(folder):
    with open(folder / "episodes.csv") as f:
        return [(r["engine"], r["red_agent"], r["length"], r["episode"], r["return"]) for r in csv.DictReader(f)]


@pytest.mark.parametrize("engine", ["native", pytest.param("cyborg", marks=[pytest.mark.cyborg, pytest.mark.slow])])
def test_an_interface_agent_plays_what_the_same_baseline_plays(engine, tmp_path, capsys):
    n = "16" if engine == "native" else "2"
    common = ["--engine", engine, "--red-agents", "bline", "meander", "--lengths", "20", "30", "--episodes", n]
    rc, _, err = run_main(["evaluate", AGENT, *common, "--out", str(tmp_path / "class")], capsys)
    assert rc == 0, err
    rc, _, err = run_main(["evaluate", "restore_compromised", *common, "--out", str(tmp_path / "base")], capsys)
    assert rc == 0, err
    ours, base = _episodes(tmp_path / "class"), _episodes(tmp_path / "base")
    assert len(ours) == len(base) > 0 and ours == base
    report = json.loads((tmp_path / "class" / "evaluation.json").read_text())
    assert report["policy"] == AGENT and {c["red_agent"] for c in report["results"]} == {"B_lineAgent",
                                                                                          "RedMeanderAgent"}
    rc, out, err = run_main(["compare", str(tmp_path / "class"), str(tmp_path / "base")], capsys)
    assert rc == 0, err


def test_a_replay_plays_an_interface_agent(tmp_path, capsys):
    rc, _, err = run_main(["replay", AGENT, "--episodes", "1", "--length", "10", "--out", str(tmp_path / "r.html")],
                          capsys)
    assert rc == 0, err
    assert (tmp_path / "r.html").stat().st_size > 1000


def test_constructor_arguments_are_passed(tmp_path, capsys):
    rc, _, err = run_main(["evaluate", AGENT, "--agent-kwargs", '{"hosts": 13}', "--red-agents", "bline",
                           "--lengths", "5", "--episodes", "2", "--out", str(tmp_path / "e")], capsys)
    assert rc == 0, err
    settings = json.loads((tmp_path / "e" / "evaluation.json").read_text())["settings"]
    assert settings["agent_kwargs"] == '{"hosts": 13}'


@pytest.mark.parametrize("agent, kwargs, says", [
    ("tests/data/agents/nothere.py:Restorer", None, "no file"),
    ("tests/data/agents/restorer.py:Missing", None, "has no class Missing"),
    ("tests/data/agents/restorer.py:NoAction", None, "has no get_action"),
    ("tests/data/agents/restorer.py:Broken", None, "Broken\\(\\*\\*\\{\\}\\) failed.*cannot start"),
    ("no_such_module_xyz:Agent", None, "cannot import module no_such_module_xyz"),
    ("tests/data/agents/restorer.py:Restorer", "[1]", "must be a JSON object"),
    ("tests/data/agents/restorer.py:Restorer", "{oops", "not JSON"),
    ("tests/data/agents/restorer.py:Restorer", '{"nope": 1}', "failed.*fix --agent-kwargs"),
    ("sleep", "{}", "drop --agent-kwargs"),
])
def test_a_bad_agent_is_one_error_line(agent, kwargs, says, tmp_path, capsys, monkeypatch):
    import re

    monkeypatch.chdir(REPO)
    extra = ["--agent-kwargs", kwargs] if kwargs is not None else []
    rc, _, err = run_main(["evaluate", agent, *extra, "--red-agents", "bline", "--lengths", "5", "--episodes", "2",
                           "--out", str(tmp_path / "e")], capsys)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("error:"), err
    assert re.search(says, lines[0]), lines[0]
    assert not (tmp_path / "e").exists()


def test_an_action_out_of_range_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    rc, _, err = run_main(["evaluate", "tests/data/agents/restorer.py:Broken", "--agent-kwargs", '{"fail": false}',
                           "--red-agents", "bline", "--lengths", "5", "--episodes", "2"], capsys)
    assert rc == 2 and "returned 999" in err and "0..144" in err, err
