"""Training across workflows (``--workflow all`` or a list, ``--hold-out``): the lists, each env's own workflow
stream, compliance per env, equality with a single-workflow run, exact resume, and bad input."""
import re

import numpy as np
import pytest
import torch
from helpers import read_log, run_in_process, run_main, train_cfg

from workflow_rl.rl.checkpoint import load_checkpoint
from workflow_rl.rl.compliance import WINDOW_EPISODES, WorkflowWindow, classify_fixes
from workflow_rl.rl.trainer import Trainer
from workflow_rl.workflow import NAMED, Workflow, WorkflowMix, all_workflows, default_hold_out, parse_workflow_list

A, B = "D,OS,E,OH,U", "E,OH,D,U,OS"
MIX = dict(workflow="all", hold_out="100", n_envs=8, episode_length=20, update_every_steps=10, max_episodes=4,
           min_episodes=1)
"""a tiny run across 20 workflows, two updates per episode (so checkpoints fall mid-episode)"""


def _cfg(**kw):
    """``helpers.train_cfg`` with PPO's settings (memory, mask) given at the same level."""
    from workflow_rl.rl.config import TrainConfig

    return TrainConfig.from_flat({**train_cfg().flat(), **kw})


def _params(trainer):
    return torch.cat([p.detach().flatten() for p in trainer.agent.parameters()])


# ------------------------------------------------------------------------------------------------- the lists
def test_lists_all_named_and_separated():
    assert parse_workflow_list("all") == all_workflows() and parse_workflow_list(" ALL ") == all_workflows()
    assert [w.codes for w in parse_workflow_list("named")] == [Workflow.parse(n).codes for n in NAMED]
    assert [w.codes for w in parse_workflow_list(f"{A};{B}")] == [A, B]
    assert WorkflowMix.list_text(f"critical_first; {B}") == f"{A};{B}" and WorkflowMix.list_text("All") == "all"


@pytest.mark.parametrize("text,match", [
    ("D,OS,E,OH,U;D,OS,X,OH,U", "unknown unit type 'X'"), (";", "lists no workflow"), (f"{A};", "empty item"),
    (f"{A};{A}", "twice"), ("D;OS;E;OH;U", "';' separates workflows"),
])
def test_bad_lists_name_the_fix(text, match):
    with pytest.raises(ValueError, match=match):
        parse_workflow_list(text)


def test_default_hold_out_is_fixed_and_covers_both_sides_of_the_cliff():
    held = WorkflowMix.parse("all", "24").held_out
    assert held == WorkflowMix.parse("all", "24").held_out == default_hold_out(all_workflows(), 24)
    ent, user = 1, 4
    assert sum(w.rank[ent] < w.rank[user] for w in held) == 12
    mix = WorkflowMix.parse("all", "24")
    assert len(mix.train) == 96 and not set(mix.train) & set(held)
    assert WorkflowMix.parse("all", mix.hold_out_text()) == mix   # the config's list reads back as the same mix
    assert WorkflowMix.parse("all", "0").held_out == () and WorkflowMix.parse("all").hold_out_text() is None


@pytest.mark.parametrize("workflows,hold_out,match", [
    (f"{A};{B}", "2", "leaves nothing to train"), (f"{A};{B}", f"{B};{A}", "leaves nothing to train"),
    (f"{A};{B}", "critical_first;U,OH,OS,E,D", "not among the workflows"), ("all", " ", "--hold-out is empty"),
])
def test_bad_hold_outs_name_the_fix(workflows, hold_out, match):
    with pytest.raises(ValueError, match=match):
        WorkflowMix.parse(workflows, hold_out)


def test_each_env_draws_from_its_own_reproducible_stream():
    mix = WorkflowMix.parse("all")
    a = mix.draw(5, range(64), 3)
    assert np.array_equal(a, mix.draw(5, range(64), 3))
    assert np.array_equal(a[10:20], mix.draw(5, range(10, 20), 3))   # an env's draw depends on nothing else
    assert len(set(a.tolist())) > 30                                   # envs differ
    assert not np.array_equal(a, mix.draw(5, range(64), 4)) and not np.array_equal(a, mix.draw(6, range(64), 3))


