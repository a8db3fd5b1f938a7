"""Damaged or edited run state is refused before anything is written (issue O, items 2 and 5): every field class of
``search_state.json``, of a checkpoint a resume reads and of a batch state; ``--out`` onto another command's run or
onto files that are no run's; and a batched search killed (SIGINT, kill -9) and resumed is the uninterrupted one."""
import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from helpers import interrupting_executor, run_in_process
from helpers import ENV, TINY, assert_one_error_line, run_main

from workflow_rl.sim import attackers
from workflow_rl.rl.checkpoint import load_checkpoint
from workflow_rl.search.batched_executor import STATE_FILE
from workflow_rl.search.search import SearchConfig, SearchInterrupted, WorkflowSearch

SEARCH = dict(n_envs=4, max_episodes=4, min_episodes=1, total_episodes=64, eval_episodes=4, seed=1, n_init=2,
              batch_workflows=2, post_gate_episodes=1, update_every_steps=50, checkpoint_every=3)
"""A batched search small enough for a test: caps of 16 episodes, two workflows at a time."""


def _interrupted_search(out: Path, rounds: int, **kw) -> WorkflowSearch:
    s = WorkflowSearch(SearchConfig(**{**SEARCH, **kw}), out, progress=False)
    with pytest.raises(SearchInterrupted):
        s.run(interrupting_executor(s.cfg.batch_slots, rounds))
    return s


@pytest.fixture(scope="module")
def saved_search(tmp_path_factory):
    """A batched search stopped with workflows recorded and workflows pending, each with its checkpoint."""
    out = tmp_path_factory.mktemp("state") / "s"
    s = _interrupted_search(out, rounds=6)
    assert s.state.iterations and s.state.pending and (out / STATE_FILE).is_file()
    return out


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """The uninterrupted search a resume test compares against, run once per module for each setting (read only:
    the tests resume copies of their own, never this one)."""
    done = {}

    def search(**kw) -> Path:
        key = json.dumps(kw, sort_keys=True)
        if key not in done:
            out = tmp_path_factory.mktemp("full") / "full"
            WorkflowSearch(SearchConfig(**{**SEARCH, **kw}), out, progress=False).run()
            done[key] = out
        return done[key]

    return search


def _edit_state(d: Path, edit) -> None:
    state = json.loads((d / "search_state.json").read_text())
    edit(state)
    (d / "search_state.json").write_text(json.dumps(state))


def _pending_checkpoint(d: Path) -> Path:
    state = json.loads((d / "search_state.json").read_text())
    return d / state["pending"][0]["run_dir"] / "checkpoints" / "latest.pt"


def _edit_checkpoint(path: Path, edit) -> None:
    ck = torch.load(path, weights_only=False)
    edit(ck)
    torch.save(ck, path)


def _first(key):
    return lambda s: s[key][0]


def _set(getter, **fields):
    def edit(state):
        getter(state).update(fields)
    return edit


def _symlink_out(d: Path) -> None:
    (d.parent / "elsewhere").mkdir()
    (d / "workflows" / "escape").symlink_to(d.parent / "elsewhere", target_is_directory=True)
    _edit_state(d, _set(_first("pending"), run_dir="workflows/escape/x"))


def _claims_over_budget(s: dict) -> None:
    """A budget just below what is used plus what the pending workflows claim."""
    s["config"]["total_episodes"] = s["episodes_used"] + sum(p["budget"] for p in s["pending"]) - 1


