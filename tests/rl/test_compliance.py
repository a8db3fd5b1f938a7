"""The compliance definition, case by case, and the alignment reward's telescoping."""
import numpy as np
import pytest
import torch

from workflow_rl.rl.compliance import ComplianceTracker, classify_fixes
from workflow_rl.sim import tables as T
from workflow_rl.workflow import Workflow

CF = Workflow.parse("critical_first")   # D, OS, E, OH, U


def _access(**hosts):
    a = torch.zeros((1, 13), dtype=torch.int8)
    a[0, T.USER0] = 2   # red's foothold is always there
    for name, level in hosts.items():
        a[0, T.HOSTS.index(name)] = level
    return a


def _classify(action, access, wf=CF):
    c, v, n = classify_fixes(torch.tensor([action]), access, torch.as_tensor(wf.rank))
    return ("compliant" if c.item() else "violation" if v.item() else "neutral" if n.item() else "not a fix")


def test_only_remove_and_restore_are_fixes():
    acc = _access(User1=1)
    for a in (0, 1, T.A_ANALYSE + 9, T.A_DECOY + 9, T.A_DECOY + 13 * 7 + 9):
        assert _classify(a, acc) == "not a fix"
    assert _classify(T.A_REMOVE + 9, acc) == "compliant"
    assert _classify(T.A_RESTORE + 9, acc) == "compliant"


def test_user0_foothold_is_never_compromised():
    acc = _access()   # only User0
    assert _classify(T.A_RESTORE + T.USER1, acc) == "neutral"
    assert _classify(T.A_RESTORE + T.USER0, acc) == "neutral"


def test_target_is_first_compromised_type_in_order():
    acc = _access(User1=2, Enterprise1=1)   # user and enterprise compromised; critical_first ranks E before U
    assert _classify(T.A_RESTORE + T.ENT1, acc) == "compliant"
    assert _classify(T.A_RESTORE + T.ENT0, acc) == "compliant"     # type-level: any enterprise host
    assert _classify(T.A_RESTORE + T.USER1, acc) == "violation"
    assert _classify(T.A_RESTORE + T.DEFENDER, acc) == "violation"
    rev = Workflow.parse("reverse")   # U, OH, E, OS, D
    assert _classify(T.A_RESTORE + T.USER1, acc, rev) == "compliant"
    assert _classify(T.A_REMOVE + T.ENT1, acc, rev) == "violation"


def test_several_compromised_types():
    acc = _access(Op_Server0=2, Enterprise2=2, User3=1, Op_Host1=1)
    assert _classify(T.A_RESTORE + T.OPS0, acc) == "compliant"      # D not compromised, OS is next
    for h in (T.ENT2, T.USER3, T.OPH1):
        assert _classify(T.A_RESTORE + h, acc) == "violation"


def test_neutral_fixes_enter_neither_side():
    tr = ComplianceTracker(1)
    rank = torch.as_tensor(CF.rank)
    tr.step(torch.tensor([T.A_RESTORE + T.USER1]), _access(User1=1), rank, 1.0)   # compliant
    tr.step(torch.tensor([T.A_RESTORE + T.USER2]), _access(), rank, 1.0)          # neutral
    tr.step(torch.tensor([T.A_RESTORE + T.USER2]), _access(Enterprise0=1), rank, 1.0)  # violation
    assert (tr.compliant.item(), tr.violations.item(), tr.neutral.item()) == (1, 1, 1)
    tr.clear(torch.tensor([True]))
    assert (tr.compliant.item(), tr.violations.item(), tr.neutral.item()) == (0, 0, 0)


@pytest.mark.parametrize("lam", [1.0, 30.0])
def test_alignment_reward_telescopes_to_lambda_times_final_compliance(lam):
    rng = np.random.default_rng(0)
    n, steps = 64, 100
    tr = ComplianceTracker(n)
    rank = torch.as_tensor(CF.rank)
    total = torch.zeros(n, dtype=torch.float64)
    for _ in range(steps):
        acc = torch.as_tensor(rng.integers(0, 3, (n, 13)), dtype=torch.int8)
        acc[rng.random(n) < 0.3] = 0
        a = torch.as_tensor(rng.choice([0, T.A_REMOVE + 3, T.A_RESTORE + 9, T.A_RESTORE + 1, T.A_RESTORE + 7], n))
        r, _ = tr.step(a, acc, rank, lam)
        total += r.double()
    c, v = tr.compliant, tr.violations
    final = torch.where(c + v > 0, c / (c + v).clamp(min=1), torch.zeros_like(c))
    assert torch.allclose(total, lam * final, atol=1e-4)
    assert (final > 0).any() and (final < 1).any()
