import itertools

import numpy as np
import pytest

from workflow_rl.workflow import NAMED, Workflow, all_workflows, kendall, parse_workflow_arg


def test_parse_forms_agree():
    a = Workflow.parse("critical_first")
    assert a == Workflow.parse("D,OS,E,OH,U") == Workflow.parse("defender > op_server > enterprise > op_host > user")
    assert a == Workflow.parse(["d", "os", "e", "oh", "u"]) == Workflow.parse("D OS E OH U")
    assert a.names == ["defender", "op_server", "enterprise", "op_host", "user"]
    assert a.codes == "D,OS,E,OH,U"


def test_named_orders_match_origin():
    assert Workflow.parse("reverse").codes == "U,OH,E,OS,D"
    assert Workflow.parse("balanced").codes == "D,E,OS,U,OH"
    assert len({Workflow.parse(n) for n in NAMED}) == 6


@pytest.mark.parametrize("bad,match", [
    ("D,E,OS,OH", "missing: user"),
    ("D,E,OS,OH,U,U", "repeated: user"),
    ("D,E,OS,OH,X", "unknown unit type 'X'"),
    ("", "exactly once"),
    ("D,D,OS,OH,U", "repeated: defender"),
])
def test_malformed_workflows(bad, match):
    with pytest.raises(ValueError, match=match):
        Workflow.parse(bad)


def test_none_means_plain_ppo():
    assert parse_workflow_arg("none") is None and parse_workflow_arg("None") is None


def test_all_120_unique_with_consistent_index():
    ws = all_workflows()
    assert len(ws) == 120 and len(set(ws)) == 120
    assert all(w.index == i for i, w in enumerate(ws))
    enc = np.stack([w.encode() for w in ws])
    assert enc.shape == (120, 25) and len({e.tobytes() for e in enc}) == 120


def test_encoding_is_rank_times_5_plus_type():
    w = Workflow.parse("U,D,E,OS,OH")   # user(4) first, defender(0) second, ...
    x = w.encode()
    assert x.sum() == 5 and x[0 * 5 + 4] == 1 and x[1 * 5 + 0] == 1 and x[4 * 5 + 3] == 1


def test_kendall_distance_properties():
    ws = all_workflows()
    a = Workflow.parse("D,E,OS,OH,U")
    assert kendall(a, a) == 0.0
    assert kendall(a, Workflow.parse("U,OH,OS,E,D")) == 1.0
    assert kendall(a, Workflow.parse("E,D,OS,OH,U")) == 0.1   # one adjacent swap
    rng = np.random.default_rng(0)
    for i, j, k in rng.integers(0, 120, (200, 3)):
        x, y, z = ws[i], ws[j], ws[k]
        assert kendall(x, y) == kendall(y, x)
        assert kendall(x, z) <= kendall(x, y) + kendall(y, z) + 1e-12


def test_kendall_counts_discordant_pairs():
    for a, b in itertools.islice(itertools.combinations(all_workflows(), 2), 300):
        ra, rb = a.rank, b.rank
        disc = sum((ra[i] < ra[j]) != (rb[i] < rb[j]) for i, j in itertools.combinations(range(5), 2))
        assert kendall(a, b) == disc / 10