STATE_CASES = {
    # paths: confined to the run folder
    "pending run_dir ../..": (lambda d: _edit_state(d, _set(_first("pending"), run_dir="../..")),
                              "leaves the run folder"),
    "pending run_dir absolute": (lambda d: _edit_state(d, _set(_first("pending"), run_dir="/tmp")),
                                 "leaves the run folder"),
    "pending run_dir symlink out": (_symlink_out, "symbolic link"),
    "checkpoint ../x": (lambda d: _edit_state(d, _set(_first("iterations"), checkpoint="../x/latest.pt")),
                        "leaves the run folder"),
    "parent_checkpoint absolute": (lambda d: _edit_state(d, _set(_first("pending"), parent_checkpoint="/etc/x")),
                                   "leaves the run folder"),
    # workflows: valid and trained once
    "iteration workflow garbled": (lambda d: _edit_state(d, _set(_first("iterations"), workflow="D,E,X")),
                                   "search_state.json is damaged"),
    "pending repeats a recorded workflow": (
        lambda d: _edit_state(d, lambda s: s["pending"][0].update(workflow=s["iterations"][0]["workflow"])),
        "twice"),
    "two workflows one run_dir": (
        lambda d: _edit_state(d, lambda s: s["pending"][0].update(run_dir=s["iterations"][0]["run_dir"])),
        "share a run_dir"),
    # counters and ranges
    "dispatched 1e30 (float)": (lambda d: _edit_state(d, lambda s: s.update(dispatched=1e30)),
                                "dispatched must be an integer"),
    "dispatched 10**30": (lambda d: _edit_state(d, lambda s: s.update(dispatched=10**30)), "dispatched must be in"),
    "pending budget 10**30": (lambda d: _edit_state(d, _set(_first("pending"), budget=10**30)), "budget must be in"),
    "episodes_trained 10**30": (lambda d: _edit_state(d, lambda s: (s["iterations"][0].update(
        episodes_trained=10**30), s.update(episodes_used=10**30 + sum(r["episodes_trained"] for r in
                                                                       s["iterations"][1:])))),
        "search_state.json is damaged"),
    "claims exceed the budget": (lambda d: _edit_state(d, _claims_over_budget), "pending claims .* exceed"),
    "seed_budgets wrong length": (lambda d: _edit_state(d, _set(_first("pending"), seed_budgets=[1, 2, 3])),
                                  "seed_budgets"),
    "compliance 5": (lambda d: _edit_state(d, _set(_first("iterations"), compliance=5.0)), "compliance must be in"),
    "seed_status bogus": (lambda d: _edit_state(d, _set(_first("iterations"), seed_status=["great"])),
                          "seed_status"),
    "gate_episodes negative": (lambda d: _edit_state(d, _set(_first("iterations"), gate_episodes=[-1])),
                               "gate_episodes"),
    # finished on a search that is not done
    "finished with pending": (lambda d: _edit_state(d, lambda s: s.update(finished=True)), "finished is true"),
    "finished with budget left": (lambda d: _edit_state(d, lambda s: s.update(
        finished=True, pending=[], dispatched=len(s["iterations"]))), "finished is true"),
    # checkpoints present, loadable and of this search's settings
    "iteration checkpoint missing": (lambda d: (d / json.loads((d / "search_state.json").read_text())[
        "iterations"][0]["checkpoint"]).unlink(), "policy of iteration 1 .* is missing"),
    "iteration checkpoint garbage": (lambda d: (d / json.loads((d / "search_state.json").read_text())[
        "iterations"][0]["checkpoint"]).write_bytes(b"\x00junk"), "corrupt"),
    "n_envs changed": (lambda d: _edit_state(d, lambda s: s["config"].update(n_envs=8)), "--n-envs"),
    "learning rate changed": (lambda d: _edit_state(d, lambda s: s["config"].update(learning_rate=1e-3)),
                              "--learning-rate"),
    # a saved setting out of its range is a damaged file, named as the file names it (no flag the user never typed)
    "total_episodes -1": (lambda d: _edit_state(d, lambda s: s["config"].update(total_episodes=-1)),
                          r"is damaged \(total_episodes must be in \[1, "),
    "learning_rate 5": (lambda d: _edit_state(d, lambda s: s["config"].update(learning_rate=5.0)),
                        r"is damaged \(learning_rate must be in \[0, 1\]"),
    "hidden text": (lambda d: _edit_state(d, lambda s: s["config"].update(hidden=["x"])),
                    r"is damaged \(hidden must be an integer"),
    # a setting every state file holds, missing: damaged, not today's default (100,000 episodes) resumed
    "total_episodes missing": (lambda d: _edit_state(d, lambda s: s["config"].pop("total_episodes")),
                               r"is damaged \(its settings lack total_episodes\)"),
    # fields of a pending workflow's checkpoint the resume reads
    "checkpoint recent text": (lambda d: _edit_checkpoint(_pending_checkpoint(d), lambda c: c.update(
        recent="abc")), "recent"),
    "checkpoint recent nan": (lambda d: _edit_checkpoint(_pending_checkpoint(d), lambda c: c.update(
        recent=[float("nan")])), "recent"),
    "checkpoint gate_at text": (lambda d: _edit_checkpoint(_pending_checkpoint(d), lambda c: c["counters"].update(
        gate_at="3", gate_episodes=3)), "gate_at"),
    "checkpoint total_episodes 10**30": (lambda d: _edit_checkpoint(_pending_checkpoint(d), lambda c: c[
        "counters"].update(total_episodes=10**30)), "total_episodes"),
    "checkpoint stop_reason bogus": (lambda d: _edit_checkpoint(_pending_checkpoint(d), lambda c: c[
        "counters"].update(stop_reason="bored")), "stop_reason"),
    "checkpoint optimizer text": (lambda d: _edit_checkpoint(_pending_checkpoint(d), lambda c: c.update(
        optimizer="x")), "optimizer"),
    # the batch state
    "batch state garbage": (lambda d: (d / STATE_FILE).write_bytes(b"\x00junk"), "batch state .* is damaged"),
    "batch state obs shape": (lambda d: _edit_checkpoint(d / STATE_FILE, lambda c: c.update(obs=c["obs"][:3])),
                              "obs has shape"),
    "batch state slots text": (lambda d: _edit_checkpoint(d / STATE_FILE, lambda c: c.update(slots="x")),
                               "slots"),
    "batch state red kind 9": (lambda d: _edit_checkpoint(d / STATE_FILE, lambda c: c["env_state"]["red_kind"].fill(
        9)), "env_state.red_kind holds 9"),
    "batch state rank 9": (lambda d: _edit_checkpoint(d / STATE_FILE, lambda c: c["rank"].fill_(9)),
                           "rank holds a row that is not an ordering"),
    "batch state members 3e38": (lambda d: _edit_checkpoint(d / STATE_FILE, lambda c: c["members"].fill_(3e38)),
                                 "beyond 1e\\+06"),
    "search_state.json 200,000 deep": (lambda d: (d / "search_state.json").write_text("[" * 200_000 + "]" * 200_000),
                                       "nested deeper than Python can read"),
    "batch state run_dir out": (lambda d: _edit_checkpoint(d / STATE_FILE, lambda c: c["slots"].__setitem__(
        0, {**next(e for e in c["slots"] if e), "run_dir": "../.."})), "leaves the run folder"),
}