def test_window_keeps_each_workflows_last_episodes():
    w = WorkflowWindow([1, 2])
    w.add([1] * (WINDOW_EPISODES + 5), [0] * 5 + [3] * WINDOW_EPISODES, [9] * 5 + [1] * WINDOW_EPISODES)
    assert w.compliance(1) == 0.75 and w.worst() == (1, 0.75) and not w.full()   # workflow 2: no episode yet
    w.add([2] * WINDOW_EPISODES, [1] * WINDOW_EPISODES, [1] * WINDOW_EPISODES)
    assert w.full() and w.worst() == (2, 0.5)
    assert WorkflowWindow([1, 2], w.state()).state() == w.state()


def test_per_env_type_ranks_count_each_env_by_its_own_workflow():
    """The same fix in the same state is compliant under one env's workflow and a violation under another's."""
    access = torch.zeros((2, 13), dtype=torch.int8)
    access[:, 1] = 1     # Enterprise0 and ...
    access[:, 9] = 1     # ... User1 compromised
    rank = torch.as_tensor(np.stack([Workflow.parse(A).rank, Workflow.parse("U,E,D,OS,OH").rank]))
    restore_ent0 = torch.tensor([132 + 1, 132 + 1])
    compliant, violation, _ = classify_fixes(restore_ent0, access, rank)
    assert compliant.tolist() == [True, False] and violation.tolist() == [False, True]


# -------------------------------------------------------------------------------------------------- training
def test_a_mix_of_one_workflow_trains_exactly_as_that_workflow(tmp_path):
    """Per-env workflows, their switch at each episode end and the per-env compliance counts give what the
    single-workflow path gives when every env plays the same workflow (a list of two, one held out)."""
    kw = dict(n_envs=8, episode_length=20, update_every_steps=10, max_episodes=3, min_episodes=1,
              red_agent="mix", alignment_lambda=10.0)
    one = Trainer(train_cfg(workflow=A, **kw), tmp_path / "one", progress=False)
    mix = Trainer(train_cfg(workflow=f"{A};{B}", hold_out=B, **kw), tmp_path / "mix", progress=False)
    s1, s2 = one.run(), mix.run()
    assert torch.equal(_params(one), _params(mix))
    skip = {"workflow_id", "workflow", "compliance_worst", "worst_workflow"}
    rows1, rows2 = ([{k: v for k, v in r.items() if k not in skip} for r in read_log(tmp_path / d)]
                    for d in ("one", "mix"))
    assert rows1 == rows2 and any(float(r["avg_fixes"]) > 0 for r in rows1)
    assert s2["compliance"] == s1["compliance"] and s2["workflows"] == [A] and s2["held_out"] == [B]
    assert s2["worst_workflow"] == A


def test_each_env_plays_its_draws_and_the_log_reports_the_worst_workflow(tmp_path):
    t = Trainer(_cfg(**MIX), tmp_path, progress=False)
    s = t.run()
    mix = WorkflowMix.parse("all", "100")
    b = t.batch
    played = {}   # episodes per workflow index, from each env's own stream
    for e in range(4):
        for i in mix.draw(3, range(8), e):
            played[int(mix.ids()[i])] = played.get(int(mix.ids()[i]), 0) + 1
    assert {w: len(q) for w, q in t.slot.window.counts.items() if q} == played
    ids = b.wf_id.tolist()   # now: the fifth episode's draws, with their encodings and ranks
    assert ids == mix.ids()[mix.draw(3, range(8), 4)].tolist()
    assert all(torch.equal(b.rank[i].cpu(), torch.as_tensor(all_workflows()[w].rank)) for i, w in enumerate(ids))
    assert all(torch.equal(b.wf_enc[0, i].cpu(), torch.as_tensor(all_workflows()[w].encode()))
               for i, w in enumerate(ids))
    rows = read_log(tmp_path)
    assert all(r["workflow"] == "mix of 20" for r in rows)
    last = [r for r in rows if int(r["episodes"])][-1]
    worst, c = t.slot.worst()
    assert last["worst_workflow"] == worst == s["worst_workflow"] and float(last["compliance_worst"]) == c


