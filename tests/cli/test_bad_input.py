"""Whatever a user types or does, the answer is one ``error:`` line naming the fix (exit status 2), never a
traceback, a hang or a silent acceptance (issue J). The battery runs the command line in-process (fast); a few
cases go through a real subprocess, and the interrupt tests send real signals to real runs."""
import csv
import errno
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import ENV, REPO, TINY, assert_one_error_line, run_in_process, run_main, sigint_default

from workflow_rl.cli import main
from workflow_rl.rl.checkpoint import load_checkpoint
from workflow_rl.runs.rundir import RunDirLock

ROOT = REPO


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Things on disk the battery points at: a plain file, a damaged checkpoint, an existing run, search states
    edited in every way a hand can damage them."""
    d = tmp_path_factory.mktemp("bad")
    (d / "file").write_text("not a folder")
    (d / "ro").mkdir()
    (d / "ro").chmod(0o555)
    torch.save({"format": "workflow-rl", "version": 1, "agent": {}, "config": {"n_envs": "4"},
                "counters": {}}, d / "edited.pt")
    (d / "garbage.pt").write_bytes(b"\x00garbage")
    (d / "run").mkdir()
    from workflow_rl.rl.config import TrainConfig

    (d / "run" / "config.json").write_text(json.dumps(TrainConfig().to_dict(), default=str))   # a run's marker
    (d / "empty").mkdir()
    from workflow_rl.search.config import SearchConfig
    from workflow_rl.search.records import SearchState

    good = SearchState(config=SearchConfig(n_envs=4, total_episodes=40).to_dict()).to_dict()
    edits = {
        "episodes_string": {"episodes_used": "12"},
        "episodes_negative": {"episodes_used": -5},
        "episodes_inconsistent": {"episodes_used": 8},
        "dispatched_float": {"dispatched": 1.5},
        "finished_string": {"finished": "no"},
        "config_n_envs_string": {"config": {**good["config"], "n_envs": "4"}},
        "config_gp_beta_nan": {"config": {**good["config"], "gp_beta": float("nan")}},
        "config_lr_inf": {"config": {**good["config"], "learning_rate": float("inf")}},
        "iterations_not_list": {"iterations": 3},
        "pending_bad_iteration": {"pending": [{"workflow": "D,E,OS,OH,U", "reason": "x", "iteration": 7}]},
        "config_not_object": {"config": [1, 2]},
    }
    for name, edit in edits.items():
        (d / name).mkdir()
        (d / name / "search_state.json").write_text(json.dumps({**good, **edit}))
    (d / "json_broken").mkdir()
    (d / "json_broken" / "search_state.json").write_text('{"config": ')
    (d / "search_done").mkdir()
    (d / "search_done" / "search_state.json").write_text(json.dumps(good))
    _edge_files(d)
    yield d
    (d / "ro").chmod(0o755)


def _edge_files(d: Path) -> None:
    """What the edge cases point at (issue O): lock files that are not plain files, damaged curve shards, ground
    truths with a NaN or a repeated row."""
    from workflow_rl.curves import shard_path, write_shard
    from workflow_rl.search.config import SearchConfig
    from workflow_rl.search.ground_truth import COLUMNS, protocol

    (d / "victim").write_text("a file the lock must not overwrite")
    (d / "lock_folder" / ".lock").mkdir(parents=True)
    (d / "lock_link").mkdir()
    (d / "lock_link" / ".lock").symlink_to(d / "victim")
    for name, damage in (("shard_empty", lambda b: b""), ("shard_cut", lambda b: b[: len(b) // 2])):
        path = shard_path(d / name / "shards", "B_lineAgent", "restore_compromised", 0, 2)
        path.parent.mkdir(parents=True)
        write_shard(path, np.zeros((2, 100, 13), np.int8), 0)
        path.write_bytes(damage(path.read_bytes()))
    fifo = shard_path(d / "shard_fifo" / "shards", "B_lineAgent", "restore_compromised", 0, 2)
    fifo.parent.mkdir(parents=True)
    os.mkfifo(fifo)   # reading it would wait for a writer forever
    huge = shard_path(d / "shard_huge" / "shards", "B_lineAgent", "restore_compromised", 0, 10**12)   # by its name
    huge.parent.mkdir(parents=True)
    write_shard(huge, np.zeros((2, 100, 13), np.int8), 0)
    wrong = shard_path(d / "shard_short" / "shards", "B_lineAgent", "restore_compromised", 0, 5)   # holds 2, not 5
    wrong.parent.mkdir(parents=True)
    write_shard(wrong, np.zeros((2, 100, 13), np.int8), 0)
    from workflow_rl.curves import CSV_COLUMNS

    counts = ",".join(CSV_COLUMNS) + "\n"
    (d / "counts_short.csv").write_text(counts + "B_lineAgent,sleep,any\n")   # a row cut short: None cells
    (d / "counts_word.csv").write_text(counts + "B_lineAgent,sleep,any,0,ten" + ",0" * 13 + "\n")
    (d / "counts_cut.csv").write_text(counts + "B_lineAgent,sleep,user,0,10" + ",0" * 13 + "\n")   # 1 row of 204
    (d / "counts_step.csv").write_text(counts + "B_lineAgent,sleep,user,-1,10" + ",0" * 13 + "\n")
    (d / "counts_huge.csv").write_text(counts + "B_lineAgent,sleep,user,0,10" + ",0" * 12 + f",{10**23}\n")
    (d / "counts_more.csv").write_text(counts + "B_lineAgent,sleep,user,0,10" + ",0" * 12 + ",11\n")
    row = {c: "" for c in COLUMNS} | protocol(SearchConfig()) | {"mean": -20.0, "seed_values": "-20.0",
                                                                 "eligible": "True"}
    for name, rows in (("gt_nan.csv", [row | {"workflow": "D,E,OS,OH,U", "mean": "nan", "seed_values": "nan"},
                                       row | {"workflow": "critical_first"}]),
                       ("gt_repeated.csv", [row | {"workflow": "D,E,OS,OH,U"}, row | {"workflow": "D,E,OS,OH,U"}]),
                       ("gt_huge.csv", [row | {"workflow": w, "mean": -1e308, "seed_values": "-1e308"}
                                        for w in ("D,E,OS,OH,U", "critical_first")])):
        with open(d / name, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=COLUMNS)
            w.writeheader()
            w.writerows(rows)


LONG = "x" * 300
"""A file name longer than any file system allows (255 bytes)."""
HUGE = str(10**12)
"""A length past the engine's int32 step counter."""

STATE_EDITS = ["episodes_string", "episodes_negative", "episodes_inconsistent", "dispatched_float",
               "finished_string", "config_n_envs_string", "config_gp_beta_nan", "config_lr_inf",
               "iterations_not_list", "pending_bad_iteration", "config_not_object", "json_broken"]

