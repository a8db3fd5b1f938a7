"""Batched multi-workflow training: the stacked network and update against per-member ones, a one-slot batch
against the single-workflow trainer, and checkpoints (the batched search is tested in tests/search)."""

import numpy as np
import pytest
import torch
from helpers import read_log, run_in_process, train_cfg

from workflow_rl.rl.stack import AgentStack, StackedAdam, stacked_ppo_update

from workflow_rl.rl.trainer import BatchedTrainer
from workflow_rl.rl.ppo import PPOConfig, Rollout, clipped_losses
from workflow_rl.rl.stack import ppo_update
from workflow_rl.rl.checkpoint import agent_from_checkpoint, CheckpointError, load_checkpoint
from workflow_rl.rl.trainer import Trainer



def _stack(q, seed=0):
    torch.manual_seed(seed)
    return AgentStack(q)


def test_agent_stack_computes_each_member():
    stack = _stack(3)
    x = torch.randn(3, 10, 77)
    a = torch.randint(0, 145, (3, 10))
    logp, ent, v = stack.evaluate(x, a)
    for k in range(3):
        lp_k, ent_k, v_k = stack.member(k).evaluate(x[k], a[k])
        assert torch.allclose(logp[k], lp_k, atol=1e-5)
        assert torch.allclose(ent[k], ent_k, atol=1e-5)
        assert torch.allclose(v[k], v_k, atol=1e-5)
    sub = stack.evaluate(x[[2, 0]], a[[2, 0]], members=[2, 0])
    assert torch.allclose(sub[0], logp[[2, 0]], atol=1e-6)
    # sampling: the same generator stream gives the same actions as one member alone
    g1, g2 = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    act, _, _ = _stack(1).act(x[:1], g1)
    ref, _, _ = _stack(1).member(0).act(x[0], g2)
    assert torch.equal(act[0], ref)


def _rollout(q, n, seed=1):
    g = torch.Generator().manual_seed(seed)
    return Rollout(torch.randn(q, n, 77, generator=g), torch.randint(0, 145, (q, n), generator=g),
                   -5 + torch.rand(q, n, generator=g), torch.randn(q, n, generator=g),
                   torch.randn(q, n, generator=g), torch.randn(q, n, generator=g))


