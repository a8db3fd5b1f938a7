"""Red-agent mixtures: one red agent per env episode, drawn from the env's own stream (issue I)."""
import numpy as np
import pytest

from workflow_rl import make_vector_env
from workflow_rl.envs.names import DEFAULT_MIX, is_mixture, parse_red_agent, red_weights
from workflow_rl.sim import tables as T


@pytest.mark.parametrize("name,canonical", [
    ("mix", "B_lineAgent:0.5,RedMeanderAgent:0.5"),
    ("MIX", "B_lineAgent:0.5,RedMeanderAgent:0.5"),
    ("B_lineAgent:0.5,RedMeanderAgent:0.5", "B_lineAgent:0.5,RedMeanderAgent:0.5"),
    ("meander:3, bline:1", "B_lineAgent:0.25,RedMeanderAgent:0.75"),
    ("bline:1,meander:2", "B_lineAgent:0.333333,RedMeanderAgent:0.666667"),
    ("sleep:1,bline:1,meander:2", "B_lineAgent:0.25,RedMeanderAgent:0.5,SleepAgent:0.25"),
    ("bline:2,meander:0", "B_lineAgent"),
    ("Meander", "RedMeanderAgent"),
])
def test_parse_gives_one_canonical_spelling(name, canonical):
    assert parse_red_agent(name) == canonical
    assert parse_red_agent(canonical) == canonical          # what configs and checkpoints store parses to itself
    assert is_mixture(name) == ("," in canonical)


def test_weights_are_normalised_and_the_default_mixture_is_declared_once():
    assert red_weights("mix") == DEFAULT_MIX
    w = red_weights("bline:1,meander:3")
    assert w == {"B_lineAgent": 0.25, "RedMeanderAgent": 0.75}


@pytest.mark.parametrize("name,match", [
    ("nobody", "unknown red agent 'nobody'"),
    ("bline:0.5,nobody:0.5", "unknown red agent 'nobody'"),
    ("bline:x,meander:1", "is not a number"),
    ("bline:-1,meander:1", ">= 0"),
    ("bline:nan,meander:1", "finite"),
    ("bline:inf,meander:1", "finite"),
    ("bline:0,meander:0", "every weight is 0"),
    ("bline:1,b_line:1", "twice"),
    ("bline,meander:1", "has no weight"),
])
def test_bad_mixtures_name_the_fix(name, match):
    with pytest.raises(ValueError, match=match):
        parse_red_agent(name)
    with pytest.raises(ValueError, match=match):
        make_vector_env(2, name)


def _kinds_and_returns(red, n, seed, episodes, length=20):
    """Per episode and env: the red kind the engine drew and the blue return under Sleep."""
    env = make_vector_env(n, red, seed=seed, episode_length=length)
    env.reset()
    kinds, returns = [], []
    for _ in range(episodes):
        kinds.append(env.state.red_kind.copy())
        total = np.zeros(n)
        for _ in range(length):
            _, r, *_ = env.step(np.zeros(n, np.int64))
            total += r
        returns.append(total)
    return np.array(kinds), np.array(returns)


def test_mixture_draws_per_episode_with_the_given_odds():
    kinds, _ = _kinds_and_returns("bline:1,meander:3", 2000, seed=3, episodes=5)
    assert set(np.unique(kinds)) == {T.RED_BLINE, T.RED_MEANDER}
    p = float(np.mean(kinds == T.RED_BLINE))
    assert abs(p - 0.25) < 5 * np.sqrt(0.25 * 0.75 / kinds.size)
    assert (kinds[0] != kinds[1]).any()                       # redrawn at every episode, not once per env


def test_mixture_episodes_are_exactly_the_fixed_agents_episodes():
    """Env i's episode against the red agent drawn for it is the very episode a fixed-agent env with the same seed
    plays: the draw uses its own slot of the counter-based stream and nothing else changes."""
    kinds, mixed = _kinds_and_returns("mix", 64, seed=9, episodes=3)
    _, bline = _kinds_and_returns("bline", 64, seed=9, episodes=3)
    _, meander = _kinds_and_returns("meander", 64, seed=9, episodes=3)
    expected = np.where(kinds == T.RED_BLINE, bline, meander)
    assert np.array_equal(mixed, expected)
    assert not np.array_equal(bline, meander)


def test_mixture_draws_depend_only_on_seed_and_env_index():
    small, _ = _kinds_and_returns("mix", 10, seed=4, episodes=4)
    big, _ = _kinds_and_returns("mix", 700, seed=4, episodes=4)   # 700: the parallel kernel
    again, _ = _kinds_and_returns("mix", 700, seed=4, episodes=4)
    other, _ = _kinds_and_returns("mix", 700, seed=5, episodes=4)
    assert np.array_equal(small, big[:, :10]) and np.array_equal(big, again)
    assert not np.array_equal(big, other)


@pytest.mark.parametrize("red,kind", [("bline", T.RED_BLINE), ("meander", T.RED_MEANDER), ("sleep", T.RED_SLEEP)])
def test_a_fixed_agent_is_drawn_every_episode(red, kind):
    kinds, _ = _kinds_and_returns(red, 300, seed=1, episodes=3, length=5)
    assert (kinds == kind).all()
