"""Files a command writes (issue Q, "files destroyed"): every output is checked against what it would replace before
any work starts. A device, a named pipe or a link is never replaced; an input is never an output; ``--overwrite``
removes only what a workflow-rl run wrote, and another run's checkpoint is not its to replace; a user-named file is
replaced only if the same command wrote it. Each refusal is one ``error:`` line, exit 2, with nothing written. Also
the replay page's embedded JSON, a Ctrl-C during the first second's imports, and how an inherited setting is named."""
import json
import os
import re
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ENV, REPO, run_main, sigint_default, tiny

from workflow_rl.rl.config import TrainConfig

ROOT = REPO
TINY = tiny(eval_episodes=2)


def _refused(argv, capsys, match: str) -> None:
    """The command line ``argv`` ends in one ``error:`` line matching ``match``, exit status 2, no traceback."""
    rc, _, err = run_main(argv, capsys)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("error: "), err
    assert re.search(match, lines[0]), lines[0]


def _snapshot(d: Path) -> dict:
    """Every entry under ``d``: its type and, for a plain file, its bytes (what a refused command must not touch)."""
    return {p: (stat.S_IFMT(p.lstat().st_mode), p.read_bytes() if p.is_file() and not p.is_symlink() else None)
            for p in sorted(d.rglob("*"))}


def _run_folder(d: Path, seed: int = 0) -> Path:
    """A folder as a finished ``train`` run leaves it (its config.json marker; a stand-in checkpoint file)."""
    (d / "checkpoints").mkdir(parents=True)
    (d / "config.json").write_text(json.dumps(TrainConfig(seed=seed).to_dict(), default=str))
    (d / "checkpoints" / "latest.pt").write_bytes(b"the run's weights")
    (d / "training_log.csv").write_text("update\n1\n")
    return d


# --------------------------------------------------------------------------- what an output would replace
# (arguments with {t} for the test's folder and {o} for the thing in the way, the file the thing sits at)
OUTPUTS = [
    (["compare", "{t}/a", "{t}/b", "--out", "{o}"], "x.md"),
    (["parity", "--out", "{o}"], "x.md"),
    (["parity", "--cyborg-csv", "{o}"], "x.csv"),
    (["replay", "sleep", "--out", "{o}"], "x.html"),
    (["evaluate", "sleep", "--out", "{t}"], "evaluation.md"),
    (["evaluate", "sleep", "--workflow", "all", "--out", "{t}"], "workflows.png"),
    (["bench", "--out", "{t}"], "engines.png"),
    (["curves", "--out", "{t}"], "curves.md"),
    (["curves", "--out", "{t}"], "plots/B_lineAgent__sleep.png"),
    (["train", *TINY, "--out", "{t}/new", "--checkpoint-dir", "{t}"], "latest.pt"),
]


def _fifo(p: Path) -> None:
    os.mkfifo(p)


def _socket(p: Path) -> None:
    import socket

    s = socket.socket(socket.AF_UNIX)
    s.bind(str(p))
    s.close()


def _link(p: Path) -> None:
    (p.parent / "target").write_text("the user's file")
    p.symlink_to(p.parent / "target")


@pytest.mark.parametrize("make, kind", [(_fifo, "a named pipe"), (_socket, "a socket"), (_link, "a symbolic link")],
                         ids=["fifo", "socket", "symlink"])
