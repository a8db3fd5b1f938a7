"""The per-step fidelity tool (issue K): counts, statistics, resumable shards. The CybORG side is faked here (a
deterministic access generator), so these tests are fast; tests/sim/test_curve_fidelity.py holds the native engine
to the stored real-CybORG curves and tests/envs/test_cyborg.py runs a real CybORG shard."""
import math
import statistics

import numpy as np
import pytest

from workflow_rl import curves as C
from workflow_rl.multitest import holm
from workflow_rl.sim import tables as T
from helpers import REPO


def _random_access(seed, episodes=37):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 3, size=(episodes, C.HORIZON, T.N_HOSTS)).astype(np.int8)


def test_late_window_mean_and_variance_are_exact_from_the_stored_sums():
    access = _random_access(1)
    counts = C.PanelCounts.from_access("B_lineAgent", "sleep", access)
    for li, level in enumerate((1, 2)):
        share = (access[:, 50:100] >= level).mean(axis=1)          # (episodes, 13) per-episode late share
        mean, var = counts.late(li)
        np.testing.assert_allclose(mean, share.mean(axis=0), rtol=1e-12)
        np.testing.assert_allclose(var, share.var(axis=0, ddof=1), rtol=1e-9, atol=1e-15)
        np.testing.assert_array_equal(counts.curve[li], (access >= level).sum(axis=0))


def test_counts_merge_like_the_concatenated_episodes_and_survive_the_csv(tmp_path):
    a, b = _random_access(2, 11), _random_access(3, 6)
    whole = C.PanelCounts.from_access("RedMeanderAgent", "random", np.concatenate([a, b]))
    merged = C.PanelCounts.from_access("RedMeanderAgent", "random", a) + \
        C.PanelCounts.from_access("RedMeanderAgent", "random", b)
    other = C.PanelCounts.from_access("B_lineAgent", "sleep", a)
    C.write_counts_csv([merged, other], tmp_path / "c.csv")
    back = C.read_counts_csv(tmp_path / "c.csv")
    assert set(back) == {("RedMeanderAgent", "random"), ("B_lineAgent", "sleep")}
    for got in (merged, back[("RedMeanderAgent", "random")]):
        assert got.episodes == 17
        for name in ("curve", "late_sum", "late_sq"):
            np.testing.assert_array_equal(getattr(got, name), getattr(whole, name))
    with pytest.raises(ValueError, match="cannot merge"):
        merged + other


def test_pooled_two_sample_z_matches_the_direct_computation():
    rng = np.random.default_rng(4)
    x, y = rng.random(50), rng.random(80) * 0.8
    se, z, p = C.two_sample_z(x.sum(), (x * x).sum(), len(x), y.sum(), (y * y).sum(), len(y))
    pooled = np.concatenate([x, y]).var(ddof=1)
    assert se == pytest.approx(math.sqrt(pooled * (1 / 50 + 1 / 80)))
    assert z == pytest.approx((x.mean() - y.mean()) / se)
    assert p == pytest.approx(2 * (1 - statistics.NormalDist().cdf(abs(z))))
    _, z0, p0 = C.two_sample_z(5.0, 5.0, 5, 7.0, 7.0, 7)   # both samples all ones: no test
    assert math.isnan(z0) and math.isnan(p0)


def test_holm_rejects_step_down_and_ignores_non_tests():
    # m = 4 tests: 0.001 <= 0.05/4, 0.013 <= 0.05/3, 0.04 > 0.05/2 stops; nan is not a test
    assert holm([0.04, 0.001, float("nan"), 0.013, 0.9], 0.05, count_untested=False) == [False, True, False, True,
                                                                                         False]
    # counted in the family (the search's rule), the untested one makes 0.013 > 0.05/4 stop the procedure
    assert holm([0.04, 0.001, None, 0.013, 0.9], 0.05) == [False, True, False, False, False]
    # Holm rejects the second where Bonferroni (0.05/4 = 0.0125) would not
    assert holm([0.001, 0.016, 0.5, 0.6], 0.05) == [True, True, False, False]