# (arguments with {d} for the files folder, what the error line must mention)
CASES = [
    # ---- train: numbers that are not finite, out of range, or not numbers
    (["train", "--learning-rate", "inf"], "--learning-rate must be a finite"),
    (["train", "--learning-rate", "nan"], "--learning-rate must be a finite"),
    (["train", "--learning-rate", "0"], "--learning-rate must be > 0"),
    (["train", "--alignment-lambda", "inf"], "--alignment-lambda must be a finite"),
    (["train", "--alignment-lambda", "-1"], "--alignment-lambda must be in \\[0, 10000\\], got -1"),
    (["train", "--alignment-reward", "sum"], "--alignment-reward: invalid choice: 'sum'"),
    (["train", "--compliance-threshold", "nan"], "--compliance-threshold must be a finite"),
    (["train", "--compliance-threshold", "1.2"], "--compliance-threshold"),
    (["train", "--gamma", "1.5"], "--gamma must be in"),
    (["train", "--gae-lambda", "nan"], "--gae-lambda"),
    (["train", "--clip-coef", "0"], "--clip-coef must be > 0"),
    (["train", "--ent-coef", "-1"], "--ent-coef must be in \\[0, 100\\], got -1"),
    (["train", "--vf-coef", "inf"], "--vf-coef"),
    (["train", "--max-grad-norm", "-inf"], "--max-grad-norm"),
    (["train", "--reward-scale", "nan"], "--reward-scale"),
    (["train", "--num-minibatches", "100000"], "--num-minibatches 100000 exceeds"),
    (["train", "--num-minibatches", "0"], "--num-minibatches must be"),
    (["train", "--update-epochs", "0"], "--update-epochs"),
    (["train", "--n-envs", "0"], "--n-envs"),
    (["train", "--n-envs", "abc"], "--n-envs"),
    (["train", "--n-envs", "4000000", "--update-every-steps", "1000000"], "GiB of memory"),
    (["train", "--episode-length", "0"], "--episode-length"),
    (["train", "--max-episodes", "0"], "--max-episodes"),
    (["train", "--min-episodes", "-1"], "--min-episodes"),
    (["train", "--num-episodes", "0"], "--num-episodes"),
    (["train", "--checkpoint-every", "0"], "--checkpoint-every"),
    (["train", "--hidden", "0"], "--hidden"),
    (["train", "--seed", "-1"], "--seed must be in"),
    (["train", "--seed", str(2**64)], "--seed must be in"),
    (["train", "--seed", str(2**63 - 1), "--seeds", "2"], "--seed \\+ --seeds"),
    (["train", "--seeds", "0"], "--seeds"),
    (["train", "--eval-episodes", "-5"], "--eval-episodes"),
    (["train", "--eval-length", "0"], "--eval-length"),
    # ---- train: names, devices, folders, runs
    (["train", "--workflow", ""], "--workflow is empty"),
    (["train", "--workflow", "D,E"], "missing"),
    (["train", "--red-agent", "nobody"], "unknown red agent"),
    (["train", "--red-agent", "bline:0.5,meander:x"], "is not a number"),
    (["train", "--red-agent", "bline:0,meander:0"], "every weight is 0"),
    (["search", "--red-agent", "bline:-1,meander:1"], ">= 0"),
    (["train", "--engine", "gpu"], "--engine"),
    (["train", "--device", "cuda:99"], "--device cuda:99"),
    (["train", "--device", "tpu9"], "unknown device"),
    (["train", "--device", "cpu:1"], "unknown device"),
    (["train", "--compile"], "--compile"),
    (["train", "--vectorization", "episodes", "--update-every-steps", "50"], "episode workers"),
    (["train", "--out", "{d}/file"], "--out .* is a file"),
    (["train", "--out", "{d}/file/sub"], "cannot be created"),
    (["train", "--out", "{d}/ro/sub"], "not writable"),
    (["train", "--out", "{d}/empty", "--checkpoint-dir", "{d}/file"], "--checkpoint-dir"),
    (["train", "--out", "{d}/run"], "already holds a training run"),
    (["train", "--out", "{d}/run", "--resume", "--overwrite"], "use one"),
    (["train", "--out", "{d}/empty", "--resume"], "no checkpoint"),
    (["train", "--seeds", "2", "--checkpoint-dir", "{d}/x"], "applies to a single run"),
    (["train", "--bogus-flag"], "unrecognized arguments"),
    # ---- evaluate
    (["evaluate", "{d}/nonexistent.pt"], "no checkpoint"),
    (["evaluate", "greedy_workflw"], "baselines sleep, random, greedy_workflow"),
    (["evaluate", "greedy_workflow"], "needs --workflow"),
    (["evaluate", "sleep", "--workflow", ""], "--workflow is empty"),
    (["evaluate", "{d}/garbage.pt"], "corrupt"),
    (["evaluate", "{d}/edited.pt"], "damaged"),
    (["evaluate", "sleep", "--episodes", "0"], "--episodes"),
    (["evaluate", "sleep", "--episodes", "-5"], "--episodes"),
    (["evaluate", "sleep", "--lengths", "0"], "--lengths"),
    (["evaluate", "sleep", "--device", "cuda:99"], "--device cuda:99"),
    (["evaluate", "sleep", "--device", "tpu9"], "unknown device"),
    (["evaluate", "sleep", "--seed", str(2**64)], "--seed"),
    (["evaluate", "sleep", "--out", "{d}/file"], "--out .* is a file"),
    (["evaluate", "sleep", "--red-agents", "nobody"], "unknown red agent"),
    (["evaluate", "sleep", "--red-agents", "mix:1"], "unknown red agent 'mix'"),
    (["evaluate", "pretrained:nobody"], "no pretrained agent 'nobody'"),
    (["evaluate", "sleep", "--mode", "bogus"], "--mode"),
    # ---- compare
    (["compare", "{d}/empty", "{d}/empty"], "empty has no episodes.csv: re-run `workflow-rl evaluate"),
    (["compare", "{d}/nonexistent", "{d}/empty"], "nonexistent does not exist: give an evaluation folder"),
    (["compare", "{d}/file", "{d}/file"], "file is not an episodes.csv"),
    (["compare", "{d}/empty", "{d}/empty", "--out", "{d}/run"], "--out .*run is a folder"),
    (["compare", "{d}/empty", "{d}/empty", "--modes", "greedy"], "--modes: expected 2 arguments"),
    # ---- search
    (["search", "--gp-beta", "nan"], "--gp-beta must be a finite"),
    (["search", "--gp-beta", "inf"], "--gp-beta must be a finite"),
    (["search", "--gp-beta", "-1"], "--gp-beta must be in \\[0, 1e\\+06\\], got -1"),
    (["search", "--total-episodes", "0"], "--total-episodes"),
    (["search", "--claims", "bogus"], "--claims"),
    (["search", "--eval-episodes", "-5"], "--eval-episodes"),
    (["search", "--n-init", "0"], "--n-init"),
    (["search", "--max-iterations", "0"], "--max-iterations"),
    (["search", "--batch-workflows", "0"], "--batch-workflows"),
    (["search", "--learning-rate", "inf"], "--learning-rate"),
    (["search", "--n-envs", "4000000", "--update-every-steps", "1000000"], "GiB of memory"),
    (["search", "--n-envs", "4000000", "--update-every-steps", "100000", "--batch-workflows", "40"], "GiB of memory"),
    (["search", "--device", "cuda:99"], "--device cuda:99"),
    (["search", "--seed", str(2**64)], "--seed"),
    (["search", "--workflows", "D,E"], "missing"),
    (["search", "--inherit", "bogus"], "--inherit"),
    (["search", "--init-checkpoint", "{d}/nonexistent.pt"], "no checkpoint"),
    # the network comes with the checkpoint (not retyped); a typed one that does not fit it is refused
    (["search", "--init-checkpoint", "pretrained:universal", "--hidden", "8"], "same --hidden and memory flags"),
    (["search", "--init-checkpoint", "pretrained:nobody"], "no pretrained agent 'nobody'"),
    (["train", "--init-checkpoint", "{d}/nonexistent.pt"], "no checkpoint"),
    (["train", "--init-checkpoint", "pretrained:universal", "--hidden", "256"], "--decoy-memory --mask-decoys"),
    (["train", "--mask-decoys"], "add --decoy-memory"),
    (["train", "--opening", "51", "145"], "--opening must be in \\[0, 144\\], got 145"),
    (["train", "--opening", "1", "2", "3", "--episode-length", "3"], "the policy would never act"),
    (["train", "--opening", "51", "--vectorization", "episodes"], "--opening is played by the vector-env"),
    (["search", "--ray", "--batch-workflows", "2"], "--ray"),
    (["search", "--out", "{d}/file"], "--out .* is a file"),
    (["search", "--out", "{d}/search_done"], "already holds a search"),
    (["search", "--resume", "{d}/empty"], "no search to resume"),
    (["search", "--resume", "{d}/file"], "is a file"),
    (["search", "--resume", "{d}/empty", "--total-episodes", "100000"], "drop --total-episodes"),   # even = default
    (["search", "--resume", "{d}/empty", "--claims", "whole", "--n-env", "8"], "drop --claims, --n-envs"),
    (["search", "--resume", "{d}/empty", "--out", "{d}/other"], "drop --out"),
    *[(["search", "--resume", "{d}/" + name], "search_state.json") for name in STATE_EDITS],
    # ---- demo, parity, bench, top level
    (["demo", "--n-envs", "0"], "--n-envs"),
    (["demo", "--n-envs", "1000000000"], "--n-envs: must be in 1..4,194,304"),
    (["demo", "--policy", "bogus"], "unknown policy"),
    (["demo", "--red-agents", "nobody"], "unknown red agent"),
    (["demo", "--seed", "-1"], "--seed"),
    (["demo", "--episodes", "0"], "--episodes"),
    (["demo", "--episodes", "10000000000000000000"], "--episodes: must be in 1..10,000,000"),
    (["parity", "--policies", "bogus"], "unknown --policies"),
    (["parity", "--out", "{d}/empty"], "is a folder"),
    (["parity", "--episodes", "0"], "--episodes"),
    (["parity", "--native-episodes", "99999999999"], "--native-episodes: must be in 1..10,000,000"),
    (["parity", "--seed", str(2**64)], "--seed"),
    (["curves", "--episodes", "0"], "--episodes"),
    (["curves", "--workers", "0"], "--workers"),
    (["curves", "--policies", "bogus"], "unknown --policies"),
    (["curves", "--red-agents", "sleep"], "SleepAgent"),
    (["curves", "--out", "{d}/file"], "--out .* is a file"),
    (["curves", "--collect-only", "--report-only"], "choose one"),
    (["curves", "--report-only", "--out", "{d}/empty"], "no CybORG shards"),
    (["curves", "--cyborg-csv", "{d}/file"], "not a curve-counts file"),
    (["curves", "--cyborg-csv", "{d}/nonexistent.csv"], "no curve counts"),
    (["curves", "--cyborg-csv", "{d}/counts_short.csv"], "counts_short.csv is damaged near line 2 .*: make it again"),
    (["curves", "--cyborg-csv", "{d}/counts_word.csv"], "counts_word.csv is damaged near line 2 .*'ten'"),
    (["curves", "--cyborg-csv", "{d}/counts_cut.csv"], "the panel B_lineAgent/sleep lacks rows"),
    (["curves", "--cyborg-csv", "{d}/counts_step.csv"], "damaged near line 2 .*step -1 is outside 0..99"),
    # numbers no file written by workflow-rl holds (issue Z, class 3): past 64 bits, more than the episodes
    (["curves", "--cyborg-csv", "{d}/counts_huge.csv"],
     "counts_huge.csv is damaged near line 2 .*the step 0 count of User4 must be in \\[0, 10\\], got 10{23}"),
    (["curves", "--cyborg-csv", "{d}/counts_more.csv"], "count of User4 must be in \\[0, 10\\], got 11"),
    (["evaluate", "sleep", "--workflow", "D,E,OS,OH,U;critical_first", "--ground-truth", "{d}/gt_huge.csv"],
     "gt_huge.csv is not a ground_truth.csv \\(workflow D,E,OS,OH,U's return -1e\\+308 is no return of 100 steps"),
    (["bench", "--out", "{d}/file"], "--out .* is a file"),
    (["bench", "--sizes", "0"], "--sizes"),
    (["bench", "--modes", "bogus"], "--modes"),
    ([], "required"),
    (["fly"], "invalid choice"),
    # ---- edges (issue O): lengths past the engine's integers, memory, paths, locks, shards
    (["train", "--episode-length", HUGE], "--episode-length must be in \\[1, 2147483647\\]"),
    (["train", "--eval-length", HUGE], "--eval-length: must be in 1..2147483647"),
    (["evaluate", "sleep", "--lengths", "30", HUGE], "--lengths: must be in 1..2147483647"),
    (["evaluate", "sleep", "--episodes", str(10**19)], "--episodes: must be in 1..10,000,000 .*, got 10{18}0"),
    (["evaluate", "sleep", "--cyborg-episodes", HUGE], "--cyborg-episodes: must be in 1..10,000,000"),
    (["evaluate", "sleep", "--workflow", "all", "--episodes", "10000000"],
     "120 workflows x 10000000 episodes would need about .* GiB of memory, .*: evaluate fewer --episodes"),
    # ---- total work (issue Z, class 2): each factor in range, their product bounded (checks.MAX_PLAY_STEPS)
    (["evaluate", "sleep", "--episodes", "10000000", "--lengths", "2147483647"],
     "10,000,000 episodes x 3 red agent\\(s\\) x 2,147,483,647 steps x 1 mode\\(s\\) is 64,424,509,410,000,000 "
     "steps of play, more than the 10,000,000,000 one evaluation may play .*: lower --episodes or --lengths"),
    (["evaluate", "sleep", "--workflow", "all", "--episodes", "100000", "--lengths", "2000"],
     "x 120 workflows .* is 48,000,000,000 steps of play, .*: lower --episodes or --lengths or evaluate fewer "
     "workflows"),
    (["train", "--eval-length", "2147483647"],
     "--eval-episodes 1,000 x --eval-length 2,147,483,647 is 2,147,483,647,000 steps of play, more than the "
     "10,000,000,000 .*: lower --eval-episodes or --eval-length \\(--eval-episodes 0 skips"),
    (["search", "--eval-length", "2147483647"], "--eval-episodes 500 x --eval-length 2,147,483,647 \\(each "
     "workflow's evaluation\\) is .* steps of play"),
    (["bench", "--modes", "cyborg-sequential", "--sizes", "4194304"],
     "--modes cyborg-sequential --sizes 4,194,304 would need about 8,192.0 GiB of memory, .*: use smaller --sizes"),
    (["bench", "--modes", "cyborg-pipes", "--sizes", "100000"], "would need about .* GiB of memory"),
    (["search", "--episode-length", HUGE], "--episode-length must be in"),
    (["search", "--eval-length", HUGE], "--eval-length must be in"),
    (["train", "--update-every-steps", str(2**31 - 1)], "GiB of memory"),
    (["train", "--hidden", "100000", "100000"], "GiB of memory, .*: use smaller --hidden layers"),
    (["train", "--hidden", str(10**19)], r"--hidden must be in \[1, 1048576\]"),
    (["search", "--hidden", "100000", "100000"], "use smaller --hidden layers"),
    (["train", "--out", "{d}/" + LONG], "--out: the name x+\\.\\.\\. is 300 bytes long, more than the 255"),
    (["train", "--out", "{d}/" + LONG + "/run"], "more than the 255"),
    (["train", "--out", "{d}/" + "/".join(["y" * 200] * 20)], "the path is .* bytes long"),
    (["train", "--checkpoint-dir", "{d}/" + LONG], "--checkpoint-dir: the name"),
    (["search", "--out", "{d}/" + LONG], "more than the 255"),
    (["evaluate", "sleep", "--out", "{d}/" + LONG], "more than the 255"),
    (["parity", "--out", "{d}/" + LONG + ".md"], "more than the 255"),
    (["curves", "--out", "{d}/" + LONG], "more than the 255"),
    (["bench", "--out", "{d}/" + LONG], "more than the 255"),
    (["train", "--out", "/sys/workflow-rl-test"], "not writable"),
    (["search", "--out", "/proc/workflow-rl-test/run"], "not writable"),
    (["train", "--out", "{d}/lock_folder"], "lock_folder/.lock is not a lock file .*: it is a folder"),
    (["train", "--out", "{d}/lock_link"], "lock_link/.lock is not a lock file .*: it is a symbolic link"),
    (["search", "--out", "{d}/lock_link"], "symbolic link"),
    (["curves", "--episodes", "10000000"], "12 panel\\(s\\) is 2,400,000 shard files, more than 100,000"),
    (["train", "--seeds", "1024", "--n-envs", "1", "--hidden", "20000", "20000"],
     "in each of 1024 runs .*; or fewer runs at once"),
    (["curves", "--report-only", "--out", "{d}/shard_empty"], "is damaged .*: delete it"),
    (["curves", "--report-only", "--out", "{d}/shard_cut"], "is damaged"),
    (["curves", "--report-only", "--out", "{d}/shard_short"], "is damaged \\(access of shape \\(2, 100, 13\\)"),
    (["curves", "--report-only", "--out", "{d}/shard_fifo"], "is a named pipe \\(FIFO\\), not a shard: remove it"),
    # a name claiming 10**12 episodes was a set of 10**12 numbers built before the file was read (a hang)
    (["curves", "--report-only", "--out", "{d}/shard_huge"], "is no shard of `workflow-rl curves` \\(its episodes "
     "must be in \\[1, 10000000\\], got 1000000000000\\): remove it"),
    # ---- silent nonsense (issue O): refused instead
    (["train", "--n-envs", "4", "--max-episodes", "2", "--update-every-steps", "1000"],
     "plays 10 episode\\(s\\) of every env per update .* budget of 8 episodes: nothing would train"),
    (["train", "--n-envs", "4", "--num-episodes", "3", "--update-every-steps", "150"], "nothing would train"),
    (["search", "--n-envs", "4", "--total-episodes", "8", "--update-every-steps", "1000"], "nothing would train"),
    (["search", "--n-init", "121"], "--n-init must be in \\[1, 120\\]"),
    (["search", "--n-init", str(10**6)], "--n-init must be in"),
    (["train", "--n-envs", "4", "--n-workers", "5", "--vectorization", "episodes"], "--n-workers 5 exceeds --n-envs 4"),
    (["train", "--n-workers", str(10**19)], "--n-workers must be in \\[1, 4096\\]"),
    (["search", "--ground-truth", "{d}/gt_nan.csv"], "eligible workflow D,E,OS,OH,U has mean nan"),
    (["search", "--ground-truth", "{d}/gt_repeated.csv"], "workflow D,E,OS,OH,U has two rows"),
]