def test_violations_form_trains_across_workflows_paying_only_for_violations(tmp_path):
    """``--alignment-reward violations`` through the trainer, across workflows: every logged episode's alignment
    return is -lambda/100 per violation (so the update's mean times its episodes is a whole number of violations'
    worth, never positive); the compliance counts and the log's other columns are made as under the ratio form."""
    kw = dict(MIX, update_every_steps=20, red_agent="mix", alignment_lambda=10.0)   # an update per whole episode
    t = Trainer(_cfg(**kw, alignment_reward="violations"), tmp_path / "v", progress=False)
    t.run()
    rows = [r for r in read_log(tmp_path / "v") if int(r["episodes"])]
    violations = [-float(r["alignment_bonus"]) * int(r["episodes"]) * 10 for r in rows]   # lambda / 100 = 0.1
    assert all(v >= 0 and abs(v - round(v)) < 1e-3 for v in violations) and sum(violations) > 0
    assert all(float(r["compliance"]) < 1 for r, v in zip(rows, violations) if round(v) > 0)
    ratio = Trainer(_cfg(**kw), tmp_path / "r", progress=False)
    ratio.run()
    first = read_log(tmp_path / "r")[0], read_log(tmp_path / "v")[0]   # same weights so far: same episodes
    assert first[0]["compliance"] == first[1]["compliance"] and first[0]["avg_fixes"] == first[1]["avg_fixes"]
    assert first[0]["alignment_bonus"] != first[1]["alignment_bonus"]


@pytest.mark.slow
@pytest.mark.parametrize("form", ["ratio", "violations"])
def test_resume_mid_episode_is_identical(tmp_path, form):
    cfg = _cfg(**MIX, red_agent="mix", decoy_memory=True, mask_decoys=True, alignment_reward=form)
    full = Trainer(cfg, tmp_path / "full", progress=False)
    full.run()
    part = Trainer(cfg, tmp_path / "part", progress=False)
    for _ in range(3):   # three updates: half way through the second episode
        part.batch.update(10, np.array([8]))
    assert part.batch.global_step % 20 == 10
    part.save()
    part.close()
    resumed = Trainer(cfg, tmp_path / "part", progress=False)
    resumed.restore(load_checkpoint(tmp_path / "part" / "checkpoints" / "latest.pt"))
    resumed.run()
    assert torch.equal(_params(full), _params(resumed))
    assert read_log(tmp_path / "full") == read_log(tmp_path / "part")
    assert resumed.slot.window.state() == full.slot.window.state()


# ------------------------------------------------------------------------------------------------ none share
def test_a_none_share_draws_no_workflow_in_its_share_and_leaves_the_old_stream_alone():
    mix, shared = WorkflowMix.parse("all"), WorkflowMix.parse("all", none_share=0.3)
    old = [int(np.random.default_rng([5, e, 3]).integers(120)) for e in range(64)]
    assert mix.draw(5, range(64), 3).tolist() == old   # without a share: the stream runs and checkpoints were made on
    draws = np.concatenate([shared.draw(5, range(500), e) for e in range(4)])
    assert 0.25 < np.mean(draws == -1) < 0.35 and set(draws[draws >= 0]) <= set(range(120))
    enc, rank, ids = shared.table()
    assert ids[-1] == -1 and not enc[-1].any() and rank[-1].tolist() == [0, 1, 2, 3, 4]
    assert np.array_equal(enc[:-1], mix.encodings()) and np.array_equal(ids[:-1], mix.ids())


def test_episodes_with_no_workflow_earn_no_alignment_and_are_not_counted(tmp_path):
    """Under --none-share an env's episode with no workflow (index -1) has a zero encoding, earns no alignment
    reward and adds no compliant or violating fix to the counts or the workflows' windows; its neighbours' episodes,
    under a workflow, pay for their violations (violations form)."""
    kw = dict(MIX, update_every_steps=20, red_agent="mix", alignment_lambda=10.0, alignment_reward="violations",
              none_share=0.5)
    t = Trainer(_cfg(**kw), tmp_path, progress=False)
    s = t.slot
    t.batch.update(20, np.array([8]))   # one whole episode of every env
    finished = []
    for _ in range(3):
        batch, mask, fin = t.batch._collect(20, np.array([8]))
        finished.append(fin[0])
    ids = np.concatenate([f["workflow_id"] for f in finished])
    align = np.concatenate([f["align_return"] for f in finished])
    fixes = np.concatenate([np.add(f["compliant"], f["violations"]) for f in finished])
    none = ids == -1
    assert none.any() and (~none).any()
    assert (align[none] == 0).all() and (fixes[none] == 0).all()
    assert (align[~none] < 0).any() and (fixes[~none] > 0).any()
    assert -1 not in s.window.counts
    assert s.summary()["none_share"] == 0.5