def test_compare_flags_a_real_shift_and_not_a_resample():
    base = _random_access(5, 400)
    same = C.PanelCounts.from_access("B_lineAgent", "sleep", base[:200])
    again = C.PanelCounts.from_access("B_lineAgent", "sleep", base[200:])
    shifted_access = base[200:].copy()
    shifted_access[:, :, T.USER1] = np.minimum(shifted_access[:, :, T.USER1], 1)   # privileged never on User1
    shifted = C.PanelCounts.from_access("B_lineAgent", "sleep", shifted_access)
    key = ("B_lineAgent", "sleep")
    assert not any(r.holm for r in C.compare({key: same}, {key: again}))
    rows = C.compare({key: same}, {key: shifted})
    hits = [(r.level, r.host) for r in rows if r.holm]
    assert hits == [("privileged", "User1")]
    assert [r for r in rows if r.host == "User1" and r.level == "privileged"][0].flagged
    assert "User1" in C.markdown(rows)


def test_shards_are_planned_chunk_major_and_cover_every_episode_once():
    jobs = C.plan_shards(["B_lineAgent", "RedMeanderAgent"], ["sleep", "random"], 120, 50, seed=9)
    assert [j[3] for j in jobs[:4]] == [0, 0, 0, 0] and jobs[4][3] == 50
    for red in ("B_lineAgent", "RedMeanderAgent"):
        for pol in ("sleep", "random"):
            covered = [e for j in jobs if j[:2] == (red, pol) for e in range(j[3], j[3] + j[4])]
            assert covered == list(range(120))


def _fake_access(red, policy, seed, first, n, scenario=None):
    """Deterministic stand-in for a CybORG shard: a function of (seed, episode) only, like the real one."""
    return np.stack([_random_access((seed, e, len(policy)), 1)[0] for e in range(first, first + n)])


def test_collect_resumes_from_finished_shards_and_refuses_another_seed(tmp_path, monkeypatch):
    monkeypatch.setattr(C, "cyborg_access", _fake_access)
    args = (["B_lineAgent"], ["sleep", "random"], 30)
    assert C.collect_cyborg(*args, tmp_path, workers=1, seed=3, shard_episodes=10, progress=None) == 6
    first = C.load_shards(tmp_path / "shards", 3)
    victim = C.shard_path(tmp_path / "shards", "B_lineAgent", "random", 10, 10)
    victim.unlink()
    (tmp_path / "shards" / (victim.name + ".tmp")).write_bytes(b"half a shard from a killed run")
    assert C.collect_cyborg(*args, tmp_path, workers=1, seed=3, shard_episodes=10, progress=None) == 1
    again = C.load_shards(tmp_path / "shards", 3)
    for key in first:
        assert again[key].episodes == 30
        np.testing.assert_array_equal(again[key].curve, first[key].curve)
    with pytest.raises(ValueError, match="--seed 3"):
        C.collect_cyborg(*args, tmp_path, workers=1, seed=4, shard_episodes=10, progress=None)
    C.write_shard(C.shard_path(tmp_path / "shards", "B_lineAgent", "sleep", 5, 10), _fake_access("", "", 3, 5, 10), 3)
    with pytest.raises(ValueError, match="overlaps"):   # a second --shard-episodes would count episodes twice
        C.load_shards(tmp_path / "shards", 3)


def test_native_counts_are_reproducible_and_user0_is_always_held():
    a = C.native_counts("B_lineAgent", "restore_compromised", 64, seed=2)
    b = C.native_counts("B_lineAgent", "restore_compromised", 64, seed=2)
    np.testing.assert_array_equal(a.curve, b.curve)
    assert (a.curve[:, :, T.USER0] == 64).all()
    assert (a.curve[:, :, T.DEFENDER] == 0).all()
    assert a.curve[0, 99].sum() > 64          # red holds more than its foothold at the end


@pytest.mark.slow   # two fresh Pythons importing torch: ~5 s
def test_device_entry_refuses_bad_input_in_one_line():
    """``python3 -m workflow_rl.cli curves`` (the device entry of benchmarks/device/device_all.sh: a fresh Python from
    the checkout) refuses bad input in one line."""
    import subprocess
    import sys

    root = REPO
    for args, match in ((["--workers", "0"], "--workers must be >= 1"), (["--episodes", "x"], "invalid int")):
        r = subprocess.run([sys.executable, "-m", "workflow_rl.cli", "curves", *args], cwd=root, capture_output=True,
                           text=True, timeout=120)
        lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
        assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("error:") and match in lines[0], r.stderr
