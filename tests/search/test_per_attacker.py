"""search.per_attacker: the tests behind "does the best workflow depend on the attacker" decide what they should
on screens built to have (or not have) the property, and a collected folder reads back what a search wrote."""
import csv
import json
import math

import pytest

from workflow_rl.search import per_attacker as pa
from workflow_rl.workflow import all_workflows

CODES = [w.codes for w in all_workflows()]


def screen(red, mean, ci=0.3, followed=lambda i: i < 60):
    """120 workflows: mean(i) the return of the i-th, followed(i) whether it is followable."""
    return pa.Screen(red, {w: float(mean(i)) for i, w in enumerate(CODES)}, {w: ci for w in CODES},
                     {w: bool(followed(i)) for i, w in enumerate(CODES)})


def test_a_flat_screen_says_the_workflow_does_not_matter_and_keeps_every_followable_workflow():
    flat = screen("B_lineAgent", lambda i: -13.0)
    q, df, p = pa.heterogeneity(flat)
    assert q == pytest.approx(0.0, abs=1e-9) and df == 59 and p == pytest.approx(1.0)
    assert sorted(pa.confidence_set(flat)) == sorted(CODES[:60])


def test_a_clear_winner_is_found_and_alone_in_its_set():
    s = screen("B_lineAgent", lambda i: -10.0 if i == 7 else -15.0)
    assert s.best() == CODES[7]
    assert pa.confidence_set(s) == [CODES[7]]
    assert pa.heterogeneity(s)[2] < 1e-6


def test_an_unfollowable_workflow_is_never_the_best():
    s = screen("B_lineAgent", lambda i: -1.0 if i == 100 else -15.0 - 0.01 * i)
    assert s.best() == CODES[0]
    assert CODES[100] not in pa.confidence_set(s)


def test_transfer_fails_only_when_the_other_attackers_set_excludes_the_choice():
    a = screen("A", lambda i: -10.0 if i == 1 else -15.0)
    b = screen("B", lambda i: -10.0 if i == 2 else -15.0)
    t = pa.transfer(a, b)
    assert t["workflow"] == CODES[1] and t["followed"] and not t["kept"]
    assert t["gap"] == pytest.approx(5.0) and t["gap_ci95"] == pytest.approx(1.96 * math.hypot(0.3, 0.3) / 1.96)
    same = screen("C", lambda i: -10.0 if i == 1 else -15.0)
    assert pa.transfer(a, same)["kept"] and pa.transfer(a, same)["gap"] == 0.0


def test_overlap_counts_the_followable_sets():
    a = screen("A", lambda i: -13.0, followed=lambda i: i < 60)
    b = screen("B", lambda i: -13.0, followed=lambda i: 30 <= i < 90)
    o = pa.overlap([a, b])
    assert o["sizes"] == {"A": 60, "B": 60}
    assert o["common"] == sorted(CODES[30:60])
    assert o["jaccard"][("A", "B")] == pytest.approx(30 / 90)


def _write_search(folder, name, red, mean):
    rows = [{"workflow": w, "universal_mean": mean(i), "universal_ci95": 0.3, "universal_compliance": 0.99,
             "universal_eligible": i < 60, "fine_tuned_mean": "", "fine_tuned_compliance": "", "eligible": i < 60,
             "call_from": "universal", "in_confidence_set": False} for i, w in enumerate(CODES)]
    with open(folder / f"{name}-screen.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    summary = {"red_agent": red, "best_workflow_codes": CODES[3], "best_reward": -12.5, "best_ci95": 0.25,
               "confidence_set": CODES[:5], "workflows_evaluated": 3, "seed": int(name[-1]),
               "universal": {"agent": "pretrained:universal"}}
    (folder / f"{name}-summary.json").write_text(json.dumps(summary))


def test_collected_folder_gives_one_screen_per_attacker_and_every_answer(tmp_path):
    _write_search(tmp_path, "B_lineAgent-s0", "B_lineAgent", lambda i: -13.0 - 0.5 * i)
    _write_search(tmp_path, "B_lineAgent-s1", "B_lineAgent", lambda i: -13.0 - 0.5 * i)
    _write_search(tmp_path, "UserHopper-s0", "UserHopper", lambda i: -25.0 + 0.5 * i)
    (agent, (screens, answers)), = pa.collected(tmp_path).items()
    assert agent == "pretrained:universal"
    assert [s.red_agent for s in screens] == ["B_lineAgent", "UserHopper"]
    assert [(a.red_agent, a.seed) for a in answers] == [("B_lineAgent", 0), ("B_lineAgent", 1), ("UserHopper", 0)]
    summary = pa.summarise(screens, answers)
    assert summary["attackers"]["B_lineAgent"]["best"] == CODES[0]
    assert summary["attackers"]["UserHopper"]["best"] == CODES[59]
    # the answer (CODES[3], 1.5 below the best) is outside B_line's set
    assert [a["answer_in_screen_set"] for a in summary["attackers"]["B_lineAgent"]["answers"]] == [False, False]
    assert summary["transfer"]["B_lineAgent"]["UserHopper"]["workflow"] == CODES[0]
    # B_line's set (0.5 apart, se 0.15 each) keeps its first workflows, UserHopper's its last: none in both
    assert summary["transfer"]["B_lineAgent"]["UserHopper"]["kept"] is False
    assert summary["overlap"]["in_every_set"] == []
    json.dumps(summary)   # the study writes it as JSON


def test_two_searches_against_one_attacker_with_different_screens_are_refused(tmp_path):
    _write_search(tmp_path, "B_lineAgent-s0", "B_lineAgent", lambda i: -13.0)
    _write_search(tmp_path, "B_lineAgent-s1", "B_lineAgent", lambda i: -14.0)
    with pytest.raises(ValueError, match="differs"):
        pa.collected(tmp_path)