def test_exhaustive_with_a_list_trains_every_listed_workflow(tmp_path):
    """Silent nonsense no more (issue O): ``--exhaustive --workflows LIST`` honours the list (a ground truth over
    those workflows, as benchmarks/studies/regret.py builds) instead of ignoring it."""
    listed = ["D,E,OS,OH,U", "U,OH,OS,E,D"]
    assert main(["search", "--exhaustive", "--workflows", ";".join(listed), *TINY, "--eval-episodes", "4",
                 "--total-episodes", "200", "--out", str(tmp_path / "gt")]) == 0
    state = json.loads((tmp_path / "gt" / "search_state.json").read_text())
    assert sorted(it["workflow"] for it in state["iterations"]) == sorted(listed)


@pytest.mark.parametrize("args,match", CASES, ids=[" ".join(a)[:60] or "no-command" for a, _ in CASES])
def test_cli_refuses_in_one_line(args, match, files, capsys, tmp_path, monkeypatch):
    if os.geteuid() == 0 and "{d}/ro" in " ".join(args):
        pytest.skip("root writes anywhere")
    if any(a.startswith(("/sys/", "/proc/")) for a in args) and not Path("/proc/self").is_dir():
        pytest.skip("no /sys or /proc here")
    monkeypatch.chdir(tmp_path)   # a refused run must write nothing: default folders land here, checked below
    argv = [a.replace("{d}", str(files)) for a in args]
    before = {p: p.stat().st_mtime_ns for p in files.rglob("*") if p.is_file()}
    rc, _, err = run_main(argv, capsys)
    assert_one_error_line(rc, err, match)
    assert {p: p.stat().st_mtime_ns for p in files.rglob("*") if p.is_file()} == before, "a refused run wrote"
    assert not list(tmp_path.rglob("search_state.json")) and not list(tmp_path.rglob("config.json"))


