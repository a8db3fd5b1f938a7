"""The native engine reproduces every cell of the real-CybORG reference (6 policies x 2 red agents x 30/50/100)."""
import pytest
from helpers import load_reference, run_policy, within_reference

from workflow_rl.policies import POLICIES
from workflow_rl.sim import attackers

N_ENVS = 8192
REF = load_reference()


def test_reference_data_is_complete():
    assert len(REF) == 2 * 6 * 3
    assert all(len(v) == 400 for v in REF.values())


@pytest.mark.parametrize("red", ["B_lineAgent", "RedMeanderAgent"])
@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_native_matches_cyborg_reference(red, policy):
    returns = run_policy(POLICIES[policy], attackers.kind_of(red), N_ENVS, seed=11)
    for length in (30, 50, 100):
        ours, ref = returns[length], REF[(red, policy, length)]
        ok, tol = within_reference(ours, ref)
        assert ok, (
            f"{red}/{policy}/{length}: native {ours.mean():.2f} vs CybORG {ref.mean():.2f} (tolerance {tol:.2f})")