def _snapshot(d: Path) -> dict:
    return {p: (p.stat().st_mtime_ns, p.stat().st_size) for p in d.rglob("*") if p.is_file() and p.name != ".lock"}


@pytest.mark.parametrize("case", list(STATE_CASES))
def test_a_damaged_search_state_is_refused_before_anything_is_written(case, saved_search, tmp_path, capsys):
    d = tmp_path / "s"
    shutil.copytree(saved_search, d, symlinks=True)
    edit, match = STATE_CASES[case]
    edit(d)
    before = _snapshot(d)
    rc, _, err = run_main(["search", "--resume", str(d), "--no-progress"], capsys)
    assert_one_error_line(rc, err, match)
    assert _snapshot(d) == before, "a refused resume wrote"
    assert not (tmp_path / "workflows").exists()


def test_the_saved_search_itself_resumes(saved_search, tmp_path, capsys):
    """The fixture every case above edits is sound: unedited, it resumes to the end, and a finished search
    resumed again (it only rewrites its summary) is not taken for a damaged one."""
    d = tmp_path / "s"
    shutil.copytree(saved_search, d, symlinks=True)
    for _ in range(2):
        rc, _, err = run_main(["search", "--resume", str(d), "--no-progress"], capsys)
        assert rc == 0, err
    state = json.loads((d / "search_state.json").read_text())
    assert state["finished"] and state["episodes_used"] == SEARCH["total_episodes"]


@pytest.fixture(scope="module")
def saved_serial(tmp_path_factory):
    """A one-at-a-time search stopped by Ctrl-C in its second workflow: its checkpoint holds the engine snapshot."""
    from workflow_rl.rl.trainer import BatchedTrainer

    out = tmp_path_factory.mktemp("serial") / "s"
    update, calls = BatchedTrainer.update, []

    def ctrl_c_in_the_second(self, *a):
        calls.append(1)
        if len(calls) == 13:
            os.kill(os.getpid(), signal.SIGINT)
        return update(self, *a)

    BatchedTrainer.update = ctrl_c_in_the_second
    try:
        s = WorkflowSearch(SearchConfig(**{**SEARCH, "batch_workflows": 1}), out, progress=False)
        with pytest.raises(SearchInterrupted):
            s.run()
    finally:
        BatchedTrainer.update = update
    assert s.state.iterations and s.state.pending
    return out


@pytest.mark.parametrize("edit,match", [
    (lambda c: c.update(obs=c["obs"][:, :7]), "obs has shape"),
    (lambda c: c["episode_running"].update(env="x"), "episode_running.env"),
    (lambda c: c["counters"].update(round_active=-1), "round_active"),
    (lambda c: c["env_state"]["t"].fill(49), "env_state.t is not 50 in every env"),
    (lambda c: c["tracker"]["compliant"].fill_(51.0), "tracker counts more fixes than the 50 steps"),
    (lambda c: c["episode_running"]["env"].fill_(-1e4), "episode_running.env holds a return outside"),
    (lambda c: None, None),
], ids=["obs", "episode_running", "round_active", "mid-episode step", "mid-episode counts", "mid-episode return",
        "sound"])