def test_the_cap_on_play_allows_every_evaluation_the_repository_runs():
    """The cap on total steps (``checks.MAX_PLAY_STEPS``) refuses only what no use needs: the largest evaluation
    the repository describes (1,000 episodes x 120 workflows x 3 red agents at lengths 30 50 100, in both modes,
    even counting each length's steps apart), ten million 100-step episodes (the most ``--episodes`` allows) against
    the three red agents in both modes, train's and a search's defaults, and every ``--episodes N`` a command in
    the Makefile, the docs or the benchmarks types, at 100 steps x 120 workflows x 3 red agents x 3 modes."""
    import re

    from workflow_rl.checks import MAX_EPISODES, MAX_PLAY_STEPS
    from workflow_rl.runs.evaluate import EvaluateConfig, check_steps
    from workflow_rl.search.config import SearchConfig

    reds = ["B_lineAgent", "RedMeanderAgent", "SleepAgent"]
    both = ["greedy", "sampled"]
    check_steps(EvaluateConfig("sleep", workflow="all", episodes=1000), reds, [30, 50, 100], ["native"], both, 120)
    assert 1000 * 120 * len(reds) * (30 + 50 + 100) * len(both) <= MAX_PLAY_STEPS
    check_steps(EvaluateConfig("sleep", episodes=MAX_EPISODES), reds, [30, 50, 100], ["native"], both)
    check_steps(EvaluateConfig("sleep", episodes=1000, plan_told_length=True), reds, [30, 50, 100],
                ["native", "cyborg"], [*both, "planned_told_length"])
    SearchConfig().validate()
    typed = []
    for path in [REPO / "Makefile", *REPO.glob("docs/*.md"), *REPO.glob("*.md"), *REPO.glob("benchmarks/**/*.sh"),
                 *REPO.glob("benchmarks/**/*.md"), *REPO.glob("benchmarks/**/*.py")]:
        typed += [int(n) for n in re.findall(r"--(?:eval-|cyborg-)?episodes[ =]+(\d+)", path.read_text())]
    assert max(typed) >= 1000   # the search found the commands
    assert max(typed) * 100 * 120 * len(reds) * 3 <= MAX_PLAY_STEPS


def test_bench_native_cuda_without_a_gpu(capsys, tmp_path):
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    rc, _, err = run_main(["bench", "--modes", "native-cuda", "--out", str(tmp_path)], capsys)
    assert_one_error_line(rc, err, "CUDA")


@pytest.mark.parametrize("args,match", [
    (["train", "--gp-beta", "1"], "unrecognized"),
    (["search", "--gp-beta", "nan"], "--gp-beta must be a finite"),
    (["train", "--seed", str(2**64)], "--seed must be in"),
    (["evaluate", "greedy_workflw"], "baselines"),
])
@pytest.mark.slow   # a fresh Python per case (~2-3 s of imports each)
def test_cli_refuses_in_one_line_in_a_real_process(args, match, tmp_path):
    r = subprocess.run([sys.executable, "-m", "workflow_rl.cli", *args], capture_output=True, text=True,
                       env=ENV, cwd=tmp_path, timeout=300)
    assert_one_error_line(r.returncode, r.stderr, match)


# ---------------------------------------------------------------------------------------------- Python API
def _api_cases():
    from workflow_rl import make_vector_env
    from workflow_rl.rl.config import TrainConfig
    from workflow_rl.rl.evaluate import evaluate_cells, evaluate_workflows, scripted_act
    from workflow_rl.search.config import SearchConfig

    inf, nan = float("inf"), float("nan")
    return [
        (lambda: make_vector_env(2, official_bugs="no"), "official_bugs must be True or False"),
        (lambda: make_vector_env(2, copy="yes"), "copy must be True or False"),
        (lambda: make_vector_env(10**12), "GiB of memory"),
        (lambda: make_vector_env(4_000_000, engine="cyborg"), "num_envs=4,000,000 would need about .* GiB"),
        (lambda: TrainConfig.from_flat({"learning_rate": inf}).validate(), "--learning-rate"),
        (lambda: TrainConfig(alignment_lambda=nan).validate(), "--alignment-lambda"),
        (lambda: TrainConfig(alignment_reward="sum").validate(), "unknown --alignment-reward 'sum': use one of ratio"),
        (lambda: TrainConfig(seed=2**64).validate(), "--seed"),
        (lambda: TrainConfig(n_envs="50").validate(), "--n-envs must be an integer"),
        (lambda: TrainConfig(n_envs=True).validate(), "--n-envs must be an integer"),
        (lambda: TrainConfig(official_bugs="no").validate(), "--official-bugs must be True or False"),
        (lambda: TrainConfig(workflow="").validate(), "missing"),
        (lambda: SearchConfig(gp_beta=nan).validate(), "--gp-beta"),
        (lambda: SearchConfig(eval_episodes=-1).validate(), "--eval-episodes"),
        (lambda: SearchConfig(total_episodes=1.5).validate(), "--total-episodes"),
        (lambda: make_vector_env(2, episode_length=2**31), "episode_length must be in"),
        (lambda: TrainConfig(episode_length=2**31).validate(), "--episode-length must be in"),
        (lambda: SearchConfig(eval_length=2**31).validate(), "--eval-length must be in"),
        (lambda: TrainConfig.from_flat({"hidden": (100000, 100000)}).validate(), "use smaller --hidden"),
        (lambda: SearchConfig(n_init=121).validate(), "--n-init"),
        (lambda: TrainConfig(n_envs=4, n_workers=5).validate(), "--n-workers 5 exceeds"),
        (lambda: evaluate_cells(scripted_act("sleep"), ["bline"], [10], 10**19), "episodes must be in"),
        (lambda: evaluate_workflows(None, [], ["bline"], [10], 0), "episodes must be in"),
    ]


@pytest.mark.parametrize("i", range(len(_api_cases())))
def test_python_api_refuses_with_a_value_error(i):
    call, match = _api_cases()[i]
    with pytest.raises(ValueError, match=match):
        call()


