"""``rl.actor.Actor``, the one owner of acting: its state is the caller's, so one actor serves many batches."""
import numpy as np
import pytest
import torch

from workflow_rl.envs.native_env import NativeVectorEnv
from workflow_rl.rl import pretrained
from workflow_rl.rl.actor import Actor
from workflow_rl.rl.planning.planner import make_act
from workflow_rl.sim import tables as T


def test_one_actor_plays_two_batches_as_two_acting_functions_do():
    """Two batches (3 and 2 envs, different episodes) stepped in turn through one Actor, each with its own state,
    play what two separate ``make_act`` functions play: nothing of one episode leaks into the other (the shipped
    agent has decoy memory, masking and an opening)."""
    agent, wf = pretrained.load("pretrained:universal")
    assert agent.opening and agent.memory.dim
    policy = Actor.of(agent, wf)
    envs = [NativeVectorEnv(n, T.RED_MEANDER, 100, seed=s) for n, s in ((3, 1), (2, 2))]
    obs = [e.reset(seed=s)[0] for e, s in zip(envs, (1, 2))]
    states = [policy.reset(3), policy.reset(2)]
    refs = [make_act(agent, workflow=wf), make_act(agent, workflow=wf)]
    for t in range(25):
        for i, env in enumerate(envs):
            o = torch.as_tensor(obs[i])
            a, states[i] = policy.act(o, states[i], t)
            assert torch.equal(a, refs[i](o, t))
            if t < len(agent.opening):
                assert (a == agent.opening[t]).all()
            obs[i], *_ = env.step(a.numpy())
    assert states[0].shape == (3, agent.memory.dim) and states[1].shape == (2, agent.memory.dim)


def test_a_new_episode_or_batch_starts_from_blank_memory():
    agent, wf = pretrained.load("pretrained:universal")
    policy = Actor.of(agent, wf)
    obs = torch.zeros(4, 4 * T.N_HOSTS)
    _, mem = policy.act(obs, None, 0)
    assert mem.shape == (4, agent.memory.dim)
    _, again = policy.act(obs[:2], mem, 1)   # another batch size: a blank state of its size
    assert again is not mem and again.shape[0] == 2
    assert torch.equal(policy.reset(2), torch.zeros(2, agent.memory.dim))
    assert policy.device == agent.device and policy.encoding.device == agent.device
    enc = torch.as_tensor(np.stack([wf.encode()] * 3)) if wf else torch.zeros(3, 25)
    assert Actor.of(agent, encodings=enc).inputs(obs[:3], policy.reset(3)).shape[0] == 3


def test_make_act_takes_a_name_or_a_loaded_agent_greedy_sampled_or_planned():
    """The one acting function: a shipped agent's name and the same agent loaded play alike (one observation gives
    an int, a batch a tensor); a seeded sampled run repeats; a planned run is greedy under one workflow."""
    from workflow_rl.rl.planning.planner import PlanConfig

    agent, wf = pretrained.load("pretrained:universal")
    env = NativeVectorEnv(3, T.RED_MEANDER, 100, seed=4)
    obs, _ = env.reset(seed=4)
    by_name, loaded = make_act("pretrained:universal"), make_act(agent, workflow=wf)
    single = make_act(agent, workflow=wf)
    sampled = [make_act(agent, workflow=wf, greedy=False, generator=torch.Generator().manual_seed(9)) for _ in "ab"]
    for t in range(12):
        o = torch.as_tensor(obs)
        a = loaded(o, t)
        assert torch.equal(by_name(o, t), a) and single(obs[0], t) == int(a[0])
        assert torch.equal(sampled[0](o, t), sampled[1](o, t))
        obs, *_ = env.step(a.numpy())
    for bad in ({"greedy": False}, {"encodings": torch.zeros(3, 25)}):
        with pytest.raises(ValueError, match="planned act is greedy"):
            make_act(agent, PlanConfig(), workflow=wf, **bad)


@pytest.mark.parametrize("greedy", [True, False], ids=["greedy", "sampled"])
def test_acting_chooses_what_the_agents_own_act_chooses(greedy):
    """``Actor.act`` reads only the actor's logits (no critic, no log-probabilities): its choices, greedy or sampled
    with a seeded generator, are those ``Agent.act`` makes from the same inputs and draws."""
    agent, wf = pretrained.load("pretrained:universal")
    policy = Actor.of(agent, wf)
    env = NativeVectorEnv(16, T.RED_BLINE, 100, seed=3)
    obs, _ = env.reset(seed=3)
    mem, g_actor, g_agent = None, torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    for t in range(len(agent.opening), len(agent.opening) + 20):
        o = torch.as_tensor(obs)
        x = policy.inputs(o, mem.clone() if mem is not None else policy.reset(16))   # act updates its own mem
        with torch.no_grad():
            want = agent.act(x, g_agent, greedy=greedy)[0]
        a, mem = policy.act(o, mem, t, greedy, g_actor)
        assert torch.equal(a, want), t
        obs, *_ = env.step(a.numpy())