def test_a_serial_search_checks_its_running_checkpoint_first(edit, match, saved_serial, tmp_path, capsys):
    d = tmp_path / "s"
    shutil.copytree(saved_serial, d)
    _edit_checkpoint(_pending_checkpoint(d), edit)
    assert torch.load(_pending_checkpoint(d), weights_only=False)["obs"] is not None
    before = _snapshot(d)
    rc, _, err = run_main(["search", "--resume", str(d), "--no-progress"], capsys)
    if match is None:
        assert rc == 0, err
        return
    assert_one_error_line(rc, err, match)
    assert _snapshot(d) == before


def test_logs_cut_short_by_a_kill_are_caught_up_and_others_left_alone(saved_search, tmp_path):
    from workflow_rl.search.outputs import catch_up_logs
    from workflow_rl.search.records import SearchState

    d = tmp_path / "s"
    shutil.copytree(saved_search, d, symlinks=True)
    records = SearchState.load(d / "search_state.json").iterations
    logs = [d / "gp_sampling_log.csv", d / "training_log.csv"]
    full = [p.read_bytes() for p in logs]
    logs[0].write_bytes(full[0][:full[0].rindex(b"\n", 0, -1) + 1])   # the last record's row never written
    logs[1].write_bytes(full[1][:-7])                                   # its training rows cut mid-row
    catch_up_logs(d, records)
    assert [p.read_bytes() for p in logs] == full
    logs[1].write_bytes(full[1].replace(b"update", b"UPDATE"))          # not a prefix: not this search's log
    catch_up_logs(d, records)
    assert logs[1].read_bytes() == full[1].replace(b"update", b"UPDATE")


