"""The particle belief over native-engine states (planning/belief.py)."""
import numpy as np
import pytest

from workflow_rl.rl.planning.belief import BeliefConfig, ParticleBelief
from workflow_rl.envs.native_env import NativeVectorEnv
from workflow_rl.sim import attackers
from workflow_rl.sim import tables as T


def _episode(red, steps=40, seed=21):
    """(actions, observations, true access) of one native episode under a fixed mix of Sleep, Remove, Restore."""
    env = NativeVectorEnv(1, red, 100, seed=seed)
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(steps):
        a = int(rng.choice([0, 0, 0, T.A_REMOVE + int(rng.integers(13)), T.A_RESTORE + int(rng.integers(13))]))
        obs, _, _, _, info = env.step(np.array([a]))
        out.append((a, obs[0].copy(), info["red_access"][0].copy()))
    return out


def _follow(belief, episode):
    held, p_true = [], []
    for a, obs, access in episode:
        belief.update(a, obs)
        held.append((belief.access == access).all(1).any())
        p_true.append(belief.access_probs()[np.arange(13), access].mean())
    return np.array(held), np.array(p_true)


@pytest.mark.parametrize("red", [T.RED_BLINE, T.RED_MEANDER])
def test_the_particles_hold_the_truth_and_find_the_red_agent(red):
    episode = _episode(red)
    b = ParticleBelief(BeliefConfig(particles=64), seed=1)
    held, p_true = _follow(b, episode)
    assert held.mean() >= 0.9, held
    assert p_true.mean() >= 0.95
    assert b.distance.min() == 0                   # some particle reproduces the last observation exactly
    assert b.red_posterior()[red] >= 0.9           # the red agent is part of the particle, and found


def test_the_same_seed_gives_the_same_particles():
    episode = _episode(T.RED_MEANDER, 25)
    a, b, c = (ParticleBelief(BeliefConfig(particles=32), seed=s) for s in (4, 4, 5))
    for x in (a, b, c):
        _follow(x, episode)
    assert all(np.array_equal(u, v) for u, v in zip(a.state, b.state))
    assert not all(np.array_equal(u, v) for u, v in zip(a.state, c.state))


def test_resampled_copies_get_their_own_rng_keys():
    b = ParticleBelief(BeliefConfig(particles=32), seed=0)
    b.update(0, np.zeros(52, np.float32))
    assert len(np.unique(b.state.key)) == 32


def test_an_observation_no_particle_reproduces_reseeds_from_the_start():
    b = ParticleBelief(BeliefConfig(particles=16), seed=0)
    impossible = np.ones(52, np.float32)
    b.update(0, impossible)
    assert b.reseeds == 1 and b.distance.min() > 0
    assert np.isclose(b.weights.sum(), 1.0) and (b.state.t == 1).all()
    b.reset()
    assert b.reseeds == 0 and (b.state.t == 0).all() and b.actions == []


@pytest.mark.parametrize("red,inside", [("B_lineAgent", True), ("DelayedB_line", False),
                                        ("RedMeanderAgent", False)])
def test_the_fit_stays_high_within_the_prior_and_drops_outside_it(red, inside):
    """The fit (the particles' mean likelihood of each observation) under a prior of B_line alone: never below one
    particle's share (1/64) along a B_line episode; within a few steps of a DelayedB_line episode (it sleeps where
    B_line scans) or a Meander one (it scans other hosts) no particle, even re-seeded, reproduces what blue saw:
    the fit falls to e^-penalty or below, where the planner's default ``min_fit`` rejects the model (a step later
    it may fit again: the survivors of a wrong model can match a quiet step)."""
    b = ParticleBelief(BeliefConfig(particles=64, red_agent="B_lineAgent"), seed=1)
    assert b.fit == 1.0   # nothing observed yet
    fits = []
    for a, obs, _ in _episode(attackers.kind_of(red)):
        b.update(a, obs)
        fits.append(b.fit)
    if inside:
        assert min(fits) >= 1 / 64 and b.reseeds == 0
    else:
        assert min(fits[:5]) <= np.exp(-b.config.mismatch_penalty) and b.reseeds > 0, fits[:5]   # each a bit off
    b.reset()
    assert b.fit == 1.0


def test_a_wider_prior_re_seeds_the_episode_and_fits_an_attacker_it_holds():
    """Widened to a prior that holds the attacker, the re-seeded belief replays the episode so far and fits it
    again (the planner's second chance); the next episode starts from the config's own prior."""
    episode = _episode(attackers.kind_of("DelayedB_line"))
    b = ParticleBelief(BeliefConfig(particles=64, red_agent="B_lineAgent"), seed=1)
    for a, obs, _ in episode[:2]:   # the second step: B_line scans, DelayedB_line sleeps
        b.update(a, obs)
    assert b.fit <= np.exp(-b.config.mismatch_penalty)
    b.widen("B_lineAgent:1,DelayedB_line:1")
    assert b.fit >= 1 / 64 and (b.state.t == 2).all() and len(b.actions) == 2
    fits = []
    for a, obs, _ in episode[2:]:
        b.update(a, obs)
        fits.append(b.fit)
    assert min(fits) >= 1 / 64 and b.red_posterior()[attackers.kind_of("DelayedB_line")] > 0.99
    b.reset()
    assert set(b.state.red_kind) == {attackers.kind_of("B_lineAgent")}


@pytest.mark.parametrize("kw,match", [({"particles": 0}, "--plan-particles"),
                                      ({"mismatch_penalty": 0.0}, "--plan-mismatch-penalty"),
                                      ({"red_agent": "nobody"}, "unknown red agent")])
def test_bad_settings_are_refused(kw, match):
    with pytest.raises(ValueError, match=match):
        BeliefConfig(**kw).validate()
