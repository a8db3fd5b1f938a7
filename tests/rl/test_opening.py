"""A fixed opening (``--opening``): training plays it and leaves its steps out of the update; every acting function
(evaluation, the planner, a checkpoint loaded again) plays it before the policy."""
import numpy as np
import pytest
import torch
from helpers import train_cfg

from workflow_rl.rl.actor import Actor
from workflow_rl.rl.checkpoint import agent_from_checkpoint, load_checkpoint
from workflow_rl.rl.memory import Memory
from workflow_rl.rl.planning.planner import PlanConfig, make_act
from workflow_rl.rl.ppo import Agent, PPOConfig, opening_at
from workflow_rl.rl.trainer import Trainer

OPENING = (51, 116, 55)   # two decoys on User2, one on Enterprise0


def test_opening_at_and_what_an_actor_plays():
    assert [opening_at(OPENING, t) for t in range(5)] == [51, 116, 55, None, None]
    policy = torch.tensor([7, 8])
    assert Actor.play(policy, opening_at(OPENING, 1)).tolist() == [116, 116]
    assert Actor.play(policy, opening_at(OPENING, 3)) is policy
    assert Actor.play(policy, opening_at((), 0)) is policy


def _trainer(tmp_path, **kw):
    cfg = train_cfg(workflow=None, n_envs=4, episode_length=10, update_every_steps=10, max_episodes=2,
                    ppo=PPOConfig(hidden=(8,), decoy_memory=True, mask_decoys=True, opening=OPENING), **kw)
    return Trainer(cfg, tmp_path, progress=False)


def test_training_plays_the_opening_and_masks_its_steps_out(tmp_path):
    b = _trainer(tmp_path).batch
    played = []
    step = b.stepper.step
    b.stepper.step = lambda a: (played.append(a.clone()), step(a))[1]
    batch, mask, _ = b._collect(20, np.array([4]))   # two whole episodes of 10 steps
    played = torch.stack(played)                      # (20, 4)
    for start in (0, 10):
        for i, a in enumerate(OPENING):
            assert (played[start + i] == a).all()
    # the rows (step-major, 4 envs a step) of the opening's steps train nothing; every other row does
    by_step = mask.view(20, 4)   # mask: (1 slot, 20 steps x 4 envs)
    assert not by_step[[0, 1, 2, 10, 11, 12]].any()
    assert by_step[[3, 9, 13, 19]].all()
    # the decoys the opening placed are in the policy's memory, as if the policy had placed them: the input at
    # step 3 differs from step 0's in the memory block only
    x = batch.x.view(20, 4, -1)
    assert not torch.equal(x[3, :, 77:], x[0, :, 77:]) and (x[0, :, 77:] == 0).all()


def test_a_run_with_an_opening_saves_it_and_the_loaded_agent_plays_it(tmp_path):
    t = _trainer(tmp_path)
    t.run()
    agent = agent_from_checkpoint(load_checkpoint(tmp_path / "checkpoints" / "latest.pt"), "cpu")
    assert agent.opening == OPENING
    act = make_act(agent)
    obs = torch.zeros(3, 52)
    assert [int(act(obs, s)[0]) for s in range(3)] == list(OPENING)
    with torch.no_grad():
        own = agent.logits(torch.cat([obs, torch.zeros(3, 25), torch.zeros(3, agent.memory.dim)], 1))
    assert act(obs, 3).shape == (3,) and own.shape == (3, 145)


@pytest.mark.parametrize("plan", [None, PlanConfig(particles=4, top_k=2, horizon=2, rollouts=2)])
def test_the_planner_plays_the_opening_before_it_plans(plan):
    torch.manual_seed(0)
    agent = Agent((8,), Memory(decoys=True, masked=True), OPENING).eval()
    act = make_act(agent, plan, seed=1, episode_length=10)
    obs = np.zeros(52, np.float32)
    assert [act(obs, t) for t in range(3)] == list(OPENING)
    assert 0 <= act(obs, 3) < 145


def test_fine_tuning_keeps_the_starting_agents_opening_unless_one_is_typed(tmp_path, capsys):
    """A policy trained after an opening plays badly after another, so ``--init-checkpoint`` without ``--opening``
    keeps the starting agent's and says so; a typed one wins, silently."""
    import json

    from helpers import run_main

    tiny = ["--workflow", "none", "--n-envs", "4", "--max-episodes", "1", "--eval-episodes", "0", "--no-progress",
            "--hidden", "8", "--decoy-memory"]
    assert run_main(["train", *tiny, "--opening", "51", "116", "--out", str(tmp_path / "o")], capsys)[0] == 0
    start = str(tmp_path / "o" / "checkpoints" / "latest.pt")
    for typed, want in (([], [51, 116]), (["--opening", "55"], [55])):
        out = tmp_path / f"t{len(typed)}"
        rc, said, _ = run_main(["train", *tiny, "--init-checkpoint", start, *typed, "--out", str(out)], capsys)
        assert rc == 0 and json.loads((out / "config.json").read_text())["ppo"]["opening"] == want
        assert ("opening: 51 116, the opening" in said) == (not typed), said
