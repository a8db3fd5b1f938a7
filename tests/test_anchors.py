"""Comparisons with published agents use anchors measured on the game we run (csle-cyborg 0.0.3): the winner's
agent computed from its shipped per-episode returns, as its provenance (shared/cage2/reference/summary.md) states."""
import pytest

from workflow_rl import anchors
from workflow_rl.rl.evaluate import CAGE2_WINNER

STATED = {("B_lineAgent", 30): (-5.18, 0.37), ("B_lineAgent", 50): (-13.36, 0.77), ("B_lineAgent", 100): (-35.94, 1.61),
          ("RedMeanderAgent", 30): (-5.65, 0.14), ("RedMeanderAgent", 50): (-8.96, 0.22),
          ("RedMeanderAgent", 100): (-16.60, 0.40)}


def test_the_winner_anchor_is_its_episodes_on_our_cyborg():
    w = anchors.winner()
    assert set(w) == set(STATED) and all(a.episodes == 400 for a in w.values())
    for cell, (mean, ci) in STATED.items():
        assert (round(w[cell].mean, 2), round(w[cell].ci95, 2)) == (mean, ci), cell
    total, ci = anchors.winner_sum()
    assert (round(total, 2), round(ci, 2)) == (-85.70, 1.89)
    assert CAGE2_WINNER == {c: a.mean for c, a in w.items()}
    assert CAGE2_WINNER != anchors.LEADERBOARD_CYBORG21   # the leaderboard was another game: history only


def test_an_evaluation_compares_with_the_same_game(capsys):
    from workflow_rl.runs.evaluate import evaluation_markdown

    rows = [{"engine": "cyborg", "mode": "greedy", "red_agent": red, "length": n, "episodes": 10, "mean": -10.0,
             "ci95": 1.0, "compliance": None} for red, n in STATED]
    md = evaluation_markdown("x", None, rows)
    assert "CAGE2 winner's agent, same CybORG" in md and "-35.94 ± 1.61 (n=400)" in md and "-85.70 ± 1.89" in md
    assert "another game" in md and "-13.76" not in md


@pytest.mark.parametrize("planner", anchors.PLANNERS, ids=lambda a: a.name)
def test_the_planner_anchors_are_b_line_100(planner):
    assert (planner.red_agent, planner.length) == ("B_lineAgent", 100) and planner.mean < 0 < planner.ci95
    assert anchors.CYBORG_BUILD in planner.source