@pytest.mark.parametrize("args, name", OUTPUTS, ids=[f"{a[0]}-{n}" for a, n in OUTPUTS])
def test_an_output_that_is_not_a_plain_file_is_refused(args, name, make, kind, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    thing = tmp_path / name
    thing.parent.mkdir(parents=True, exist_ok=True)
    if len(str(thing)) > 100 and make is _socket:
        pytest.skip("a socket's path is limited to 107 bytes")
    make(thing)
    before = _snapshot(tmp_path)
    argv = [a.format(t=tmp_path, o=thing) for a in args]
    _refused(argv, capsys, f"{re.escape(str(thing))} is {kind}.*, not a plain file")
    assert _snapshot(tmp_path) == before


@pytest.mark.parametrize("args", [["compare", "a", "b"], ["parity"], ["replay", "sleep"]], ids=lambda a: a[0])
def test_a_device_is_never_an_output(args, capsys, tmp_path, monkeypatch):
    """``--out /dev/null`` (as root it would be replaced by a regular file, breaking the machine)."""
    if not Path("/dev/null").is_char_device():
        pytest.skip("no /dev/null here")
    monkeypatch.chdir(tmp_path)
    _refused([*args, "--out", "/dev/null"], capsys, "/dev/null is a character device, not a plain file")
    assert Path("/dev/null").is_char_device()


def test_a_folder_in_the_way_of_plots_is_refused(tmp_path, capsys):
    (tmp_path / "plots").write_text("not a folder")
    _refused(["curves", "--out", str(tmp_path)], capsys, "plots is a plain file, not a folder")


# --------------------------------------------------------------------------------- an output is no input
def test_replay_onto_its_own_checkpoint_is_refused(tmp_path, capsys):
    ck = tmp_path / "ck.pt"
    ck.write_bytes(b"weights")
    os.link(ck, tmp_path / "page.html")   # a hard link is the same file
    for out in (ck, tmp_path / "page.html"):
        _refused(["replay", str(ck), "--out", str(out)], capsys, f"is {re.escape(str(ck))}, which this command reads")
    assert ck.read_bytes() == b"weights"


def test_compare_onto_an_input_is_refused(tmp_path, capsys):
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "episodes.csv").write_text(f"the episodes of {d}")
    out = tmp_path / "a" / "episodes.csv"
    _refused(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(out)], capsys, "which this command "
             "reads")
    assert out.read_text() == "the episodes of a"


def test_evaluate_onto_its_ground_truth_is_refused(tmp_path, capsys):
    (tmp_path / "workflows.csv").write_text("a ground truth")
    _refused(["evaluate", "sleep", "--workflow", "all", "--ground-truth", str(tmp_path / "workflows.csv"), "--out",
              str(tmp_path)], capsys, "workflows.csv is .*, which this command reads")
    assert (tmp_path / "workflows.csv").read_text() == "a ground truth"


def test_evaluate_replaces_an_earlier_evaluation_only_with_overwrite(tmp_path, capsys):
    """The output folder's replace rule (``files.check_out_files``): an earlier evaluation's files stay unless
    --overwrite says they go (evaluate replaced them without a word before)."""
    argv = ["evaluate", "sleep", "--episodes", "2", "--lengths", "5", "--red-agents", "B_lineAgent",
            "--mode", "greedy", "--out", str(tmp_path)]
    assert run_main(argv, capsys)[0] == 0
    (tmp_path / "evaluation.md").write_text("the user's edits")
    _refused([*argv, "--episodes", "3"], capsys, r"already holds evaluation\.json .*pass --overwrite")
    assert (tmp_path / "evaluation.md").read_text() == "the user's edits"
    assert run_main([*argv, "--overwrite"], capsys)[0] == 0
    assert (tmp_path / "evaluation.md").read_text().startswith("# Evaluation of sleep")


def test_overwrite_never_deletes_an_input(tmp_path):
    from workflow_rl.runs.rundir import check_run_folder

    run = _run_folder(tmp_path / "run")
    init = run / "checkpoints" / "latest.pt"
    with pytest.raises(ValueError, match="--overwrite would delete .*checkpoints, which holds .*latest.pt"):
        check_run_folder(run, "train", False, True, [init])
    check_run_folder(run, "train", False, True, [tmp_path / "elsewhere.pt"])   # another input: fine


