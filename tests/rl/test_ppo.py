"""GAE against exact answers, including the time-limit bootstrap, the agent's shapes, and the single-network update
against the trainer's (the stacked update's losses against CleanRL's: tests/rl/test_batched.py)."""
import pytest
import torch

from workflow_rl.rl.ppo import Agent, PPOConfig, Rollout, gae
from workflow_rl.rl.stack import ppo_update
from workflow_rl.rl.stack import AgentStack, StackedAdam, StackedUpdate


def _t(x):
    return torch.tensor(x, dtype=torch.float32).reshape(-1, 1)


def test_gae_single_env_matches_hand_computation():
    g, lam = 0.9, 0.8
    r, v, nv = _t([1.0, 2.0, 3.0]), _t([0.5, 0.4, 0.3]), _t([0.4, 0.3, 0.2])
    z = _t([0, 0, 0])
    adv, ret = gae(r, v, nv, z, z, g, lam)
    d = [1 + g * 0.4 - 0.5, 2 + g * 0.3 - 0.4, 3 + g * 0.2 - 0.3]
    a2 = d[2]
    a1 = d[1] + g * lam * a2
    a0 = d[0] + g * lam * a1
    assert torch.allclose(adv.squeeze(1), torch.tensor([a0, a1, a2]))
    assert torch.allclose(ret, adv + v)


def test_truncation_bootstraps_and_cuts_the_recursion():
    """A truncated step uses V(final obs) (passed as next value) and does not leak the next episode's advantage."""
    g, lam = 0.99, 0.95
    r, v = _t([1.0, 1.0, 1.0]), _t([2.0, 2.0, 2.0])
    nv = _t([2.0, 5.0, 2.0])           # step 1 ends an episode; its last observation is worth 5
    ends = _t([0, 1, 0])
    adv, _ = gae(r, v, nv, torch.zeros_like(ends), ends, g, lam)
    d1 = 1 + g * 5.0 - 2.0
    d2 = 1 + g * 2.0 - 2.0
    assert torch.isclose(adv[2, 0], torch.tensor(d2))
    assert torch.isclose(adv[1, 0], torch.tensor(d1))           # no g*lam*adv[2] term
    assert torch.isclose(adv[0, 0], torch.tensor(1 + g * 2.0 - 2.0 + g * lam * d1))


def test_termination_does_not_bootstrap():
    r, v, nv = _t([1.0]), _t([0.0]), _t([100.0])
    adv, _ = gae(r, v, nv, _t([1]), _t([1]), 0.99, 0.95)
    assert torch.isclose(adv[0, 0], torch.tensor(1.0))


def test_infinite_horizon_constant_reward_values_are_fixed_point():
    """With V = r/(1-g) everywhere and truncations bootstrapped, every advantage is 0 (SB3's infinite-horizon
    check): truncation is not treated as an end of the task."""
    g = 0.9
    T_, N = 50, 3
    r = torch.ones((T_, N))
    v = torch.full((T_, N), 1 / (1 - g))
    ends = torch.zeros((T_, N))
    ends[9::10] = 1
    adv, _ = gae(r, v, v.clone(), torch.zeros_like(ends), ends, g, 0.95)
    assert adv.abs().max() < 1e-4


def test_agent_shapes_and_seeded_sampling():
    agent = Agent()
    x = torch.rand(16, 77)
    a1, lp, val = agent.act(x, torch.Generator().manual_seed(3))
    a2, _, _ = agent.act(x, torch.Generator().manual_seed(3))
    assert a1.shape == (16,) and lp.shape == (16,) and val.shape == (16,)
    assert torch.equal(a1, a2) and ((a1 >= 0) & (a1 < 145)).all()
    assert [m.out_features for m in agent.actor if isinstance(m, torch.nn.Linear)] == [64, 64, 145]
    lp2, ent, _ = agent.evaluate(x, a1)
    assert torch.allclose(lp, lp2) and (ent > 0).all()


def _rollout(n, seed=1):
    g = torch.Generator().manual_seed(seed)
    return Rollout(torch.randn(n, 77, generator=g), torch.randint(0, 145, (n,), generator=g),
                   -5 + torch.rand(n, generator=g), torch.randn(n, generator=g), torch.randn(n, generator=g),
                   torch.randn(n, generator=g))


def test_ppo_update_is_the_trainers_update_of_a_stack_of_one():
    """``ppo_update`` (one Agent, a torch Adam) runs the trainer's update (``StackedUpdate``, ``ppo_step``) on a
    stack of one: equal bit for bit by design (the same code on the same shapes), also in the second update, which
    starts from the Adam state the first handed back to the torch optimiser."""
    cfg = PPOConfig(num_minibatches=4, update_epochs=2)
    torch.manual_seed(0)
    agent = Agent()
    stack = AgentStack(1)
    stack.load_member(0, agent.state_dict())
    opt = StackedAdam(stack.flat, lr=1e-3)
    upd = StackedUpdate(stack, opt, cfg)
    params = list(agent.parameters())
    lone = torch.optim.Adam(params, lr=1e-3, eps=1e-5)
    g_stack, g_lone = torch.Generator().manual_seed(0), torch.Generator().manual_seed(0)
    for seed in (1, 2):
        batch = _rollout(64, seed)
        ref = upd.run(Rollout(*(t.unsqueeze(0) for t in vars(batch).values())), torch.ones(1, 64, dtype=torch.bool),
                      g_stack)[0]
        assert ppo_update(agent, lone, batch, cfg, g_lone) == ref
    assert all(torch.equal(v, agent.state_dict()[k]) for k, v in stack.member_state(0).items())
    assert list(agent.parameters()) == params and all(a is b for a, b in zip(agent.parameters(), params))
    own, sd = opt.member_state(stack, 0)["state"], lone.state_dict()
    assert sd["param_groups"][0]["lr"] == 1e-3 and sd["param_groups"][0]["eps"] == 1e-5
    for i, st in sd["state"].items():
        assert float(st["step"]) == float(own[i]["step"]) == 2 * cfg.update_epochs * cfg.num_minibatches
        assert torch.equal(st["exp_avg"], own[i]["exp_avg"]) and torch.equal(st["exp_avg_sq"], own[i]["exp_avg_sq"])


def test_ppo_update_refuses_an_optimiser_it_does_not_implement():
    agent = Agent()
    with pytest.raises(ValueError, match="plain Adam"):
        ppo_update(agent, torch.optim.Adam(agent.parameters(), weight_decay=0.1), _rollout(8), PPOConfig(),
                   torch.Generator().manual_seed(0))
