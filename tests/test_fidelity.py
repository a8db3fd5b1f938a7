"""The native engine reproduces every cell of the real-CybORG reference (6 policies x 2 red agents x 30/50/100)."""
import csv
import pathlib
from collections import defaultdict

import numpy as np
import pytest
from helpers import run_policy

from workflow_rl.policies import POLICIES
from workflow_rl.sim import tables as T

DATA = pathlib.Path(__file__).parent / "data" / "cyborg_returns.csv"
N_ENVS = 8192


def _reference():
    cells = defaultdict(list)
    with open(DATA) as f:
        for r in csv.DictReader(f):
            cells[(r["red"], r["policy"], int(r["length"]))].append(float(r["total_reward"]))
    return {k: np.array(v) for k, v in cells.items()}


REF = _reference()


def test_reference_data_is_complete():
    assert len(REF) == 2 * 6 * 3
    assert all(len(v) == 400 for v in REF.values())


@pytest.mark.parametrize("red", ["B_lineAgent", "RedMeanderAgent"])
@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_native_matches_cyborg_reference(red, policy):
    returns = run_policy(POLICIES[policy], T.RED_AGENT_NAMES[red], N_ENVS, seed=11)
    for length in (30, 50, 100):
        ours, ref = returns[length], REF[(red, policy, length)]
        se_diff = np.sqrt(ours.var(ddof=1) / len(ours) + ref.var(ddof=1) / len(ref))
        tol = max(0.02 * abs(ref.mean()), 3 * se_diff)
        assert abs(ours.mean() - ref.mean()) <= tol, (
            f"{red}/{policy}/{length}: native {ours.mean():.2f} vs CybORG {ref.mean():.2f} (tolerance {tol:.2f})")