# ------------------------------------------------------------------------------- --overwrite: a run's files
@pytest.mark.parametrize("command", ["train", "search"])
def test_overwrite_does_not_wipe_a_folder_of_files_named_like_a_runs(command, tmp_path, capsys):
    d = tmp_path / "mine"
    for sub in ("checkpoints", "plots", "tb", "workflows"):
        (d / sub).mkdir(parents=True)
        (d / sub / "precious.txt").write_text(sub)
    (d / "report.md").write_text("my report")
    (d / "summary.json").write_text("{}")
    before = _snapshot(d)
    argv = [command, *TINY, "--out", str(d), "--overwrite"] + (["--total-episodes", "8"] if command == "search" else [])
    _refused(argv, capsys, "named like a run's files but written by no workflow-rl run")
    assert _snapshot(d) == before


def test_overwrite_removes_only_what_the_run_wrote(tmp_path):
    from workflow_rl.runs.rundir import check_run_folder, remove_run, run_kind

    run = _run_folder(tmp_path / "run")
    (run / "report.md").write_text("mine: a name of a search's files, in a train run")
    (run / "notes.txt").write_text("mine")
    assert run_kind(run) == "train"
    check_run_folder(run, "train", False, True)
    removed = remove_run(run)
    assert sorted(p.name for p in removed) == ["checkpoints", "config.json", "training_log.csv"]
    assert sorted(p.name for p in run.iterdir()) == ["notes.txt", "report.md"]


@pytest.mark.parametrize("marker, text", [
    ("config.json", "{}"), ("config.json", "[1, 2]"), ("config.json", "not json"),
    ("config.json", "[" * 200_000 + "]" * 200_000), ("search_state.json", '{"config": {}}'),
])
def test_a_marker_of_the_wrong_form_is_no_run(marker, text, tmp_path):
    from workflow_rl.runs.rundir import remove_run, run_kind

    (tmp_path / marker).write_text(text)
    (tmp_path / "checkpoints").mkdir()
    assert run_kind(tmp_path) is None and remove_run(tmp_path) == []
    assert (tmp_path / "checkpoints").is_dir()


def test_a_fifo_named_like_a_marker_does_not_block(tmp_path):
    from workflow_rl.runs.rundir import run_kind

    os.mkfifo(tmp_path / "config.json")
    assert run_kind(tmp_path) is None


def test_resume_refuses_a_run_file_that_is_not_a_plain_file(tmp_path, capsys):
    run = _run_folder(tmp_path / "run")
    (run / "training_log.csv").unlink()
    os.mkfifo(run / "training_log.csv")   # opened to continue the log, it would block forever
    _refused(["train", *TINY, "--out", str(run), "--resume"], capsys, "training_log.csv is a named pipe")


# ------------------------------------------------------------------------ --checkpoint-dir of another run
def test_overwrite_does_not_replace_another_runs_checkpoint(tmp_path, capsys):
    other = _run_folder(tmp_path / "other")
    before = _snapshot(other)
    _refused(["train", *TINY, "--out", str(tmp_path / "new"), "--checkpoint-dir", str(other / "checkpoints"),
              "--overwrite"], capsys, "holds a checkpoint that is not of the run in .*new")
    assert _snapshot(other) == before and not (tmp_path / "new").exists()


def test_a_checkpoint_is_the_runs_when_its_settings_are(tmp_path, monkeypatch):
    from workflow_rl.runs import train

    run = _run_folder(tmp_path / "run", seed=3)
    elsewhere = tmp_path / "cks" / "latest.pt"
    elsewhere.parent.mkdir()
    elsewhere.write_bytes(b"stand-in")
    saved = {"config": TrainConfig(seed=3).to_dict()}
    monkeypatch.setattr(train, "load_checkpoint", lambda path, device: saved)
    assert train.checkpoint_of_run(elsewhere, run)
    saved["config"] = TrainConfig(seed=4).to_dict()   # another run's settings
    assert not train.checkpoint_of_run(elsewhere, run)
    assert train.checkpoint_of_run(run / "checkpoints" / "latest.pt", run)   # the run's own folder