def _cleanrl_update(agent, optimizer, batch, cfg, generator):
    """CleanRL's PPO update of one network, written out apart from the training code (plain means, ``Tensor.std``,
    ``clip_grad_norm_``, torch's Adam): the reference the stacked update is held to. Returns the last epoch's mean
    policy loss."""
    n = batch.actions.shape[0]
    mb = max(1, n // cfg.num_minibatches)
    losses = []
    for _ in range(cfg.update_epochs):
        perm = torch.randperm(n, generator=generator, device=generator.device)
        for start in range(0, n, mb):
            idx = perm[start:start + mb]
            newlogp, entropy, newv = agent.evaluate(batch.x[idx], batch.actions[idx])
            adv = batch.advantages[idx]
            if cfg.norm_adv and adv.numel() > 1:
                adv = (adv - adv.mean()) / (adv.std() + 1e-8)
            pg_loss, v_loss, ent, _, _ = clipped_losses(newlogp, entropy, newv, batch.logprobs[idx], adv,
                                                        batch.returns[idx], batch.values[idx], cfg, torch.mean)
            optimizer.zero_grad(set_to_none=True)
            (pg_loss - cfg.ent_coef * ent + cfg.vf_coef * v_loss).backward()
            torch.nn.utils.clip_grad_norm_(agent.parameters(), cfg.max_grad_norm)
            optimizer.step()
            losses.append(pg_loss.item())
    return float(np.mean(losses[-max(1, -(-n // mb)):]))


def test_stacked_update_equals_separate_updates():
    """One batched update of three members = three independent CleanRL PPO updates (own rows, own Adam, own
    clipping), and = ``ppo_update`` of each member alone (the same code on a stack of one: equal up to the rounding
    of other GEMM and reduction shapes)."""
    q, n = 3, 64
    cfg = PPOConfig(num_minibatches=1, update_epochs=3, max_grad_norm=0.1)
    stack = _stack(q)
    with torch.no_grad():                         # distinct weights per member
        stack.flat += 0.05 * torch.arange(q).unsqueeze(1)
    singles = [stack.member(k) for k in range(q)]
    alone = [stack.member(k) for k in range(q)]
    batch = _rollout(q, n)
    mask = torch.ones(q, n, dtype=torch.bool)
    mask[1, 40:] = False                         # member 1 trains on its first 40 rows only
    opt = StackedAdam(stack.flat, lr=1e-3)
    stats = stacked_ppo_update(stack, opt, batch, mask, cfg, torch.Generator().manual_seed(0))
    for k, single in enumerate(singles):
        rows = mask[k]
        sub = Rollout(*(getattr(batch, f)[k][rows] for f in ("x", "actions", "logprobs", "advantages", "returns",
                                                               "values")))
        lone = torch.optim.Adam(single.parameters(), lr=1e-3, eps=1e-5, foreach=True)
        ref = _cleanrl_update(single, lone, sub, cfg, torch.Generator().manual_seed(0))
        for p, r in zip(stack.member(k).parameters(), single.parameters()):
            assert torch.allclose(p, r, atol=2e-5), k
        assert stats[k]["policy_loss"] == pytest.approx(ref, abs=1e-4)
        own_adam = torch.optim.Adam(alone[k].parameters(), lr=1e-3, eps=1e-5, foreach=True)
        one = ppo_update(alone[k], own_adam, sub, cfg, torch.Generator().manual_seed(0))
        for p, r in zip(stack.member(k).parameters(), alone[k].parameters()):
            assert torch.allclose(p, r, rtol=0, atol=1e-6), k
        assert one == pytest.approx(stats[k], abs=1e-6)
        # the member's Adam state is the one the lone torch Adam holds, in its format (the checkpoint's)
        own, ref_sd = opt.member_state(stack, k), lone.state_dict()
        assert own["param_groups"] == ref_sd["param_groups"]
        for i, st in ref_sd["state"].items():
            assert float(own["state"][i]["step"]) == float(st["step"]) == cfg.update_epochs
            assert torch.allclose(own["state"][i]["exp_avg"], st["exp_avg"], atol=1e-6)
            assert torch.allclose(own["state"][i]["exp_avg_sq"], st["exp_avg_sq"], atol=1e-8)


def test_members_without_rows_are_not_stepped():
    stack = _stack(2)
    before = stack.member_state(1)
    opt = StackedAdam(stack.flat, lr=1e-3)
    mask = torch.zeros(2, 32, dtype=torch.bool)
    mask[0] = True
    stats = stacked_ppo_update(stack, opt, _rollout(2, 32), mask, PPOConfig(), torch.Generator().manual_seed(0))
    assert stats[1] is None and stats[0] is not None
    assert all(torch.equal(before[k], v) for k, v in stack.member_state(1).items())
    assert opt.member_state(stack, 1)["state"] == {}
    assert float(opt.member_state(stack, 0)["state"][0]["step"]) == PPOConfig().update_epochs * 8


def _cfg(**kw):
    return train_cfg(**{"max_episodes": 3, **kw})


_log = read_log


def _run_slots(bt):
    while any(s is not None and s.stop_reason is None for s in bt.slots):
        bt.run_round()


@pytest.mark.slow
@pytest.mark.parametrize("workflow", ["critical_first", None])
def test_one_slot_batch_trains_like_the_trainer(tmp_path, workflow):
    """The trainer is a one-slot batch: driven round by round (as the search drives it) or update by update (as
    ``train`` does), the same seed gives the same run bit for bit, conditioned or not."""
    cfg = _cfg(workflow=workflow)
    single = Trainer(cfg, tmp_path / "single", progress=False)
    single.run()
    bt = BatchedTrainer(cfg, 1)
    bt.start(0, cfg, tmp_path / "batched")
    _run_slots(bt)
    a, b = _log(tmp_path / "single"), _log(tmp_path / "batched")
    assert len(a) == len(b) == single.update
    for ra, rb in zip(a, b):
        for key in ("update", "episodes", "total_episodes", "global_step"):
            assert ra[key] == rb[key]
        for key in ("env_reward", "compliance", "avg_fixes", "policy_loss"):
            assert ra[key] == rb[key], key
    for p, r in zip(bt.member(0).parameters(), single.agent.parameters()):
        assert torch.equal(p, r)


@pytest.mark.slow
def test_slots_keep_their_own_budget_workflow_and_checkpoint(tmp_path):
    cfg = _cfg(num_episodes=40)
    bt = BatchedTrainer(cfg, 2)
    bt.start(0, cfg, tmp_path / "a")
    bt.start(1, _cfg(workflow="U,OH,OS,E,D", num_episodes=25), tmp_path / "b")
    _run_slots(bt)
    assert bt.slots[0].total_episodes == 40 and bt.slots[1].total_episodes == 25   # exact, each its own
    ck = load_checkpoint(tmp_path / "b" / "checkpoints" / "latest.pt")
    assert ck["workflow"] == ["user", "op_host", "op_server", "enterprise", "defender"]
    agent = agent_from_checkpoint(ck, "cpu")
    assert all(torch.equal(p, r) for p, r in zip(agent.parameters(), bt.member(1).parameters()))
    assert {int(r["workflow_id"]) for r in _log(tmp_path / "b")} == {bt.slots[1].workflow.index}
    # a new workflow in a released slot starts with fresh Adam state; the other member keeps its own
    kept = bt.opt.member_state(bt.agents, 0)["state"]
    assert kept and bt.opt.member_state(bt.agents, 1)["state"]
    bt.release(1)
    bt.start(1, _cfg(workflow="D,E,OS,OH,U"), tmp_path / "c")
    assert bt.opt.member_state(bt.agents, 1)["state"] == {}
    now = bt.opt.member_state(bt.agents, 0)["state"]
    assert all(torch.equal(now[i]["exp_avg"], kept[i]["exp_avg"]) for i in kept)


@pytest.mark.slow
def test_trainer_resumes_a_checkpoint_without_engine_state(tmp_path):
    """A batched slot's checkpoint (taken between episodes, no engine state) continues in the single trainer with
    fresh episodes; the budget stays exact."""
    cfg = _cfg(num_episodes=48, max_episodes=10)
    bt = BatchedTrainer(cfg, 1)
    bt.start(0, _cfg(num_episodes=16, max_episodes=10), tmp_path)
    _run_slots(bt)
    bt.close()
    t = Trainer(cfg, tmp_path, progress=False)
    t.restore(load_checkpoint(tmp_path / "checkpoints" / "latest.pt"))
    assert t.total_episodes == 16
    assert t.run()["episodes"] == 48
    rows = _log(tmp_path)
    assert [int(r["update"]) for r in rows] == list(range(1, len(rows) + 1))


def test_mid_episode_checkpoint_without_engine_state_is_refused(tmp_path):
    t = Trainer(_cfg(), tmp_path, progress=False)
    ck = t.checkpoint()
    ck["env_state"] = None
    ck["counters"]["global_step"] = 50
    with pytest.raises(CheckpointError, match="mid-episode"):
        Trainer(_cfg(), tmp_path / "x", progress=False).restore(ck)




def test_seeds_are_independent_runs_with_their_own_dirs(tmp_path):
    from workflow_rl.rl.seeds import train_seeds

    cfg = _cfg(max_episodes=2, workflow=None)          # unconditioned PPO: no alignment reward, no gate
    summaries, agents, interrupted = train_seeds(cfg, 2, tmp_path, progress=False)
    assert not interrupted
    assert [s["episodes"] for s in summaries] == [cfg.budget, cfg.budget]
    assert all(s["compliance"] is None and s["workflow"] is None for s in summaries)
    p0, p1 = (torch.cat([p.flatten() for p in a.parameters()]) for a in agents)
    assert not torch.allclose(p0, p1)                  # different initial weights (seed, seed + 1)
    for i in range(2):
        rows = _log(tmp_path / f"seed_{i}")
        assert {float(r["alignment_bonus"]) for r in rows if r["episodes"] != "0"} == {0.0}
        assert load_checkpoint(tmp_path / f"seed_{i}" / "checkpoints" / "latest.pt")["workflow"] is None
    # seed 0 of a batch starts exactly where a single run with the same seed starts
    single = Trainer(cfg, tmp_path / "single", progress=False)
    fresh = BatchedTrainer(cfg, 2)
    fresh.start(0, cfg, tmp_path / "x", init_seed=cfg.seed)
    assert all(torch.equal(p, r) for p, r in zip(fresh.member(0).parameters(), single.agent.parameters()))


@pytest.mark.slow
def test_seeds_interrupt_and_resume(tmp_path):
    from workflow_rl.rl import seeds as batched

    cfg = _cfg(max_episodes=4)
    calls = {"n": 0}
    orig = batched.BatchedTrainer.run_round

    def interrupt_after_one(self):
        calls["n"] += 1
        if calls["n"] == 1:
            import os
            import signal
            os.kill(os.getpid(), signal.SIGINT)         # a real Ctrl-C, handled after this round
        return orig(self)

    batched.BatchedTrainer.run_round = interrupt_after_one
    try:
        _, _, interrupted = batched.train_seeds(cfg, 2, tmp_path, progress=False)
    finally:
        batched.BatchedTrainer.run_round = orig
    assert interrupted
    saved = load_checkpoint(tmp_path / "seed_1" / "checkpoints" / "latest.pt")
    assert saved["counters"]["total_episodes"] == 16 and saved["counters"]["stop_reason"] is None
    summaries, _, interrupted = batched.train_seeds(cfg, 2, tmp_path, resume=True, progress=False)
    assert not interrupted and [s["episodes"] for s in summaries] == [64, 64]
    updates = [int(r["update"]) for r in _log(tmp_path / "seed_1")]
    assert updates == list(range(1, len(updates) + 1))
    with pytest.raises(CheckpointError, match="--n-envs"):
        batched.train_seeds(_cfg(max_episodes=4, n_envs=8), 2, tmp_path, resume=True, progress=False)


def test_across_seeds_is_a_student_t_interval():
    from workflow_rl.rl.evaluate import across_seeds

    a = across_seeds([1.0, 2.0, 3.0])
    assert a["mean"] == 2.0 and a["std"] == 1.0
    assert a["ci95"] == pytest.approx(4.302653 / 3 ** 0.5, rel=1e-5)


def test_cli_seeds(tmp_path):
    out = tmp_path / "s"
    r = run_in_process(["train", "--seeds", "2", "--n-envs", "8", "--max-episodes", "2", "--eval-episodes", "16",
                        "--out", str(out), "--no-progress"])
    assert r.returncode == 0, r.stderr
    import json
    s = json.loads((out / "summary.json").read_text())
    assert s["across_seeds"]["n"] == 2 and [x["seed"] for x in s["seeds"]] == [0, 1]
    assert (out / "seed_1" / "summary.json").exists()
    r = run_in_process(["train", "--seeds", "2", "--tensorboard", "--out", str(tmp_path / "t")])
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "--tensorboard" in r.stderr


@pytest.mark.parametrize("kw", [dict(compliance_threshold=0.01, min_fixes=1, post_gate_episodes=2),   # gates fire
                                dict(post_gate_episodes=3),                      # no gate: the cap is the bound
                                dict(compliance_threshold=0.01, min_fixes=1, post_gate_episodes=1, num_episodes=30)])
def test_most_episodes_bounds_every_run_and_is_exact_once_it_stops(tmp_path, kw):
    """``Slot.most_episodes`` (what a search lets a running workflow keep of its claim) never falls below what the
    run goes on to train, only shrinks, and equals the total once the run stopped."""
    cfg = _cfg(**kw)
    bt = BatchedTrainer(cfg, 2)
    bt.start(0, cfg, tmp_path / "a")
    bt.start(1, _cfg(**{**kw, "workflow": "U,OH,OS,E,D"}), tmp_path / "b")
    bounds = {0: [], 1: []}
    while any(s.stop_reason is None for s in bt.slots):
        for k in (0, 1):
            bounds[k].append(bt.slots[k].most_episodes())
        bt.run_round()
    for k, s in enumerate(bt.slots):
        assert s.most_episodes() == s.total_episodes <= cfg.budget
        assert all(b >= s.total_episodes for b in bounds[k])
        assert bounds[k] == sorted(bounds[k], reverse=True)
    if kw.get("compliance_threshold"):
        assert any(s.gate_at is not None for s in bt.slots)     # the case that lowers a claim was exercised
        gated = next(s for s in bt.slots if s.gate_at is not None)
        assert gated.total_episodes < cfg.budget or "num_episodes" in kw


def test_most_episodes_allows_for_updates_that_span_several_episodes():
    from workflow_rl.rl.schedule import most_episodes

    cfg = _cfg(update_every_steps=300, episode_length=100, max_episodes=10, post_gate_episodes=4, num_episodes=10**6)
    # before the gate only the run's budget bounds it (the gate may fire at its last episode)
    assert most_episodes(cfg, 0, 0, None, None) == cfg.budget == cfg.n_envs * (10 + 4)
    # three episodes per update: the post-gate phase can overshoot by 2 per env
    assert most_episodes(cfg, 3, 3 * cfg.n_envs, 3, None) == cfg.n_envs * (3 + 4 + 2)
    assert most_episodes(cfg, 9, 9 * cfg.n_envs, 3, None) == 9 * cfg.n_envs         # the phase is over
    assert most_episodes(cfg, 9, 123, 3, "post_gate") == 123


def test_a_slot_waits_at_its_claim_and_trains_on_when_it_grows(tmp_path):
    """A claim below the budget (an elastic search's slot): a pausing slot waits there — not stopped, training
    nothing while others train — trains on when the claim grows and stops "budget" where a cut leaves it, with its
    checkpoint; a slot that does not pause stops "budget" at its claim. The bounds a search reads: within the claim
    the claim, within the budget the budget (no gate yet)."""
    cfg = _cfg(max_episodes=4)                     # budget 64 = 4 episodes x 16 envs
    bt = BatchedTrainer(cfg, 3)
    bt.start(0, cfg, tmp_path / "a", claim=20, pauses=True)
    bt.start(1, cfg, tmp_path / "b", claim=20)
    bt.start(2, cfg, tmp_path / "c")               # keeps the batch training
    for _ in range(2):
        bt.run_round()
    a, b = bt.slots[0], bt.slots[1]
    assert a.total_episodes == 20 and a.waiting and a.stop_reason is None
    assert b.total_episodes == 20 and b.stop_reason == "budget" and not b.waiting
    assert a.most_episodes() == 20 and a.most_episodes(within_claim=False) == cfg.budget == 64
    update = a.update
    bt.run_round()
    assert a.total_episodes == 20 and a.update == update            # waiting trains nothing
    with pytest.raises(ValueError):
        bt.extend(0, 19)
    bt.extend(0, 40)
    assert not a.waiting
    for _ in range(2):
        bt.run_round()
    assert a.total_episodes == 40 and a.waiting
    bt.cut(0)
    assert a.stop_reason == "budget" and not a.waiting and a.most_episodes() == 40
    ck = load_checkpoint(tmp_path / "a" / "checkpoints" / "latest.pt")
    assert ck["counters"]["total_episodes"] == 40 and ck["counters"]["stop_reason"] == "budget"


class _Killed(BaseException):
    """Stands for kill -9: nothing after it runs."""


@pytest.mark.slow
def test_seeds_killed_after_any_checkpoint_or_batch_state_resume_identically(tmp_path, monkeypatch):
    """``train --seeds`` killed just after each checkpoint or batch-state write in turn resumes to the uninterrupted
    run's weights and logs. Failed before: killed between a seed's checkpoint and the batch state, the resume found
    them at different updates and went on with fresh episodes (``rl.trainer.reconcile_staged`` now)."""
    from workflow_rl.rl import seeds as batched
    from workflow_rl.rl import trainer as trainer_module

    cfg = _cfg(max_episodes=4, checkpoint_every=1, ppo=PPOConfig(update_epochs=1, num_minibatches=2))   # toy updates
    batched.train_seeds(cfg, 2, tmp_path / "full", progress=False)
    nth = 1
    while True:
        done = []
        with monkeypatch.context() as m:
            for owner in (trainer_module, batched):   # the seeds' checkpoints, the batch state
                original = owner.atomic_save

                def wrote(obj, path, _original=original):
                    _original(obj, path)
                    done.append(path.name)
                    if len(done) == nth:
                        raise _Killed

                m.setattr(owner, "atomic_save", wrote)
            try:
                batched.train_seeds(cfg, 2, tmp_path / f"k{nth}", progress=False)
                break
            except _Killed:
                pass
        # killed before the first batch state: nothing was committed, so there is nothing to resume (a resume
        # says so: no checkpoint) and the run starts again
        resume = (tmp_path / f"k{nth}" / "seed_0" / "checkpoints" / "latest.pt").exists()
        batched.train_seeds(cfg, 2, tmp_path / f"k{nth}", resume=resume, progress=False)
        for i in range(2):
            a, b = (tmp_path / d / f"seed_{i}" for d in ("full", f"k{nth}"))
            ka, kb = (load_checkpoint(p / "checkpoints" / "latest.pt")["agent"] for p in (a, b))
            assert all(torch.equal(ka[k], kb[k]) for k in ka), f"killed after write {nth} ({done[-1]}): seed {i}"
            assert [r["mean100"] for r in _log(b)] == [r["mean100"] for r in _log(a)], f"write {nth}: seed {i}"
        nth += 1
    assert nth > 4