def test_checkpoint_counters_are_checked_field_by_field(tmp_path):
    from helpers import train_cfg

    from workflow_rl.rl.checkpoint import CheckpointError, load_checkpoint
    from workflow_rl.rl.trainer import Trainer

    t = Trainer(train_cfg(n_envs=4, max_episodes=1), tmp_path, progress=False)
    t.run()
    path = tmp_path / "checkpoints" / "latest.pt"
    good = load_checkpoint(path)
    for counters, match in [({"total_episodes": "4"}, "total_episodes"), ({"update": -1}, "update"),
                            ({"episodes_per_env": np.array([1, 1])}, "episodes_per_env"),
                            ({"episodes_per_env": np.full(4, 9)}, "more than total_episodes")]:
        torch.save({**good, "counters": {**good["counters"], **counters}}, tmp_path / "bad.pt")
        with pytest.raises(CheckpointError, match=match):
            load_checkpoint(tmp_path / "bad.pt")


# ------------------------------------------------------------------------------------------ one writer per dir
def test_a_second_process_on_a_run_dir_is_refused(tmp_path, capsys):
    out = tmp_path / "run"
    with RunDirLock(out):   # another process (flock is per open file, so this holder counts as one)
        for argv in (["train", *TINY, "--out", str(out)], ["search", *TINY, "--out", str(out)]):
            rc, _, err = run_main(argv, capsys)
            assert_one_error_line(rc, err, f"in use by process {os.getpid()}")
    assert not (out / "config.json").exists() and not (out / "search_state.json").exists()


def test_a_dead_holders_lock_and_temp_files_are_taken_over(tmp_path):
    dead = _dead_pid()
    (tmp_path / "checkpoints").mkdir(parents=True)
    (tmp_path / ".lock").write_text(str(dead))
    stale = tmp_path / "checkpoints" / f"latest.pt.tmp{dead}"
    stale.write_bytes(b"")
    live = tmp_path / f"search_state.json.tmp{os.getppid()}"   # a live writer's file is not touched
    live.write_bytes(b"")
    with RunDirLock(tmp_path):
        assert (tmp_path / ".lock").read_text() == str(os.getpid())
    assert not stale.exists() and live.exists()


def test_a_lock_file_that_is_a_hard_link_is_refused_and_left_alone(tmp_path):
    """Truncating it to write a pid would empty the file it shares its data with."""
    other = tmp_path / "precious"
    other.write_text("data")
    (tmp_path / "run").mkdir()
    os.link(other, tmp_path / "run" / ".lock")
    with pytest.raises(ValueError, match="hard link"):
        RunDirLock(tmp_path / "run").acquire()
    assert other.read_text() == "data"


def test_the_network_counts_in_the_memory_estimate_per_run(monkeypatch):
    """--hidden 4000 fits a 2 GiB machine once, not eight times (its weights, gradient, Adam moments and
    activations: ~0.8 GiB each)."""
    from workflow_rl import resources
    from workflow_rl.rl.config import TrainConfig
    from workflow_rl.rl.ppo import Agent, network_params

    assert network_params((64, 32)) == sum(p.numel() for p in Agent((64, 32)).parameters())
    monkeypatch.setattr(resources, "physical_memory", lambda: 2 * 2**30)
    cfg = TrainConfig.from_flat({"hidden": (4000, 4000), "update_every_steps": 25})
    cfg.check_memory(1)
    with pytest.raises(ValueError, match="in each of 8 runs .* use smaller --hidden"):
        cfg.check_memory(8)


def test_on_a_gpu_the_memory_estimate_is_held_against_the_gpus_memory(monkeypatch):
    from types import SimpleNamespace

    from workflow_rl.rl.config import TrainConfig

    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda dev: SimpleNamespace(total_memory=2**30))
    TrainConfig(device="cuda").check_memory(1)                      # the defaults fit a 1 GiB GPU
    with pytest.raises(ValueError, match="more than cuda's 1.0 GiB: use smaller --hidden"):
        TrainConfig.from_flat({"device": "cuda", "hidden": (4000, 4000)}).check_memory(1)


def test_batch_slots_stop_at_what_the_budget_can_hold(tmp_path, capsys):
    """--batch-workflows 40 on a budget that holds two workflows at once trains two at a time (one batch of 40
    slots stepped 38 idle ones: 15x slower), and says so."""
    from workflow_rl.search.config import SearchConfig
    from workflow_rl.search.search import WorkflowSearch

    kw = dict(n_envs=4, max_episodes=1, min_episodes=1, total_episodes=8, batch_workflows=40)
    assert SearchConfig(**kw).batch_slots == 2                        # each costs at least 4 of the 8 episodes
    assert SearchConfig(**kw, workflows=["critical_first"]).batch_slots == 1
    assert SearchConfig(**kw, max_iterations=1).batch_slots == 1
    assert SearchConfig(**{**kw, "total_episodes": 9}).batch_slots == 3   # the last may hold what is left
    assert WorkflowSearch(SearchConfig(**kw), tmp_path / "s", progress=False)._default_executor().q == 2
    rc, out, err = run_main(["search", "--n-envs", "4", "--max-episodes", "1", "--min-episodes", "1",
                              "--total-episodes", "8", "--eval-episodes", "2", "--batch-workflows", "40",
                              "--no-progress", "--out", str(tmp_path / "cli")], capsys)
    assert rc == 0, err
    assert "--batch-workflows 40: training 2 at a time" in out and "8 / 8 episodes" in out


def _raising(exc_factory):
    def cmd(args):
        raise exc_factory()
    return cmd


@pytest.mark.parametrize("code,match", [(errno.ENOSPC, "No space left on device writing .*log.csv: make room"),
                                        (errno.EFBIG, "File too large writing .*: make room .* --resume"),
                                        (errno.EIO, "Input/output error \\(.*log.csv\\)")])
def test_an_os_error_mid_run_is_one_line(code, match, capsys, monkeypatch):
    from workflow_rl.cli import tools

    monkeypatch.setattr(tools, "cmd_demo", _raising(lambda: OSError(code, os.strerror(code), "/x/training_log.csv")))
    rc, _, err = run_main(["demo"], capsys)
    assert_one_error_line(rc, err, match)


def test_a_failure_while_stopping_reports_the_stop(capsys, monkeypatch):
    """SIGTERM, then a worker's pipe breaks in the clean-up: "terminated" (143), not the pipe's error."""
    from workflow_rl.cli import tools
    from workflow_rl.interrupt import Terminated

    def cmd(args):
        try:
            raise Terminated
        finally:
            raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(tools, "cmd_demo", cmd)
    rc, _, err = run_main(["demo"], capsys)
    assert rc == 128 + signal.SIGTERM and err.strip() == "terminated"


