"""Step-level parity (issue K): every real-CybORG step, from CybORG's own state, is an outcome the native rules can
produce. 4,096 native copies per step sample the native transition from the injected state; a CybORG outcome none of
them reproduces (access, red memory, observation and reward together) is a rule the native engine lacks. The seeds
are fixed, so the test is deterministic; an event of native probability p is missed by all copies with probability
(1 - p)^4096, below 2% for every p >= 0.001."""
import pytest
from cyborg_lockstep import native_probabilities

from workflow_rl.policies import POLICIES

pytestmark = pytest.mark.cyborg


@pytest.mark.parametrize("red", ["B_lineAgent", "RedMeanderAgent"])
@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_every_cyborg_step_is_a_native_outcome(red, policy):
    from workflow_rl.envs.cyborg import CybORGEnv

    env = CybORGEnv(red, 10_000)
    steps = native_probabilities(env, POLICIES[policy], episodes=3, seed=4242)
    impossible = [(e, t, a) for e, t, a, p in steps if p == 0.0]
    assert len(steps) == 300
    assert not impossible, f"CybORG steps no native copy reproduces (episode, step, blue action): {impossible}"