# --------------------------------------------------------------------- a user-named file: the command's own
@pytest.mark.parametrize("args", [["replay", "sleep"], ["compare", "a", "b"], ["parity"]], ids=lambda a: a[0])
def test_a_file_the_command_did_not_write_is_not_replaced(args, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes")
    _refused([*args, "--out", str(notes)], capsys, f"is not a file `workflow-rl {args[0]}` wrote")
    assert notes.read_text() == "my notes"


def test_replay_replaces_its_own_page(tmp_path, capsys):
    from workflow_rl.files import written_by

    page = tmp_path / "r.html"
    argv = ["replay", "sleep", "--episodes", "1", "--length", "2", "--out", str(page)]
    assert run_main(argv, capsys)[0] == 0
    assert written_by("replay") in page.read_text()[:4096]
    assert run_main([*argv, "--seed", "1"], capsys)[0] == 0
    assert '"seed":1' in page.read_text()


def test_a_markdown_report_carries_its_commands_mark(tmp_path):
    from workflow_rl.files import check_out_file, write_report

    out = tmp_path / "c.md"
    write_report(str(out), "# a table\n", "compare")
    assert out.read_text().endswith("# a table\n")
    check_out_file("--out", out, mine="compare")   # its own: may be replaced
    with pytest.raises(ValueError, match="is not a file `workflow-rl parity` wrote"):
        check_out_file("--out", out, mine="parity")


# ------------------------------------------------------------------------------------------ the replay page
def test_the_page_keeps_any_text_in_its_data(tmp_path):
    """A checkpoint path with ``<!--<script>`` in it: escaped as JSON escapes, the HTML parser sees no markup in the
    data element (before, it swallowed the page's own script: an empty page), and the path comes back whole."""
    from workflow_rl.rl import viewer

    label = "runs/<!--<script>/</script><b>&amp;\u2028/ck.pt"
    page = viewer.html([], {"agent": label})
    tag = '<script id="data" type="application/json">'
    start = page.index(tag) + len(tag)
    data = page[start:page.index("</script>", start)]
    assert not set("<>&") & set(data)
    assert json.loads(data)["meta"]["agent"] == label
    assert page.count("<script") == 2 and page.rstrip().endswith("</html>")   # the page's own script follows


# ------------------------------------------------------------------------------------------------- Ctrl-C
def test_an_interrupt_while_the_command_loads_ends_in_one_line(monkeypatch, capsys):
    from workflow_rl import cli

    def interrupted_import():
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "build_parser", interrupted_import)   # where the subcommands' imports happen
    rc, out, err = run_main(["demo"], capsys)
    assert rc == 130 and err == "interrupted\n" and out == ""


def test_loading_the_command_line_is_light():
    """``import workflow_rl.cli`` loads nothing slow: until ``main`` runs, a Ctrl-C would print a traceback."""
    code = "import sys, workflow_rl.cli; print([m for m in ('numpy', 'torch', 'gymnasium') if m in sys.modules])"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV, timeout=120)
    assert r.stdout.strip() == "[]", r.stderr


