"""Published agents measured on the game we run: the anchors a comparison with other work uses.

A number is only comparable with ours when it was measured on the same game: the same CybORG build and the same
protocol. CAGE2's leaderboard (CardiffUni, -54.57 over the six cells) was measured on CybORG 2.1 before two
August-2022 fixes (the Haraka version no longer turns UNKNOWN after a Restore; red clears its remembered ports
before a rescan); csle-cyborg 0.0.3, the build this project runs, has both. So the winner's own published agent
(john-cardiff/-cyborg-cage-2, MIT, its two PPO models, through its own corrected table wrapper) was rerun on
csle-cyborg 0.0.3: 400 episodes per cell, each seeded (``random.seed`` and ``numpy.random.seed``) S + i before its
reset, S = 31,337,000 + 1,000 c for the cells c = 0..5 (B_line 30, Meander 30, B_line 50, Meander 50, B_line 100,
Meander 100). Its per-episode returns ship with the package (``data/winner_same_cyborg.csv``); :func:`winner`
computes the cells from them. The leaderboard's numbers are kept only as history (:data:`LEADERBOARD_CYBORG21`).
"""
from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from functools import cache
from pathlib import Path

CYBORG_BUILD = "csle-cyborg 0.0.3 (CybORG 2.1 with the August-2022 fixes), Scenario2"
"""The game every anchor here was measured on: the one ``--engine cyborg`` plays."""
WINNER_FILE = Path(__file__).parent / "data" / "winner_same_cyborg.csv"
WINNER_SOURCE = ("the CAGE2 winner's published agent (john-cardiff/-cyborg-cage-2, CardiffUni), rerun on "
                 f"{CYBORG_BUILD}")


@dataclass(frozen=True)
class Anchor:
    """One published agent's return in one cell, with its 95% interval and how many episodes measured it."""

    name: str
    red_agent: str
    length: int
    mean: float
    ci95: float
    episodes: int | None
    source: str


@cache
def winner() -> dict[tuple[str, int], Anchor]:
    """{(red agent, length): the winner's agent on our CybORG}, mean and 1.96 standard errors of its episodes."""
    cells: dict[tuple[str, int], list[float]] = {}
    with open(WINNER_FILE) as f:
        for row in csv.DictReader(f):
            cells.setdefault((row["red_agent"], int(row["length"])), []).append(float(row["return"]))
    out = {}
    for (red, n), x in sorted(cells.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        m = sum(x) / len(x)
        sd = math.sqrt(sum((v - m) ** 2 for v in x) / (len(x) - 1))
        out[(red, n)] = Anchor("CAGE2 winner's agent", red, n, m, 1.96 * sd / math.sqrt(len(x)), len(x),
                               WINNER_SOURCE)
    return out


def winner_sum(cells=None) -> tuple[float, float]:
    """The winner's sum over ``cells`` (default all six) and its 95% interval (independent episodes per cell)."""
    w = winner()
    keys = list(w) if cells is None else list(cells)
    return sum(w[k].mean for k in keys), math.sqrt(sum(w[k].ci95 ** 2 for k in keys))


PLANNERS = (
    Anchor("C-POMCP", "B_lineAgent", 100, -13.32, 0.18, None,
           f"published cost 13.32 +/- 0.18 on {CYBORG_BUILD}"),
    Anchor("belief-aggregation rollout", "B_lineAgent", 100, -13.23, 0.57, None,
           f"published cost 13.23 +/- 0.57 on {CYBORG_BUILD}"),
)
"""Online planners published on csle's CybORG (their costs as returns), B_line 100 steps."""

LEADERBOARD_CYBORG21 = {("B_lineAgent", 30): -3.47, ("B_lineAgent", 50): -6.41, ("B_lineAgent", 100): -13.76,
                        ("RedMeanderAgent", 30): -5.64, ("RedMeanderAgent", 50): -8.69,
                        ("RedMeanderAgent", 100): -16.6}
"""History only: CAGE2's leaderboard winner (CardiffUni) as measured on CybORG 2.1 before the August-2022 fixes,
another game than ours; never a comparison."""

__all__ = ["CYBORG_BUILD", "Anchor", "winner", "winner_sum", "PLANNERS", "LEADERBOARD_CYBORG21"]
