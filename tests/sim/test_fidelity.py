"""The native engine reproduces every cell of the real-CybORG references: 6 policies x 2 red agents (B_line,
Meander) x 30/50/100 steps, and the same for each of the attacker family's six (workflow_rl/sim/family.py)."""
import pytest
from helpers import FAMILY_REFERENCE_CSV, load_reference, run_policy, within_reference

from workflow_rl.policies import POLICIES
from workflow_rl.sim import attackers

N_ENVS = 8192
REF = load_reference()
FAMILY = attackers.family()
FAMILY_EPISODES = 100   # CybORG episodes per family cell, at least (tests/data/cyborg_summary_family.md)


@pytest.fixture(scope="module")
def family_ref():
    return load_reference(FAMILY_REFERENCE_CSV)


def test_reference_data_is_complete():
    assert len(REF) == 2 * 6 * 3
    assert all(len(v) == 400 for v in REF.values())


def test_family_reference_data_is_complete(family_ref):
    assert set(family_ref) == {(r, p, L) for r in FAMILY for p in POLICIES for L in (30, 50, 100)}
    assert all(len(v) >= FAMILY_EPISODES for v in family_ref.values())


def _check(red, policy, ref):
    returns = run_policy(POLICIES[policy], attackers.kind_of(red), N_ENVS, seed=11)
    for length in (30, 50, 100):
        ours, cyborg = returns[length], ref[(red, policy, length)]
        ok, tol = within_reference(ours, cyborg)
        assert ok, (
            f"{red}/{policy}/{length}: native {ours.mean():.2f} vs CybORG {cyborg.mean():.2f} (tolerance {tol:.2f})")


@pytest.mark.parametrize("red", ["B_lineAgent", "RedMeanderAgent"])
@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_native_matches_cyborg_reference(red, policy):
    _check(red, policy, REF)


@pytest.mark.parametrize("red", FAMILY)
@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_native_matches_cyborg_reference_for_the_attacker_family(red, policy, family_ref):
    """An attacker without a held reference is not done (issue Y): each of the family, every cell."""
    _check(red, policy, family_ref)