def test_ctrl_c_during_the_first_seconds_imports_ends_in_130(tmp_path):
    """A real process, interrupted while it imports torch and the subcommands (told by ``-X importtime``). (Under
    ``python -m`` the few milliseconds in which runpy reads ``__main__.py`` stay the interpreter's; the console
    script has no such gap.)"""
    p = subprocess.Popen([sys.executable, "-X", "importtime", "-m", "workflow_rl.cli", "demo", "--n-envs", "2",
                          "--episodes", "100000", "--no-progress"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=ENV, cwd=tmp_path, preexec_fn=sigint_default)
    for line in p.stderr:   # flags is the first module main imports: from here on, main handles an interrupt
        if line.rstrip().endswith("| workflow_rl.cli.flags"):
            break
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    lines = [ln for ln in err.splitlines() if not ln.startswith("import time:")]
    assert p.returncode == 130 and lines == ["interrupted"], err[-2000:]


# ---------------------------------------------------------------------------------------- inherited settings
def test_an_empty_inherited_setting_reads_none():
    from workflow_rl.runs.settings import shown_setting

    assert shown_setting(()) == "none" and shown_setting(None) == "none"
    assert shown_setting((51, 3)) == "51 3" and shown_setting("ratio") == "ratio"


def test_fine_tuning_from_an_agent_without_an_opening_says_none(monkeypatch, capsys):
    """The line a run starting from such an agent prints read 'opening: , the opening ... was trained with'."""
    from workflow_rl.runs.settings import inherit_settings
    from workflow_rl.rl import pretrained

    monkeypatch.setattr(pretrained, "trained_config", lambda spec: TrainConfig())   # trained with no opening
    given = inherit_settings(frozenset(), "pretrained:universal", {"opening": (51,), "alignment_reward": "ratio"})
    assert given["opening"] == ()
    assert capsys.readouterr().out.startswith("opening: none, the opening pretrained:universal was trained with")


def test_search_resume_refuses_a_state_file_that_is_not_a_plain_file(tmp_path, capsys):
    os.mkfifo(tmp_path / "search_state.json")   # read to resume, it would block forever
    _refused(["search", "--resume", str(tmp_path)], capsys, "search_state.json is a named pipe")


def test_staged_outputs_replace_a_set_whole_and_clear_a_dead_writers_staging(tmp_path):
    """files.staged_outputs: a set written in full replaces its namesakes; one that fails part-way replaces none;
    a staging folder a killed writer left (its pid gone) is removed by the next set, a live writer's is not."""
    import subprocess

    from workflow_rl.files import STAGING, TMP_SUFFIX, staged_outputs

    (tmp_path / "a.txt").write_text("old a")
    (tmp_path / "b.txt").write_text("old b")
    with pytest.raises(OSError):
        with staged_outputs(tmp_path) as stage:
            (stage / "a.txt").write_text("new a")
            raise OSError(28, "No space left on device")
    assert (tmp_path / "a.txt").read_text() == "old a"
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = tmp_path / f"{STAGING}x{TMP_SUFFIX}{dead.pid}"
    live = tmp_path / f"{STAGING}y{TMP_SUFFIX}1"   # pid 1 is alive
    for d in (stale, live):
        d.mkdir()
        (d / "a.txt").write_text("half")
    with staged_outputs(tmp_path) as stage:
        (stage / "a.txt").write_text("new a")
        (stage / "b.txt").write_text("new b")
    assert (tmp_path / "a.txt").read_text() == "new a" and (tmp_path / "b.txt").read_text() == "new b"
    assert not stale.exists() and live.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["a.txt", "b.txt", live.name])


@pytest.mark.parametrize("args", [
    ["evaluate", "sleep", "--episodes", "2", "--lengths", "5"],
    ["train", *TINY],
    ["search", "--total-episodes", "40", *TINY],
    ["expert-iterate", "--rounds", "1"],
    ["bench"],
    ["curves"],
], ids=lambda a: a[0])
@pytest.mark.parametrize("where", ["out", "parent"])
def test_a_dangling_link_as_the_output_folder_is_refused_before_anything_plays(args, where, tmp_path, capsys):
    """``--out`` a symbolic link to nothing (or below one): it passed the pre-flight check, every episode was
    played, then "File exists" and exit 2 (on real CybORG, hours). Now one line before the first episode."""
    link = tmp_path / "out"
    link.symlink_to(tmp_path / "gone")
    out = link if where == "out" else link / "run"
    _refused([*args, "--out", str(out)], capsys, "symbolic link to nothing")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"] and not (tmp_path / "gone").exists()