@pytest.mark.parametrize("kw,match", [
    (dict(workflow=A, none_share=0.2), "--none-share mixes unconstrained episodes into a list"),
    (dict(workflow="all", none_share=1.0), "--none-share 1 plays no workflow"),
    (dict(workflow="all", none_share=-0.1), "--none-share must be in"),
])
def test_bad_none_shares_name_the_fix(kw, match):
    with pytest.raises(ValueError, match=match):
        _cfg(**kw).validate_settings()


# ------------------------------------------------------------------------------------------------ the CLI
@pytest.mark.parametrize("args,match", [
    (["--workflow", "D,OS,E,OH,U;D,OS,E,OH,Q"], "unknown unit type 'Q'"),
    (["--workflow", ";"], "lists no workflow"),
    (["--workflow", f"{A};{B}", "--hold-out", "2"], "leaves nothing to train"),
    (["--workflow", f"{A};{B}", "--hold-out", f"{A};{B}"], "leaves nothing to train"),
    (["--workflow", A, "--hold-out", "3"], "--hold-out leaves workflows out of a list"),
    (["--workflow", "all", "--vectorization", "episodes"], "one vector env"),
])
def test_cli_bad_input_is_one_error_line_and_writes_nothing(args, match, tmp_path, capsys):
    rc, _, err = run_main(["train", *args, "--out", str(tmp_path / "run")], capsys)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("error:") and re.search(match, lines[0]), err
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_cli_writes_the_held_out_list_to_config_and_summary(tmp_path):
    import json

    r = run_in_process(["train", "--workflow", "all", "--hold-out", "110", "--seeds", "2", "--n-envs", "4",
                        "--episode-length", "20", "--update-every-steps", "20", "--max-episodes", "2", "--out",
                        str(tmp_path), "--no-progress"])
    assert r.returncode == 0, r.stderr
    assert "across 10 workflows (110 held out" in r.stdout and "evaluate CHECKPOINT --workflow all" in r.stdout
    held = WorkflowMix.parse("all", "110").hold_out_text()
    for i in range(2):
        cfg = json.loads((tmp_path / f"seed_{i}" / "config.json").read_text())
        assert cfg["workflow"] == "all" and cfg["hold_out"] == held
        s = json.loads((tmp_path / f"seed_{i}" / "summary.json").read_text())
        assert s["held_out"] == held.split(";") and len(s["workflows"]) == 10 and s["eval"] is None
        assert s["episodes"] == 8 and "compliance_worst" in s


@pytest.mark.slow
def test_seeds_across_workflows_with_memory_and_mask_interrupted_resume_identically(tmp_path, monkeypatch):
    """``train --seeds 2`` across workflows, with the red mixture and the memory and mask flags: Ctrl-C after
    the second episode round, then resume, ends where the uninterrupted batch ends (weights and windows)."""
    import os
    import signal

    from workflow_rl.rl.seeds import train_seeds
    from workflow_rl.rl.trainer import BatchedTrainer

    cfg = _cfg(**{**MIX, "update_every_steps": 20, "max_episodes": 5}, red_agent="mix", decoy_memory=True,
               mask_decoys=True, red_memory=True)
    full, agents, _ = train_seeds(cfg, 2, tmp_path / "full", progress=False)
    rounds = BatchedTrainer.run_round

    def interrupted_round(self):
        out = rounds(self)
        if self.global_step == 40:
            os.kill(os.getpid(), signal.SIGINT)   # GracefulInterrupt: finish the round, save, stop
        return out

    monkeypatch.setattr(BatchedTrainer, "run_round", interrupted_round)
    _, _, stopped = train_seeds(cfg, 2, tmp_path / "part", progress=False)
    assert stopped
    monkeypatch.setattr(BatchedTrainer, "run_round", rounds)
    part, resumed, _ = train_seeds(cfg, 2, tmp_path / "part", resume=True, progress=False)
    for a, b in zip(agents, resumed):
        assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    for i in range(2):
        assert read_log(tmp_path / "full" / f"seed_{i}") == read_log(tmp_path / "part" / f"seed_{i}")
        assert (load_checkpoint(tmp_path / "full" / f"seed_{i}" / "checkpoints" / "latest.pt")["counters"]
                ["workflow_window"] == load_checkpoint(tmp_path / "part" / f"seed_{i}" / "checkpoints" /
                                                        "latest.pt")["counters"]["workflow_window"])
    assert [s["compliance_worst"] for s in full] == [s["compliance_worst"] for s in part]