# ---------------------------------------------------------------------------------------------- train --resume
@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A finished one-run ``train`` and a ``train --seeds 2`` (each can be resumed: it stops again at once)."""
    d = tmp_path_factory.mktemp("train")
    for name, extra in (("one", []), ("two", ["--seeds", "2"])):
        rc = _run_main_plain(["train", *TINY, "--eval-episodes", "0", *extra, "--out", str(d / name)])
        assert rc == 0
    return d


def _run_main_plain(argv) -> int:
    from workflow_rl.cli import main

    return main(argv)


TRAIN_CASES = {
    "recent text": (lambda c: c.update(recent="abc"), "recent"),
    "recent too long": (lambda c: c.update(recent=[0.0] * 101), "recent"),
    "obs wrong shape": (lambda c: c.update(obs=c["obs"][:2]), "obs has shape"),
    "obs text": (lambda c: c.update(obs="x"), "obs is not an array"),
    "env_state wrong dtype": (lambda c: c["env_state"].update(t=c["env_state"]["t"].astype("float32")),
                              "env_state.t"),
    "tracker missing": (lambda c: c.update(tracker=None), "tracker"),
    "rng wrong size": (lambda c: c["rng"].update(torch=torch.zeros(3, dtype=torch.uint8)), "rng.torch"),
    "gate_at text": (lambda c: c["counters"].update(gate_at="1", gate_episodes=4), "gate_at"),
    "gate_at beyond the episodes": (lambda c: c["counters"].update(gate_at=9, gate_episodes=4), "gate_at"),
    "total_episodes 10**30": (lambda c: c["counters"].update(total_episodes=10**30), "total_episodes"),
    "global_step 10**30": (lambda c: c["counters"].update(global_step=10**30), "global_step"),
    "last_compliance 7": (lambda c: c["counters"].update(last_compliance=7.0), "last_compliance"),
    "round_active 10**6": (lambda c: c["counters"].update(round_active=10**6), "round_active"),
    "optimizer text": (lambda c: c.update(optimizer=[]), "optimizer"),
    # every number of the engine snapshot for what the engine can write (issue Q)
    "env step counter -5": (lambda c: c["env_state"]["t"].fill(-5), "env_state.t holds -5"),
    "env step counter 2**31-1": (lambda c: c["env_state"]["t"].fill(2**31 - 1), "env_state.t holds 2147483647"),
    "env step counter off the batch's": (lambda c: c["env_state"]["t"].fill(3), "env_state.t is not 0"),
    "red kind past the registry": (lambda c: c["env_state"]["red_kind"].fill(attackers.n_kinds()),
                                   f"env_state.red_kind holds {attackers.n_kinds()}"),
    "B_line state 20": (lambda c: c["env_state"]["bl_state"].fill(20), "env_state.bl_state holds 20"),
    "B_line target the Defender": (lambda c: c["env_state"]["bl_target"].fill(0), "env_state.bl_target"),
    "sessions -1": (lambda c: c["env_state"]["sess_priv"].fill(-1), "env_state.sess_priv holds -1"),
    "sessions 10**4": (lambda c: c["env_state"]["sess_user"].fill(10**4), "env_state.sess_user holds 10000"),
    "red-agent odds": (lambda c: c["env_state"]["red_cdf"].fill(0.5), "red_cdf"),
    "compliance count at step 0": (lambda c: c["tracker"]["compliant"].fill_(3.0), "tracker counts more fixes"),
    "compliance count -1": (lambda c: c["tracker"]["violations"].fill_(-1.0), "tracker holds counts"),
    "observation bit 2": (lambda c: c["obs"].fill_(2.0), "obs holds values other than"),
    "access level 5": (lambda c: c["access"].fill_(5), "access holds values outside"),
    "episode return +1": (lambda c: c["episode_running"]["env"].fill_(1.0), "episode_running.env"),
    "optimizer step -1": (lambda c: [e.update(step=torch.tensor(-1.0)) for e in c["optimizer"]["state"].values()],
                          "optimizer step must be in \\[1, "),
    "optimizer step 1.5": (lambda c: c["optimizer"]["state"][0].update(step=torch.tensor(1.5)),
                           "optimizer step of weight 0 is not a whole number"),
    "optimizer moment shape": (lambda c: c["optimizer"]["state"][0].update(
        exp_avg=c["optimizer"]["state"][0]["exp_avg"].t()), "optimizer exp_avg of weight 0 has shape"),
    "optimizer entry missing": (lambda c: c["optimizer"]["state"].pop(3), "optimizer state has 11 entries"),
    "optimizer second moment < 0": (lambda c: c["optimizer"]["state"][1]["exp_avg_sq"].fill_(-1.0),
                                    "exp_avg_sq of weight 1 holds negative"),
}


@pytest.mark.parametrize("case", list(TRAIN_CASES))
def test_train_resume_refuses_a_damaged_checkpoint_before_rewriting_config_or_log(case, trained, tmp_path, capsys):
    d = tmp_path / "one"
    shutil.copytree(trained / "one", d)
    edit, match = TRAIN_CASES[case]
    _edit_checkpoint(d / "checkpoints" / "latest.pt", edit)
    before = _snapshot(d)
    rc, _, err = run_main(["train", *TINY, "--eval-episodes", "0", "--out", str(d), "--resume"], capsys)
    assert_one_error_line(rc, err, match)
    assert _snapshot(d) == before


@pytest.mark.parametrize("edit,match", [
    (lambda p: p.write_bytes(b"junk"), "batch state .* is damaged"),
    (lambda p: _edit_checkpoint(p, lambda c: c.update(obs=c["obs"][:1])), "obs has shape"),
    (lambda p: _edit_checkpoint(p, lambda c: c.update(global_step="0")), "global_step"),
    (lambda p: None, None),
], ids=["garbage", "obs", "global_step", "sound"])
def test_train_seeds_resume_checks_the_batch_state_first(edit, match, trained, tmp_path, capsys):
    d = tmp_path / "two"
    shutil.copytree(trained / "two", d)
    seed_ck = d / "seed_1" / "checkpoints" / "latest.pt"
    edit(d / "batch.pt")
    before = _snapshot(d)
    argv = ["train", *TINY, "--eval-episodes", "0", "--seeds", "2", "--out", str(d), "--resume"]
    rc, _, err = run_main(argv, capsys)
    if match is None:
        assert rc == 0, err
        return
    assert_one_error_line(rc, err, match)
    assert _snapshot(d) == before
    _edit_checkpoint(seed_ck, lambda c: c.update(recent={"a": 1}))   # a seed's own checkpoint is checked too
    rc, _, err = run_main(argv, capsys)
    assert_one_error_line(rc, err, "recent")


def test_train_resume_with_other_settings_is_refused_before_writing(trained, tmp_path, capsys):
    d = tmp_path / "one"
    shutil.copytree(trained / "one", d)
    before = _snapshot(d)
    rc, _, err = run_main(["train", *TINY, "--n-envs", "8", "--eval-episodes", "0", "--out", str(d), "--resume"],
                           capsys)
    assert_one_error_line(rc, err, "--n-envs")
    assert _snapshot(d) == before


# ------------------------------------------------------------------------------------------ one run per folder
def test_search_out_onto_a_train_run_is_refused(trained, tmp_path, capsys):
    d = tmp_path / "one"
    shutil.copytree(trained / "one", d)
    before = _snapshot(d)
    rc, _, err = run_main(["search", *TINY, "--total-episodes", "8", "--out", str(d)], capsys)
    assert_one_error_line(rc, err, "holds a `workflow-rl train` run.*--overwrite")
    assert _snapshot(d) == before


def test_train_onto_a_search_is_refused_even_with_resume(saved_search, tmp_path, capsys):
    d = tmp_path / "s"
    shutil.copytree(saved_search, d, symlinks=True)
    before = _snapshot(d)
    for extra, match in (([], "holds a `workflow-rl search` run"), (["--resume"], "not a train run")):
        rc, _, err = run_main(["train", *TINY, "--out", str(d), *extra], capsys)
        assert_one_error_line(rc, err, match)
    assert _snapshot(d) == before


@pytest.mark.parametrize("command", ["train", "search"])
def test_out_with_foreign_files_is_refused_unless_overwrite(command, tmp_path, capsys):
    d = tmp_path / "mine"
    d.mkdir()
    (d / "thesis.tex").write_text("precious")
    argv = [command, *TINY, "--eval-episodes", "2", "--out", str(d)]
    if command == "search":
        argv += ["--total-episodes", "8", "--max-iterations", "1"]
    rc, _, err = run_main(argv, capsys)
    assert_one_error_line(rc, err, "not a workflow-rl run \\(thesis.tex\\)")
    assert sorted(p.name for p in d.iterdir()) == ["thesis.tex"]


@pytest.mark.slow
def test_overwrite_replaces_another_commands_run_and_keeps_foreign_files(trained, tmp_path, capsys):
    d = tmp_path / "one"
    shutil.copytree(trained / "one", d)
    (d / "notes.txt").write_text("keep me")
    argv = ["search", *TINY, "--total-episodes", "8", "--max-iterations", "1", "--eval-episodes", "2",
            "--out", str(d), "--overwrite"]
    rc, _, err = run_main(argv, capsys)
    assert rc == 0, err
    assert (d / "notes.txt").read_text() == "keep me"
    assert not (d / "config.json").exists() and not (d / "checkpoints").exists()   # the train run is gone
    assert json.loads((d / "search_state.json").read_text())["finished"]


def test_overwrite_is_refused_beside_resume_on_a_search(saved_search, tmp_path, capsys):
    rc, _, err = run_main(["search", "--resume", str(saved_search), "--overwrite"], capsys)
    assert_one_error_line(rc, err, "drop --overwrite")


# ------------------------------------------------------------------------------- batched search resume identity
TIMING = {"wall_time", "collection_time", "update_time", "sps"}


def _rows(path: Path) -> list[dict]:
    with open(path) as f:
        return [{k: v for k, v in r.items() if k not in TIMING} for r in csv.DictReader(f)]


def _same_search(a: Path, b: Path) -> None:
    """Two search folders hold the same search: GP log, training log and answer (timings aside)."""
    assert _rows(a / "gp_sampling_log.csv") == _rows(b / "gp_sampling_log.csv")
    assert _rows(a / "training_log.csv") == _rows(b / "training_log.csv")
    sa, sb = (json.loads((d / "summary.json").read_text()) for d in (a, b))
    assert {k: v for k, v in sa.items() if k != "wall_time_s"} == {k: v for k, v in sb.items() if k != "wall_time_s"}


@pytest.mark.slow
@pytest.mark.parametrize("rounds", [3, 6, 9])
@pytest.mark.parametrize("claims", ["lowered", "elastic"])
def test_batched_search_interrupted_anywhere_resumes_identical(tmp_path, uninterrupted, rounds, claims):
    """Gates fire (a low threshold), claims are lowered or grow, workflows finish and start between rounds; an
    interrupt at any round resumes to the uninterrupted search. Fails without the batch state (fresh episodes)."""
    kw = dict(claims=claims, total_episodes=80, compliance_threshold=0.2, min_fixes=1, max_episodes=6,
              post_gate_episodes=2, batch_workflows=3)
    _interrupted_search(tmp_path / "part", rounds, **kw)
    WorkflowSearch.resume(tmp_path / "part", progress=False).run()
    _same_search(uninterrupted(**kw), tmp_path / "part")


def _rows_trained(d: Path) -> int:
    return sum(max(0, len(p.read_text().splitlines()) - 1) for p in d.glob("workflows/*/training_log.csv"))


class _Killed(BaseException):
    """Stands for kill -9: nothing after it runs (no handler catches a BaseException it does not name)."""


@pytest.mark.slow
@pytest.mark.parametrize("step,nth", [("_review", 2), ("_review", 6), ("_complete", 2), ("_dispatch", 4),
                                      ("append_logs", 2)])
def test_batched_search_killed_between_its_steps_resumes_identical(tmp_path, uninterrupted, monkeypatch, step,
                                                                   nth):
    """Killed as a wait returned but before the search reviewed the claims, recorded the workflow, wrote its log
    rows or dispatched the next one: the resumed search does what the uninterrupted one did next (the review it
    owes and the log rows included). ('_review', 6) fails without the owed review."""
    from workflow_rl.search import search as search_module

    kw = dict(claims="elastic", total_episodes=80, compliance_threshold=0.2, min_fixes=1, max_episodes=6,
              post_gate_episodes=2, batch_workflows=3)
    full = uninterrupted(**kw)   # run before the patch below
    owner = search_module if step == "append_logs" else WorkflowSearch
    original, calls = getattr(owner, step), []

    def dies(*a):
        calls.append(step)
        if len(calls) == nth:
            raise _Killed
        return original(*a)

    monkeypatch.setattr(owner, step, dies)
    with pytest.raises(_Killed):
        WorkflowSearch(SearchConfig(**{**SEARCH, **kw}), tmp_path / "part", progress=False).run()
    monkeypatch.setattr(owner, step, original)
    WorkflowSearch.resume(tmp_path / "part", progress=False).run()
    _same_search(full, tmp_path / "part")


KILLED_ARGS = ["search", "--n-envs", "4", "--max-episodes", "4", "--min-episodes", "1", "--total-episodes", "64",
               "--eval-episodes", "4", "--n-init", "2", "--batch-workflows", "2", "--update-every-steps", "50",
               "--post-gate-episodes", "1", "--checkpoint-every", "3", "--seed", "1", "--no-progress"]


@pytest.fixture(scope="module")
def uninterrupted_cli(tmp_path_factory):
    """``workflow-rl search KILLED_ARGS`` run to its end once (in this process), for both signals' tests."""
    out = tmp_path_factory.mktemp("cli") / "full"
    r = run_in_process([*KILLED_ARGS, "--out", str(out)])
    assert r.returncode == 0, r.stderr
    return out


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["SIGINT", "SIGKILL"])
def test_batched_search_killed_resumes_identical_to_uninterrupted(tmp_path, uninterrupted_cli, sig):
    run = [sys.executable, "-m", "workflow_rl.cli", *KILLED_ARGS]
    p = subprocess.Popen([*run, "--out", str(tmp_path / "part")], env=ENV, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    while p.poll() is None and _rows_trained(tmp_path / "part") < 10:   # mid-search: some recorded, some running
        time.sleep(0.05)
    p.send_signal(sig)
    p.wait(timeout=300)
    assert p.returncode in (130, -signal.SIGKILL), p.stderr.read()
    r = run_in_process(["search", "--resume", str(tmp_path / "part"), "--no-progress"])
    assert r.returncode == 0, r.stderr
    _same_search(uninterrupted_cli, tmp_path / "part")
    assert not list((tmp_path / "part").rglob("*.tmp*"))


# ------------------------------------------------------------------------- the engine state's ranges (issue Q)
@pytest.mark.parametrize("red", ["B_lineAgent", "RedMeanderAgent", "mixture"])
def test_every_state_the_engine_writes_passes_its_range_check(red):
    """``sim.native.state_values`` is what the rules can write, not narrower: a batch stepped through episodes of
    random blue actions (decoys, restores and all) stays inside it at every step, with every env at the batch's
    step; and a value one past a range is refused, so the check is not vacuous."""
    import numpy as np

    from workflow_rl.envs.native_env import NativeVectorEnv
    from workflow_rl.sim import tables as T
    from workflow_rl.sim.native import check_state

    length = 30
    kind = attackers.kind_of(red) if red != "mixture" else \
        np.array([0.2, 0.4, 0.4] + [0.0] * (attackers.n_kinds() - 3))   # one weight per registered kind
    env = NativeVectorEnv(64, kind, episode_length=length, seed=3)
    env.reset()
    rng = np.random.default_rng(0)
    for step in range(1, 3 * length + 1):
        env.step(rng.integers(0, T.N_ACTIONS, 64))
        state = dict(zip(env.sim_state()._fields, env.sim_state()))
        check_state(state, length, step % length)
    state["bl_state"] = state["bl_state"].copy()
    state["bl_state"][5] = len(T.BLINE_JUMPS)
    with pytest.raises(ValueError, match="bl_state holds 15"):
        check_state(state, length)


# ------------------------------------------------------------------------------------- hostile CSV files (issue Q)
def test_compare_refuses_a_csv_field_over_the_csv_limit_in_one_line(tmp_path, capsys):
    """A field over csv's 131,072-character limit raised csv.Error (a traceback); in the header or in a row it is
    one line naming the file."""
    from workflow_rl.rl.episodes import COLUMNS

    good = ",".join(COLUMNS) + "\n" + "native,greedy,B_lineAgent,30,none,1,0,0,0,-1.0,,\n"
    for where, text in (("row", good + "native,greedy," + "x" * 200_000 + ",30,none,1,1,0,1,-1.0,,\n"),
                        ("header", "x" * 200_000 + "," + good)):
        (tmp_path / where).mkdir()
        (tmp_path / where / "episodes.csv").write_text(text)
        rc, _, err = run_main(["compare", str(tmp_path / where), str(tmp_path / where), "--modes", "greedy",
                                "greedy"], capsys)
        assert_one_error_line(rc, err, f"{where}/episodes.csv line \\d+ is damaged .*field larger than field limit")


def test_a_ground_truth_of_named_workflows_reads_as_their_codes(tmp_path):
    """A row naming its workflow (critical_first) raised KeyError; it is that workflow's row, keyed and named by
    its codes like a row written by the search, and a row short of fields is refused in one message."""
    from workflow_rl.search.ground_truth import COLUMNS, read_ground_truth
    from workflow_rl.workflow import Workflow

    row = {c: "" for c in COLUMNS} | {"workflow": "critical_first", "mean": "-12.5", "eligible": "True",
                                      "seed_values": "-12;-13"}
    with open(tmp_path / "gt.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        w.writerow(row)
    table, _ = read_ground_truth(tmp_path / "gt.csv")
    codes = Workflow.parse("critical_first").codes
    assert list(table) == [codes] and table[codes]["workflow"] == codes and table[codes]["mean"] == -12.5
    with open(tmp_path / "gt.csv", "a") as f:
        f.write('"D,E,OS,OH,U"\n')   # a row with its workflow only
    with pytest.raises(ValueError, match="is not a ground_truth.csv"):
        read_ground_truth(tmp_path / "gt.csv")


WRITES = (("workflow_rl.rl.runlog", "RunLog.write"), ("workflow_rl.rl.trainer", "atomic_save"),
          ("workflow_rl.search.records", "SearchState.save"), ("workflow_rl.search.search", "append_logs"),
          ("workflow_rl.search.outputs", "atomic_json"), ("workflow_rl.search.outputs", "atomic_write"),
          ("workflow_rl.search.batched_executor", "atomic_save"))
"""Every way a search writes: a workflow's training-log row, its checkpoint, the search state, the search's logs
(GP and training), its summary and answer files, and a batched search's batch state."""


def _snapshot_after_writes(monkeypatch, folder: Path, snaps: Path) -> list[str]:
    """After each write of any kind (:data:`WRITES`) copy ``folder`` as it is on disk to ``snaps/N`` (N from 1): what
    kill -9 just after the Nth write leaves, since a kill runs nothing after it (no handler, no ``finally``, no
    buffered write). One run then gives every kill point. Returns the names of the writes, in order."""
    import importlib

    done = []
    for module, name in WRITES:
        owner = importlib.import_module(module)
        cls, _, attr = name.rpartition(".")
        owner = getattr(owner, cls) if cls else owner
        original = getattr(owner, attr)

        def wrote(*a, _original=original, _name=name, **k):
            out = _original(*a, **k)
            done.append(_name)
            shutil.copytree(folder, snaps / str(len(done)), symlinks=True)
            return out

        monkeypatch.setattr(owner, attr, wrote)
    return done


@pytest.mark.slow
@pytest.mark.parametrize("batch", [1, 2], ids=["serial", "batched"])
def test_a_search_killed_after_any_write_resumes_to_the_uninterrupted_answer(tmp_path, monkeypatch, batch):
    """Killed just after each of its writes in turn (each training-log row, each checkpoint, each state, log and
    summary write), a resumed search ends with the uninterrupted one's GP log, training log, answer and final
    weights. Failed before: a kill just after a workflow's final checkpoint resumed it for one more update with no
    episodes left (its compliance blank, another answer); in a batched search a kill between a seed's checkpoint
    and the batch state resumed on fresh episodes."""
    kw = {**SEARCH, "n_envs": 2, "max_episodes": 2, "total_episodes": 8, "eval_episodes": 2, "batch_workflows": batch,
          "checkpoint_every": 3, "update_epochs": 1, "num_minibatches": 2}   # toy updates: two optimiser steps on a
    # shuffle still differ from none (a resume that trains once more, or restores a seed at another update, fails)
    with monkeypatch.context() as m:
        done = _snapshot_after_writes(m, tmp_path / "full", tmp_path / "kills")
        WorkflowSearch(SearchConfig(**kw), tmp_path / "full", progress=False).run()
    assert len(done) > 10   # a search of two workflows writes far more than this: the kills cover it
    for nth, name in enumerate(done, 1):
        killed = tmp_path / "kills" / str(nth)
        WorkflowSearch.resume(killed, progress=False).run()
        try:
            _same_search(tmp_path / "full", killed)
            for a in (tmp_path / "full").rglob("latest.pt"):   # every workflow's final weights
                b = killed / a.relative_to(tmp_path / "full")
                ka, kb = load_checkpoint(a)["agent"], load_checkpoint(b)["agent"]
                assert ka.keys() == kb.keys() and all(torch.equal(ka[k], kb[k]) for k in ka), a
        except AssertionError as e:
            raise AssertionError(f"killed just after write {nth} ({name}): {e}") from None
