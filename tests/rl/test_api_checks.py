"""The Python API checks each argument at the call, in its numpy and gymnasium spellings too: one clear error
naming the fix, never a torch error deep inside or a silently wrong value (issue Z's battery, Python API class)."""
import gymnasium as gym
import numpy as np
import pytest
import torch

from workflow_rl import make_vector_env
from workflow_rl.rl.cage2 import BlueAgent
from workflow_rl.rl.planning.planner import make_act


@pytest.fixture(scope="module")
def agent():
    return BlueAgent()


def test_a_gymnasium_action_space_of_another_size_is_refused(agent):
    """gymnasium's ``Discrete(10).n`` is a numpy integer: it was skipped, and 145-action choices were played."""
    with pytest.raises(ValueError, match="the action space has 10"):
        agent.get_action(np.zeros(52), gym.spaces.Discrete(10))
    assert 0 <= agent.get_action(np.zeros(52), gym.spaces.Discrete(145)) < 145


def test_a_batch_of_observations_is_refused_naming_make_act(agent):
    with pytest.raises(ValueError, match="plays one env.*shape \\(2, 52\\).*make_act"):
        agent.get_action(np.zeros((2, 52)))


@pytest.mark.parametrize("encodings, says", [
    (torch.zeros(3, 7), "must be \\(N, 25\\)"),
    (torch.zeros(25), "must be \\(N, 25\\)"),
    (torch.full((2, 25), float("nan")), "NaN or inf"),
])
def test_bad_encodings_are_refused_at_the_call(encodings, says):
    with pytest.raises(ValueError, match=says):
        make_act(encodings=encodings)


def test_encodings_as_numpy_act_per_env():
    act = make_act(encodings=np.zeros((2, 25), np.float32))
    assert tuple(act(np.zeros((2, 52)), 0).shape) == (2,)


def test_official_bugs_must_be_a_bool():
    """``official_bugs="no"`` meant True."""
    with pytest.raises(ValueError, match="official_bugs must be True or False"):
        make_act(official_bugs="no")


def test_reset_takes_gymnasium_s_list_of_one_seed_per_env():
    """Env i of a batch reset with ``seed=[s0, s1, ...]`` plays what a one-env batch reset with ``seed=s_i`` plays
    (it was a TypeError from ``int()``)."""
    env, one = make_vector_env(3, "bline"), make_vector_env(1, "bline")
    env.reset(seed=[1, 2, 3])
    one.reset(seed=2)
    for _ in range(30):
        obs, reward, *_ = env.step(np.zeros(3, np.int64))
        obs1, reward1, *_ = one.step(np.zeros(1, np.int64))
        assert np.array_equal(obs[1], obs1[0]) and reward[1] == reward1[0]
    for bad, says in (([1, 2], "one seed per env \\(3\\), got 2"), ([1, -1, 2], "seed\\[1\\]"),
                      (["a", 1, 2], "seed\\[0\\] must be an integer"), (1.5, "seed must be an integer")):
        with pytest.raises(ValueError, match=says):
            env.reset(seed=bad)
    assert env.reset(seed=np.int64(5))[0].shape == (3, 52)
