"""The engine API a belief and a planner need: copy envs' states, re-key copies, step a subset, compare
observations."""
import numpy as np
import pytest

from workflow_rl.sim import native as sim
from workflow_rl.sim import tables as T


def _running(n=8, steps=12, seed=3, red=T.RED_BLINE):
    state, b = sim.allocate_state(n), sim.allocate_buffers(n)
    sim.seed_state(state, seed, red)
    sim.reset_envs(state, b)
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        sim.step(state, rng.integers(0, T.N_ACTIONS, n), b, 100)
    return state, b


def _play(state, actions, steps=20):
    b = sim.allocate_buffers(len(state.key))
    out = []
    for _ in range(steps):
        sim.step(state, actions, b, 1000)
        out.append(np.concatenate([b.obs, b.reward[:, None], b.access], 1).copy())
    return np.stack(out, 1)   # (n, steps, 52 + 1 + 13)


def test_a_copy_plays_what_the_original_plays():
    state, _ = _running()
    copy = sim.take_state(state, [5])
    original = sim.take_state(state, np.arange(8))
    a = np.full(8, 0, np.int64)
    assert np.array_equal(_play(copy, a[:1]), _play(original, a)[5:6])


def test_copies_share_a_future_until_rekeyed():
    state, _ = _running(red=T.RED_MEANDER)
    many = sim.take_state(state, np.full(16, 2))
    same = _play(sim.take_state(many, np.arange(16)), np.zeros(16, np.int64), 40)
    assert (same == same[:1]).all()
    sim.rekey(many, seed=9)
    assert len(np.unique(many.key)) == 16
    apart = _play(many, np.zeros(16, np.int64), 40)
    assert len({x.tobytes() for x in apart}) > 1       # Meander's target draws now differ between copies
    again = sim.take_state(state, np.full(16, 2))
    sim.rekey(again, seed=9)
    assert np.array_equal(_play(again, np.zeros(16, np.int64), 40), apart)   # same seed, same futures


def test_put_state_writes_rows_in_place():
    state, _ = _running()
    dst = sim.take_state(state, np.zeros(8, np.int64))
    sim.put_state(dst, [1, 3], state, [6, 7])
    for d, s in zip(dst, state):
        assert np.array_equal(d[1], s[6]) and np.array_equal(d[3], s[7]) and np.array_equal(d[0], s[0])


@pytest.mark.parametrize("n", [8, 600], ids=["serial", "chunks"])   # below and above sim.native._SERIAL_BELOW
def test_step_with_a_mask_steps_only_the_selected_envs(n):
    state, b = _running(n)
    full = sim.take_state(state, np.arange(n))
    part = sim.take_state(state, np.arange(n))
    fb, pb = sim.allocate_buffers(n), sim.allocate_buffers(n)
    pb.obs[:] = 7.0
    actions = np.arange(n, dtype=np.int64) * 17 % T.N_ACTIONS
    mask = np.resize(np.array([1, 0, 1, 0, 0, 1, 1, 0], bool), n)
    sim.step(full, actions, fb, 100)
    sim.step(part, actions, pb, 100, mask=mask)
    for f, p, s in zip(full, part, state):
        assert np.array_equal(p[mask], f[mask]) and np.array_equal(p[~mask], s[~mask])
    assert np.array_equal(pb.obs[mask], fb.obs[mask]) and (pb.obs[~mask] == 7.0).all()
    assert np.array_equal(pb.reward[mask], fb.reward[mask])


def test_a_mask_of_another_length_is_refused():
    state, b = _running()
    with pytest.raises(ValueError, match=r"one entry per env \(8\)"):
        sim.step(state, np.zeros(8, np.int64), b, 100, mask=np.ones(0, bool))   # not "every env"


def test_obs_distance_counts_differing_bits():
    target = np.zeros(52, np.float32)
    target[[0, 5]] = 1
    obs = np.zeros((3, 52), np.float32)
    obs[1, 0] = 1
    obs[2, [0, 5]] = 1
    obs[2, 51] = 1
    assert sim.obs_distance(obs, target).tolist() == [2, 1, 1]
