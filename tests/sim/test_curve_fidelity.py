"""The native engine puts red where real CybORG does, host by host (issue K).

tests/data/cyborg_curves.csv holds real-CybORG counts per panel (red agent x reference defender; the attacker
family's panels are in tests/data/cyborg_curves_family.csv): per step and host how many episodes red held the host,
and the late-window sums from which the per-episode late-window share's mean and variance follow exactly
(workflow_rl.curves). Here the native engine plays the same panels and every host x level x
panel late-window share must agree within the tolerance the stored counts imply: a two-sample z over episodes
below the Bonferroni critical value for the whole family at alpha = 0.01. Nothing is tuned: the critical value
depends only on how many comparisons the file allows, and the tolerance shrinks as the reference grows.
"""
import math
import statistics
from pathlib import Path

import pytest

from workflow_rl import curves as C
from workflow_rl.policies import POLICIES
from workflow_rl.sim import attackers

REFERENCE = Path(__file__).resolve().parent.parent / "data" / "cyborg_curves.csv"
FAMILY_REFERENCE = REFERENCE.with_name("cyborg_curves_family.csv")   # the attacker family (sim/family.py)
FAMILY_POLICIES = ("restore_compromised", "sleep")   # its panels: tests/data/cyborg_summary_family.md says why
NATIVE_EPISODES = 4096
FAMILY_ALPHA = 0.01


@pytest.fixture(scope="module", params=[REFERENCE, FAMILY_REFERENCE], ids=["cage2", "family"])
def rows(request):
    cyborg = C.read_counts_csv(request.param)
    native = {key: C.native_counts(key[0], key[1], NATIVE_EPISODES, seed=17) for key in cyborg}
    return C.compare(native, cyborg)


def test_reference_covers_every_panel():
    cyborg = C.read_counts_csv(REFERENCE)
    assert set(cyborg) == {(r, p) for r in ("B_lineAgent", "RedMeanderAgent") for p in POLICIES}
    assert all(c.episodes >= 2000 for c in cyborg.values())   # issue K: >= 2,000 CybORG episodes per panel
    # red's foothold: CybORG's session table always shows User0 privileged
    assert all((c.curve[:, :, 8] == c.episodes).all() for c in cyborg.values())


def test_family_reference_covers_its_panels():
    cyborg = C.read_counts_csv(FAMILY_REFERENCE)
    assert set(cyborg) == {(r, p) for r in attackers.family() for p in FAMILY_POLICIES}
    assert all(c.episodes >= 100 for c in cyborg.values())
    assert all((c.curve[:, :, 8] == c.episodes).all() for c in cyborg.values())   # User0, red's foothold


def test_native_late_window_shares_match_cyborg_host_by_host(rows):
    tested = [r for r in rows if not math.isnan(r.z)]
    assert len(tested) > 100
    z_crit = statistics.NormalDist().inv_cdf(1 - FAMILY_ALPHA / (2 * len(tested)))
    bad = [f"{r.red}/{r.policy} {r.level} {r.host}: native {r.native:.3f} vs CybORG {r.cyborg:.3f} "
           f"(n={r.cyborg_n}), z {r.z:+.1f}" for r in tested if abs(r.z) > z_crit]
    assert not bad, f"|z| > {z_crit:.2f} (Bonferroni, family alpha {FAMILY_ALPHA}):\n" + "\n".join(bad)


def test_no_host_breaks_issue_k_bar(rows):
    """Issue K's acceptance bar: no host x level x panel whose late-window share differs by more than 1.5 points at
    |z| > 3 (``compare`` flags such rows)."""
    flagged = [f"{r.red}/{r.policy} {r.level} {r.host}: {r.points:+.1f} pt, z {r.z:+.1f}" for r in rows if r.flagged]
    assert not flagged, "\n".join(flagged)