@pytest.mark.slow   # a fresh Python (~3 s)
def test_a_closed_stdout_ends_quietly():
    """`workflow-rl demo | head -1`: the reader goes away after one line; the demo ends as Unix tools do."""
    p = subprocess.Popen([sys.executable, "-m", "workflow_rl.cli", "demo", "--n-envs", "2", "--episodes", "4",
                          "--red-agents", "sleep", "bline", "--no-progress"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=ENV)
    assert p.stdout.readline().startswith(b"native engine")
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait(timeout=300) == 128 + signal.SIGPIPE, err
    assert err == ""


def test_train_onto_an_existing_run_needs_overwrite(tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["train", *TINY, "--max-episodes", "1", "--eval-episodes", "0", "--out", str(out)]
    assert run_main(argv, capsys)[0] == 0
    first = (out / "checkpoints" / "latest.pt").read_bytes()
    rc, _, err = run_main(argv, capsys)
    assert_one_error_line(rc, err, "--overwrite")
    assert (out / "checkpoints" / "latest.pt").read_bytes() == first
    assert run_main([*argv, "--overwrite", "--seed", "5"], capsys)[0] == 0
    assert json.loads((out / "config.json").read_text())["seed"] == 5


def test_a_search_that_fails_leaves_nothing_that_blocks_the_next(tmp_path, capsys, monkeypatch):
    from workflow_rl.search import search as search_module

    def fail(*a, **kw):
        raise ValueError("training failed on purpose")

    monkeypatch.setattr(search_module, "train_and_evaluate", fail)
    argv = ["search", *TINY, "--total-episodes", "8", "--eval-episodes", "2", "--out", str(tmp_path / "s")]
    rc, _, err = run_main(argv, capsys)
    assert_one_error_line(rc, err, "on purpose")
    assert not (tmp_path / "s" / "search_state.json").exists()


def test_a_report_that_could_not_be_written_is_not_named(monkeypatch, capsys, tmp_path):
    """A search whose report fails (a damaged training log on --resume did so) says so and names summary.json,
    never a report.md that is not there."""
    from workflow_rl.search import report

    out = tmp_path / "s"

    def broken(*a, **kw):
        raise ValueError("damaged training_log.csv")

    monkeypatch.setattr(report, "write_report", broken)
    rc, stdout, err = run_main(["search", *TINY, "--total-episodes", "8", "--eval-episodes", "2", "--out", str(out)],
                             capsys)
    assert rc == 0, err
    assert "warning: report not written (ValueError: damaged training_log.csv)" in stdout
    assert "report.md" not in stdout.split("warning: report not written")[1]
    assert f"summary: {out / 'summary.json'}" in stdout and (out / "summary.json").is_file()
    assert not (out / "report.md").exists()


# ----------------------------------------------------------------------------------------- abort paths end
def _fault_env(fault: str, timeout: float):
    """Two worker processes over pipes playing ``fault_envs.FaultyEnv`` (no CybORG needed), reset."""
    sys.path.insert(0, str(REPO / "tests" / "envs"))
    from fault_envs import FaultyFn

    from workflow_rl.envs.cyborg_vector import make_cyborg_vector_env

    env = make_cyborg_vector_env(2, "B_lineAgent", 100, 0, vectorization="pipes", start_method="fork",
                                 timeout=timeout, env_fn=FaultyFn(fault))
    env.reset()
    return env


def test_a_stopped_worker_is_killed_and_the_abort_ends(tmp_path):
    """A SIGSTOPped worker ignores SIGTERM: the abort path must still end (SIGKILL after a grace)."""
    from workflow_rl.envs.cyborg_vector import EngineWorkerError

    env = _fault_env("none", timeout=1.0)
    procs = env.unwrapped.processes
    os.kill(procs[0].pid, signal.SIGSTOP)
    signal.signal(signal.SIGALRM, lambda *a: (_ for _ in ()).throw(TimeoutError("abort path hung")))
    signal.alarm(60)
    try:
        with pytest.raises(EngineWorkerError, match="did not finish"):
            env.step(np.zeros(2, np.int64))
    finally:
        signal.alarm(0)
    assert not any(p.is_alive() for p in procs) and procs[0].exitcode == -signal.SIGKILL


@pytest.mark.slow   # worker processes started and stopped: ~4 s
def test_ctrl_c_while_waiting_on_workers_stops_them_all():
    """Ctrl-C during a step that a worker never finishes ends the wait and every worker (a stopped one too)."""
    env = _fault_env("hang", timeout=120.0)
    for _ in range(2):
        env.step(np.zeros(2, np.int64))
    procs = env.unwrapped.processes
    os.kill(procs[1].pid, signal.SIGSTOP)

    def ctrl_c(*a):
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, ctrl_c)
    signal.alarm(2)   # the third step hangs in every worker; Ctrl-C arrives while the step waits
    try:
        with pytest.raises(KeyboardInterrupt):
            env.step(np.zeros(2, np.int64))
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    assert not any(p.is_alive() for p in procs)


def test_demo_reports_each_round(capsys):
    """A demo of many episodes runs for minutes: it must say where it is (a line per round with --no-progress)."""
    rc, out, _ = run_main(["demo", "--n-envs", "2", "--episodes", "5", "--red-agents", "sleep", "--no-progress"],
                           capsys)
    assert rc == 0
    assert [ln.split(":")[1].strip() for ln in out.splitlines() if "round" in ln] == [
        "round 1/3 (2 episodes)", "round 2/3 (4 episodes)", "round 3/3 (6 episodes)"]


def test_temp_file_of_a_failed_write_is_removed(tmp_path):
    from workflow_rl.rl.checkpoint import atomic_save

    with pytest.raises(Exception):
        atomic_save({"x": lambda: 0}, tmp_path / "latest.pt")   # a lambda cannot be pickled
    assert list(tmp_path.iterdir()) == []


def test_version_and_help_without_rest_markup():
    from workflow_rl import __version__
    from workflow_rl.cli import build_parser

    parser = build_parser()
    subcommands = next(a for a in parser._actions if a.dest == "command").choices
    assert not [name for name, p in {"": parser, **subcommands}.items() if "``" in p.format_help()]
    r = run_in_process(["--version"])
    assert r.returncode == 0 and r.stdout.strip() == f"workflow-rl {__version__}"


# ------------------------------------------------------------------------------------- real signals, resume
def _popen(args, cwd):
    return subprocess.Popen([sys.executable, "-m", "workflow_rl.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=ENV, cwd=cwd, preexec_fn=sigint_default)


def _wait_for(path: Path, rows: int, proc) -> None:
    """Until ``path`` (a CSV) has ``rows`` data rows, or the process ended."""
    while proc.poll() is None:
        if path.exists() and len(path.read_text().splitlines()) > rows:
            return
        time.sleep(0.2)


def _params(path: Path) -> dict:
    return load_checkpoint(path)["agent"]


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_train_killed_mid_run_resumes_to_the_same_weights(tmp_path, sig):
    args = ["train", "--n-envs", "8", "--max-episodes", "12", "--min-episodes", "12", "--update-every-steps", "50",
            "--checkpoint-every", "1", "--eval-episodes", "0", "--no-progress"]
    assert run_in_process([*args, "--out", str(tmp_path / "full")]).returncode == 0
    p = _popen([*args, "--out", str(tmp_path / "part")], tmp_path)
    _wait_for(tmp_path / "part" / "training_log.csv", 3, p)
    p.send_signal(sig)
    p.wait(timeout=300)
    assert p.returncode in (130, -signal.SIGKILL)
    assert not list((tmp_path / "part").rglob("*.tmp*")) or sig == signal.SIGKILL
    r = run_in_process([*args, "--out", str(tmp_path / "part"), "--resume"])
    assert r.returncode == 0, r.stderr
    assert not list((tmp_path / "part").rglob("*.tmp*"))
    full, part = (_params(tmp_path / d / "checkpoints" / "latest.pt") for d in ("full", "part"))
    assert all(torch.equal(full[k], part[k]) for k in full)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU on this machine")
def test_train_on_cuda_interrupted_resumes(tmp_path):
    """Failed on an H200 before the fix (2026-11-28): a checkpoint loaded for a CUDA run has its RNG states on the
    GPU, and torch's RNG setters take CPU byte tensors only ('RNG state must be a torch.ByteTensor').

    Failed again on an H200 (issue Q: status 1, where the same run interrupted by hand ends with 130), saying
    nothing of why. Now: the Ctrl-C goes to a run seen training (log rows written, the process alive) that cannot
    finish first (a budget far beyond the wait; the resume then stops at the original budget), the run's output
    goes to files (a pipe nobody reads fills, and a run printing a row per update then blocks in the write the
    signal lands in), and a failure shows the run's status and output."""
    budget = ["--n-envs", "64", "--update-every-steps", "50", "--checkpoint-every", "1", "--eval-episodes", "0",
              "--no-progress", "--out", str(tmp_path / "run")]
    args = ["train", "--device", "cuda", *budget]
    log = tmp_path / "run" / "training_log.csv"
    with open(tmp_path / "out.txt", "w") as out, open(tmp_path / "err.txt", "w") as err:
        p = subprocess.Popen([sys.executable, "-m", "workflow_rl.cli", *args, "--max-episodes", "4000",
                              "--min-episodes", "4000"], stdout=out, stderr=err, env=ENV, cwd=tmp_path)
        try:
            deadline = time.monotonic() + 300
            while p.poll() is None and time.monotonic() < deadline and not (
                    log.is_file() and len(log.read_text().splitlines()) > 3):
                time.sleep(0.2)
            said = lambda: f"status {p.returncode}; stdout:\n{(tmp_path / 'out.txt').read_text()[-3000:]}\n" \
                           f"stderr:\n{(tmp_path / 'err.txt').read_text()[-5000:]}"   # noqa: E731
            assert p.poll() is None and log.is_file(), f"the run was not training when it was to be interrupted: " \
                                                       f"{said()}"
            p.send_signal(signal.SIGINT)
            p.wait(timeout=300)
        finally:
            if p.poll() is None:
                p.kill()
    assert p.returncode == 130, said()
    r = subprocess.run([sys.executable, "-m", "workflow_rl.cli", *args, "--max-episodes", "40", "--min-episodes",
                        "40", "--resume"], env=ENV, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr


@pytest.mark.slow
def test_train_seeds_interrupted_resumes_identical_to_uninterrupted(tmp_path):
    """Fails without the batch file: the seeds' checkpoints alone resume on fresh env streams and RNG."""
    args = ["train", "--seeds", "2", "--n-envs", "8", "--max-episodes", "12", "--min-episodes", "12",
            "--update-every-steps", "50", "--checkpoint-every", "2", "--eval-episodes", "0", "--no-progress"]
    assert run_in_process([*args, "--out", str(tmp_path / "full")]).returncode == 0
    p = _popen([*args, "--out", str(tmp_path / "part")], tmp_path)
    _wait_for(tmp_path / "part" / "seed_1" / "training_log.csv", 4, p)
    p.send_signal(signal.SIGINT)
    p.wait(timeout=300)
    assert p.returncode == 130
    r = run_in_process([*args, "--out", str(tmp_path / "part"), "--resume"])
    assert r.returncode == 0, r.stderr
    for i in range(2):
        full, part = (_params(tmp_path / d / f"seed_{i}" / "checkpoints" / "latest.pt") for d in ("full", "part"))
        assert all(torch.equal(full[k], part[k]) for k in full)


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_search_killed_mid_run_resumes_within_budget(tmp_path, sig):
    args = ["search", "--n-envs", "4", "--max-episodes", "2", "--min-episodes", "2", "--total-episodes", "80",
            "--eval-episodes", "4", "--n-init", "2", "--checkpoint-every", "1", "--no-progress"]
    p = _popen([*args, "--out", str(tmp_path / "s")], tmp_path)
    _wait_for(tmp_path / "s" / "gp_sampling_log.csv", 1, p)   # one workflow done, nine to go
    p.send_signal(sig)
    p.wait(timeout=300)
    assert p.returncode in (130, -signal.SIGKILL), "the search ended before the signal: nothing was interrupted"
    # a second process on the folder while none runs is fine; resume finishes within the budget
    r = run_in_process(["search", "--resume", str(tmp_path / "s"), "--no-progress"])
    assert r.returncode == 0, r.stderr
    state = json.loads((tmp_path / "s" / "search_state.json").read_text())
    assert state["finished"] and state["episodes_used"] <= 80
    assert not list((tmp_path / "s").rglob("*.tmp*"))
    assert not math.isnan(float(state["iterations"][-1]["observed_reward"]))


def _children(pid: int) -> list[int]:
    """The child processes of ``pid`` (Linux /proc)."""
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _sigterm_once_working(args, cwd, ready, children: int) -> subprocess.CompletedProcess:
    """Start ``workflow-rl ARGS``, wait until ``ready()`` and it has ``children`` child processes, send SIGTERM
    to it alone, and return how it ended, with the children it had (all must be gone)."""
    p = _popen(args, cwd)
    while p.poll() is None and not (ready() and len(_children(p.pid)) >= children):
        time.sleep(0.2)
    kids = _children(p.pid)
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=300)
    time.sleep(1)
    return subprocess.CompletedProcess(args, p.returncode, out, err), kids


def _assert_terminated_quietly(r, kids):
    assert r.returncode == 128 + signal.SIGTERM, r.stderr
    assert "Traceback" not in r.stderr and r.stderr.strip().splitlines()[-1] == "terminated", r.stderr
    assert not [k for k in kids if Path(f"/proc/{k}").exists() and "zombie" not in
                Path(f"/proc/{k}/status").read_text()], "a worker outlived its parent"


@pytest.mark.slow
def test_sigterm_stops_episode_workers_quietly(tmp_path):
    """SIGTERM to a run whose episode workers (native engine) play its episodes: no worker traceback, no worker
    left waiting on its queue (killed outright, the parent left them blocked there), its last checkpoint kept."""
    args = ["train", "--vectorization", "episodes", "--n-envs", "4", "--n-workers", "2", "--update-every-steps",
            "100", "--max-episodes", "500", "--min-episodes", "500", "--checkpoint-every", "1", "--eval-episodes", "0",
            "--no-progress", "--out", str(tmp_path / "run")]
    log = tmp_path / "run" / "training_log.csv"
    r, kids = _sigterm_once_working(args, tmp_path, lambda: log.exists() and len(log.read_text().splitlines()) > 2, 2)
    _assert_terminated_quietly(r, kids)
    assert (tmp_path / "run" / "checkpoints" / "latest.pt").exists()


@pytest.mark.slow
def test_a_process_group_ctrl_c_lets_training_with_episode_workers_save_and_stop(tmp_path):
    """A terminal's Ctrl-C reaches the episode workers too (the process group): they ignore it, so the parent
    finishes its update, saves and stops as after a Ctrl-C to it alone (130, its `interrupted` line), no worker
    traceback, no worker left."""
    args = ["train", "--vectorization", "episodes", "--n-envs", "4", "--n-workers", "2", "--update-every-steps",
            "100", "--max-episodes", "500", "--min-episodes", "500", "--checkpoint-every", "1", "--eval-episodes", "0",
            "--no-progress", "--out", str(tmp_path / "run")]
    log = tmp_path / "run" / "training_log.csv"
    p = subprocess.Popen([sys.executable, "-m", "workflow_rl.cli", *args], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=ENV, cwd=tmp_path, start_new_session=True,
                         preexec_fn=sigint_default)
    while p.poll() is None and not (log.exists() and len(log.read_text().splitlines()) > 2
                                    and len(_children(p.pid)) >= 2):
        time.sleep(0.2)
    kids = _children(p.pid)
    os.killpg(p.pid, signal.SIGINT)   # the whole group, as a terminal sends it
    out, err = p.communicate(timeout=300)
    time.sleep(1)
    assert p.returncode == 130, err[-2000:]
    assert "Traceback" not in err and "interrupted: saved" in out, (out[-1000:], err[-2000:])
    assert (tmp_path / "run" / "checkpoints" / "latest.pt").exists()
    assert not [k for k in kids if Path(f"/proc/{k}").exists() and "zombie" not in
                Path(f"/proc/{k}/status").read_text()], "a worker outlived its parent"


@pytest.mark.cyborg
def test_sigterm_stops_cyborg_evaluation_workers_quietly(tmp_path):
    r, kids = _sigterm_once_working(["evaluate", "sleep", "--engine", "cyborg", "--workers", "2", "--episodes", "40"],
                                    tmp_path, lambda: True, 2)
    _assert_terminated_quietly(r, kids)


def test_a_failed_checkpoint_write_surfaces_as_its_os_error(tmp_path, monkeypatch):
    """torch's zip writer, closing after a write the disk refused, raises a RuntimeError ("unexpected pos") of its
    own; atomic_save re-raises the OSError under it, so the command's one-line disk report sees it, and leaves no
    file behind."""
    import errno

    from workflow_rl.rl import checkpoint

    def failing_save(obj, f):
        try:
            raise OSError(errno.EFBIG, "File too large")
        except OSError:
            raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 64 vs 0")

    monkeypatch.setattr(checkpoint.torch, "save", failing_save)
    with pytest.raises(OSError, match="File too large"):
        checkpoint.atomic_save({"x": 1}, tmp_path / "ck.pt")
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setattr(checkpoint.torch, "save", lambda obj, f: (_ for _ in ()).throw(RuntimeError("other")))
    with pytest.raises(RuntimeError, match="other"):   # a RuntimeError of its own stays one
        checkpoint.atomic_save({"x": 1}, tmp_path / "ck.pt")


@pytest.mark.slow
def test_a_full_disk_is_one_line_and_the_run_resumes_identically(tmp_path):
    """Files stop growing mid-run (RLIMIT_FSIZE set on the running process: writes then fail with EFBIG, as on a
    full disk): one error line, the last checkpoint intact, and --resume ends where an uninterrupted run does."""
    import resource

    from helpers import read_log

    args = ["train", "--n-envs", "8", "--max-episodes", "12", "--min-episodes", "12", "--update-every-steps", "50",
            "--checkpoint-every", "1", "--eval-episodes", "0", "--no-progress"]
    assert run_in_process([*args, "--out", str(tmp_path / "full")]).returncode == 0
    p = subprocess.Popen([sys.executable, "-m", "workflow_rl.cli", *args, "--out", str(tmp_path / "part")],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV, cwd=tmp_path,
                         preexec_fn=lambda: signal.signal(signal.SIGXFSZ, signal.SIG_IGN))
    _wait_for(tmp_path / "part" / "training_log.csv", 3, p)
    resource.prlimit(p.pid, resource.RLIMIT_FSIZE, (1000, resource.RLIM_INFINITY))
    _, err = p.communicate(timeout=300)
    assert_one_error_line(p.returncode, err, "File too large.*continues from its last checkpoint with --resume")
    assert not list((tmp_path / "part").rglob("*.tmp*"))
    torch.load(tmp_path / "part" / "checkpoints" / "latest.pt", weights_only=False)   # whole
    r = run_in_process([*args, "--out", str(tmp_path / "part"), "--resume"])
    assert r.returncode == 0, r.stderr
    full, part = (_params(tmp_path / d / "checkpoints" / "latest.pt") for d in ("full", "part"))
    assert all(torch.equal(full[k], part[k]) for k in full)
    assert read_log(tmp_path / "full") == read_log(tmp_path / "part")


@pytest.mark.parametrize("damage", ["word", "no_update_column"])
def test_a_damaged_training_log_on_resume_is_one_line_naming_the_fix(tmp_path, capsys, damage):
    """A resumed run trims its log to its checkpoint; a log edited or cut so it cannot be read is refused in one
    line, and moving it away (the fix the line names) resumes with a new log."""
    args = ["train", "--workflow", "critical_first", "--n-envs", "4", "--num-episodes", "16", "--eval-episodes",
            "0", "--no-progress", "--out", str(tmp_path / "run")]
    rc, _, err = run_main([*args, "--max-episodes", "2"], capsys)
    assert rc == 0, err
    log = tmp_path / "run" / "training_log.csv"
    lines = log.read_text().splitlines()
    lines = [lines[0].replace(",update,", ",upd,")] + lines[1:] if damage == "no_update_column" else \
        [lines[0], lines[1].replace('",1,', '",x,', 1), *lines[2:]]
    log.write_text("\n".join(lines) + "\n")
    rc, _, err = run_main([*args, "--max-episodes", "4", "--resume"], capsys)
    assert rc == 2 and len(err.strip().splitlines()) == 1, err
    assert "training_log.csv is damaged" in err and "move it away to resume with a new log" in err
    log.rename(tmp_path / "aside.csv")
    rc, _, err = run_main([*args, "--max-episodes", "4", "--resume"], capsys)
    assert rc == 0, err
    assert log.read_text().startswith("workflow_id,workflow,update,")


def test_a_training_log_that_is_a_named_pipe_is_refused_not_read(tmp_path):
    """A resumed run reads its log to trim it; a FIFO under that name (anywhere a resume looks: a seed's or a search
    workflow's folder) would block the read forever, so it is refused first."""
    from workflow_rl.rl.runlog import trim_log

    log = tmp_path / "training_log.csv"
    os.mkfifo(log)
    with pytest.raises(ValueError, match="is not a plain file: move it away to resume with a new log"):
        trim_log(log, 3)


@pytest.mark.parametrize("src, read", [
    ("benchmarks/results/ground_truth/ground_truth.csv", "ground_truth"),
    ("benchmarks/results/recipe/cpu-ns50-s1/cyborg-planned-100/episodes.csv", "episodes"),
])
def test_a_csv_saved_with_a_byte_order_mark_reads_as_without(src, read, tmp_path):
    """Judgement call: a spreadsheet that saves CSV as "UTF-8 with BOM" puts U+FEFF before the first column's name,
    which read as a missing column; the files a user hands in (ground truths, episodes, CybORG counts) read the
    same with or without it."""
    from workflow_rl.rl.episodes import read_episodes
    from workflow_rl.search.ground_truth import read_ground_truth

    plain = REPO / src
    bom = tmp_path / plain.name
    bom.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes())
    if read == "ground_truth":
        assert read_ground_truth(bom) == read_ground_truth(plain)
    else:
        a, b = read_episodes(bom), read_episodes(plain)
        assert a.keys() == b.keys() and all(a[k].seed == b[k].seed and (a[k].returns == b[k].returns).all()
                                            and (a[k].places == b[k].places).all() for k in a)


def test_bench_checks_its_native_sizes_against_memory_before_allocating(monkeypatch):
    """bench's native table allocated its largest batch unchecked (numpy's 745 GiB traceback; the range table now
    bounds --native-sizes too, but a machine or a container may still hold less): one line naming the flag."""
    from workflow_rl import bench, resources

    monkeypatch.setattr(resources, "memory_limits", lambda: [(2**30, "this machine's 1.0 GiB", "")])
    with pytest.raises(ValueError, match=r"--native-sizes 4,000,000 would need about .* GiB of memory, more than this "
                                         r"machine's 1.0 GiB: use smaller --native-sizes"):
        bench.check_native_sizes([16, 4_000_000])
    bench.check_native_sizes([16, 1024])   # what fits passes


def test_a_full_disk_mid_evaluation_leaves_the_earlier_evaluation_whole(tmp_path, capsys, monkeypatch):
    """evaluate --out writes its three files all or none (``files.staged_outputs``): the disk filling on the third
    (episodes.csv) leaves the folder's earlier evaluation.json and .md as they were, beside their own episodes.csv,
    and no staging folder behind; the error is one line."""
    from workflow_rl.rl import episodes

    out = tmp_path / "ev"
    rc, _, err = run_main(["evaluate", "sleep", "--episodes", "4", "--out", str(out)], capsys)
    assert rc == 0, err
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert set(before) == {"evaluation.json", "evaluation.md", "episodes.csv"}

    def full(path, cells):
        with open(path, "w") as f:
            f.write("engine,mode\n")   # part of a file, then the disk is full
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(episodes, "write_episodes", full)
    rc, _, err = run_main(["evaluate", "sleep", "--episodes", "6", "--out", str(out), "--overwrite"], capsys)
    assert_one_error_line(rc, err, "No space left on device writing .*episodes.csv: make room")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_memory_running_out_is_one_line(capsys, monkeypatch):
    """A MemoryError in a job (an allocation the memory checks did not foresee) is one line naming the fix."""
    from workflow_rl.cli import tools

    monkeypatch.setattr(tools, "cmd_demo", _raising(MemoryError))
    rc, _, err = run_main(["demo"], capsys)
    assert_one_error_line(rc, err, "out of memory: .* lower its sizes .* --resume")


@pytest.mark.parametrize("exc", [OSError("libllvmlite.so: failed to map segment from shared object"),
                                 ImportError("libtorch_cpu.so: cannot allocate memory"), MemoryError()])
def test_a_library_that_will_not_load_is_one_line(exc, capsys, monkeypatch):
    """Torch or numba failing to load as the command line is parsed (measured: under `ulimit -v 800000` numba's
    LLVM cannot map its code) is one line naming the limit, not a traceback."""
    import workflow_rl.cli as cli

    def parse(argv=None):
        raise exc

    monkeypatch.setattr(cli, "parse", parse)
    rc, _, err = run_main(["demo"], capsys)
    assert_one_error_line(rc, err, r"did not load \(.*\): under a memory limit \(ulimit -v\)")


def test_torchs_allocation_failure_is_out_of_memory_and_a_missing_package_module_is_a_bug(capsys, monkeypatch):
    """Torch's failed allocations are RuntimeErrors, not MemoryErrors: they are one out-of-memory line too. A
    missing workflow_rl module while the command line is parsed is the package's bug: its traceback, not a line
    blaming a memory limit."""
    import workflow_rl.cli as cli
    from workflow_rl.cli import tools

    monkeypatch.setattr(tools, "cmd_demo", _raising(lambda: RuntimeError(
        "[enforce fail at alloc_cpu.cpp:118] DefaultCPUAllocator: can't allocate memory: you tried to allocate 4 TB")))
    rc, _, err = run_main(["demo"], capsys)
    assert_one_error_line(rc, err, "out of memory: ")

    def parse(argv=None):
        raise ModuleNotFoundError("No module named 'workflow_rl.rl.gone'", name="workflow_rl.rl.gone")

    monkeypatch.setattr(cli, "parse", parse)
    with pytest.raises(ModuleNotFoundError):
        cli.main(["demo"])
