"""The public contract: make_vector_env returns a conforming gymnasium VectorEnv; bad input -> one ValueError."""
import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from gymnasium.vector import AutoresetMode

import workflow_rl
from workflow_rl import make_vector_env


def _rollout(env, steps, seed=0, reset_seed=None):
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=reset_seed)
    out = [obs.copy()]
    rewards = []
    for _ in range(steps):
        obs, r, *_ = env.step(rng.integers(0, 145, env.num_envs))
        out.append(obs.copy())
        rewards.append(r.copy())
    return np.stack(out), np.stack(rewards)


def test_spaces_shapes_and_dtypes():
    env = make_vector_env(16, "B_lineAgent", seed=1)
    assert isinstance(env, gym.vector.VectorEnv)
    assert env.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    assert env.single_observation_space.shape == (52,) and env.single_action_space.n == 145
    obs, info = env.reset()
    assert obs.shape == (16, 52) and obs.dtype == np.float32 and not obs.any()
    assert info["red_access"].shape == (16, 13)
    obs, r, term, trunc, info = env.step(np.zeros(16, np.int64))
    assert obs.dtype == np.float32 and r.dtype == np.float32 and r.shape == (16,)
    assert term.dtype == np.bool_ and trunc.dtype == np.bool_
    assert env.observation_space.contains(obs)
    assert set(np.unique(obs)) <= {0.0, 1.0}


def test_truncation_at_episode_length_with_same_step_reset():
    env = make_vector_env(4, "meander", episode_length=30, seed=2)
    env.reset()
    for t in range(30):
        obs, r, term, trunc, info = env.step(np.zeros(4, np.int64))
        assert not term.any()
        assert trunc.all() == (t == 29)
    assert "final_obs" in info and info["_final_obs"].all()
    assert info["final_obs"].any()       # the last observation of the finished episode
    assert not obs.any()                 # the first observation of the next one
    assert (info["final_info"]["red_access"] > 0).sum() > (info["red_access"] > 0).sum()


@pytest.mark.parametrize("red", ["B_lineAgent", "RedMeanderAgent"])
def test_same_seed_identical_and_different_seeds_diverge(red):
    a = _rollout(make_vector_env(32, red, seed=5), 120)
    b = _rollout(make_vector_env(32, red, seed=5), 120)
    c = _rollout(make_vector_env(32, red, seed=6), 120)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not np.array_equal(a[1], c[1])


def test_env_trajectory_independent_of_batch_size_and_threads():
    """Env i's stream depends only on (seed, i): a batch of 1000 (threaded kernel) and of 8 (serial) agree."""
    rng = np.random.default_rng(0)
    actions = rng.integers(0, 145, (100, 1000))
    big, small = make_vector_env(1000, "meander", seed=9), make_vector_env(8, "meander", seed=9)
    big.reset(), small.reset()
    for t in range(100):
        ob, rb, *_ = big.step(actions[t])
        os_, rs, *_ = small.step(actions[t, :8])
        assert np.array_equal(ob[:8], os_) and np.array_equal(rb[:8], rs)


def test_reset_with_seed_replays():
    env = make_vector_env(8, "bline", seed=1)
    a = _rollout(env, 40)
    b = _rollout(env, 40)                    # reset() without a seed: the streams go on
    c = _rollout(env, 40, reset_seed=1)      # reset(seed=1): back to the start
    assert np.array_equal(a[1], c[1])
    assert not np.array_equal(a[1], b[1])


def test_red_agent_names_and_aliases():
    for name in ["B_lineAgent", "b_line", "BLINE", "bline", "RedMeanderAgent", "Meander", "sleep", "SleepAgent"]:
        make_vector_env(1, name)
    env = make_vector_env(64, "sleep", seed=0)
    env.reset()
    for _ in range(100):
        _, r, *_ = env.step(np.zeros(64, np.int64))
        assert not r.any()


def test_info_red_access_matches_reward():
    """A host worth confidentiality counts in the reward exactly when info says red is privileged there."""
    env = make_vector_env(256, "bline", seed=4)
    env.reset()
    conf = np.array([0.1, 1, 1, 1, 0.1, 0.1, 0.1, 1, 0, 0.1, 0.1, 0.1, 0.1])
    for _ in range(60):
        _, r, *_, info = env.step(np.zeros(256, np.int64))
        priv = info["red_access"] == 2
        expected = -(priv * conf).sum(1)
        gap = r - expected
        assert np.all((np.abs(gap) < 1e-4) | (np.abs(gap + 10) < 1e-4))   # or the OTService -10 on top


def test_tensor_path_shares_buffers():
    torch = pytest.importorskip("torch")
    env = make_vector_env(64, "bline", seed=3, copy=False)
    env.reset()
    obs, rew, trunc, access = env.step_tensor(torch.zeros(64, dtype=torch.int64))
    assert obs.shape == (64, 52) and obs.dtype == torch.float32 and access.shape == (64, 13)
    assert np.shares_memory(obs.numpy(), env.buffers.obs)


def test_check_env_on_single_env_view():
    env = gym.make("workflow_rl/CAGE2-v0", red_agent="meander")
    check_env(env.unwrapped, skip_render_check=True)
    obs, _ = env.reset(seed=0)
    steps = 0
    while True:
        obs, r, term, trunc, info = env.step(env.action_space.sample())
        steps += 1
        if trunc:
            break
    assert steps == 100


@pytest.mark.parametrize("kwargs,match", [
    (dict(num_envs=0), "num_envs"),
    (dict(num_envs=4, red_agent="Greedy"), "unknown red agent"),
    (dict(num_envs=4, engine="gpu-sim"), "unknown engine"),
    (dict(num_envs=4, episode_length=0), "episode_length"),
    (dict(num_envs=4, device="tpu"), "unknown device"),
    (dict(num_envs=4, frobnicate=True), "unknown option"),
    (dict(num_envs=4, engine="cyborg", vectorization="threads"), "vectorization|CybORG|cyborg"),
])
def test_bad_construction_inputs(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_vector_env(**kwargs)


@pytest.mark.parametrize("actions,match", [
    (np.zeros(3, np.int64), "shape"),
    (np.zeros(4, np.float32), "integers"),
    (np.full(4, 145), "0..144"),
    (np.full(4, -1), "0..144"),
])
def test_bad_actions(actions, match):
    env = make_vector_env(4, "bline", seed=0)
    env.reset()
    with pytest.raises(ValueError, match=match):
        env.step(actions)


def test_step_before_reset_is_an_error():
    env = make_vector_env(2)
    with pytest.raises(RuntimeError, match="reset"):
        env.step(np.zeros(2, np.int64))


def test_package_exports():
    assert set(workflow_rl.RED_AGENTS) == {"B_lineAgent", "RedMeanderAgent", "SleepAgent", "DelayedB_line",
                                           "RandomRed", "EnterpriseRaider", "RestoreChaser", "UserHopper",
                                           "ImpactRush"}
