"""The compliance definition, case by case, and the alignment reward's two forms: the ratio form's telescoping
(and its values, unchanged), the violations form's per-fix penalty."""
import hashlib

import numpy as np
import pytest
import torch

from workflow_rl.rl.compliance import VIOLATION_SCALE, ComplianceTracker, classify_fixes
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


def _random_fixes(tracker, rng, lam):
    """Step ``tracker`` through 100 random states and fix actions drawn from ``rng``; the per-step rewards."""
    n = tracker.compliant.shape[0]
    rewards = []
    for _ in range(100):
        acc = torch.as_tensor(rng.integers(0, 3, (n, 13)), dtype=torch.int8)
        acc[rng.random(n) < 0.3] = 0
        a = torch.as_tensor(rng.choice([0, T.A_REMOVE + 3, T.A_RESTORE + 9, T.A_RESTORE + 1, T.A_RESTORE + 7], n))
        rewards.append(tracker.step(a, acc, torch.as_tensor(CF.rank), lam)[0])
    return rewards


def test_default_ratio_form_is_bit_equal_to_before():
    """The default form's per-step rewards (float32 bytes, per-env lambdas) are those of the code before the form
    became a setting (digest taken at commit 8dd1720 with this very sequence)."""
    rng = np.random.default_rng(7)
    lam = torch.as_tensor(rng.choice([0.0, 5.0, 30.0], 64))
    tr = ComplianceTracker(64)
    assert tr.form == "ratio"
    h = hashlib.sha256()
    for r in _random_fixes(tr, rng, lam):
        h.update(r.numpy().tobytes())
    assert h.hexdigest() == "16e19f307ad14ee501493aa39f6815eb540e138a951732c3488abbb05367aaba"
    assert (tr.compliant.sum().item(), tr.violations.sum().item()) == (402, 3157)


DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.mark.parametrize("device", DEVICES)
def test_violations_form_penalises_violations_only_and_pays_nothing_for_dilution(device):
    """A handcrafted episode: compliant, violation, then three compliant fixes that dilute it, a neutral fix and a
    second violation. The ratio form pays lambda for the first fix and again for each diluting one; the violations
    form pays -lambda/100 for each violation and exactly 0 for everything else. Counts are the same."""
    e, u = _access(Enterprise1=1), _access(User1=1, Enterprise1=1)   # critical_first: E before U
    seq = [(T.A_RESTORE + T.ENT1, e, "c"), (T.A_RESTORE + T.USER1, u, "v"), (T.A_REMOVE + T.ENT1, u, "c"),
           (T.A_REMOVE + T.ENT0, u, "c"), (T.A_RESTORE + T.ENT1, u, "c"), (T.A_RESTORE + T.USER2, _access(), "n"),
           (T.A_REMOVE + T.USER1, u, "v"), (0, u, "-")]
    lam = torch.tensor([10.0, 30.0], dtype=torch.float64, device=device)   # per env, as in a batch
    rank = torch.as_tensor(CF.rank, device=device)
    forms = {f: ComplianceTracker(2, device, f) for f in ("ratio", "violations")}
    got = {f: [] for f in forms}
    for a, acc, _ in seq:
        for f, tr in forms.items():
            got[f].append(tr.step(torch.tensor([a, a], device=device), acc.repeat(2, 1).to(device), rank, lam)[0])
    viol = torch.stack(got["violations"]).cpu()
    expect = torch.tensor([[-10.0, -30.0] if k == "v" else [0.0, 0.0] for _, _, k in seq]) / VIOLATION_SCALE
    assert torch.equal(viol, expect.to(torch.float32))
    assert viol[2:5].eq(0).all() and torch.stack(got["ratio"])[2:5, 0].cpu().gt(0).all()   # dilution: 0 vs pays
    assert torch.stack(got["ratio"])[0, 0].item() == 10.0   # the ratio form's first compliant fix: lambda from 0
    for k in ("compliant", "violations", "neutral"):
        assert torch.equal(getattr(forms["ratio"], k), getattr(forms["violations"], k))
    assert forms["violations"].compliant.tolist() == [4, 4] and forms["violations"].violations.tolist() == [2, 2]


def test_violations_form_sums_to_minus_lambda_violations_over_scale():
    lam = torch.full((64,), 10.0, dtype=torch.float64)
    tr = ComplianceTracker(64, form="violations")
    total = torch.stack(_random_fixes(tr, np.random.default_rng(0), lam)).double().sum(0)
    assert torch.allclose(total, -lam * tr.violations / VIOLATION_SCALE, atol=1e-4) and (total < 0).any()


def test_unknown_form_is_refused():
    with pytest.raises(ValueError, match="unknown alignment reward 'sum': use one of ratio, violations"):
        ComplianceTracker(1, form="sum")
