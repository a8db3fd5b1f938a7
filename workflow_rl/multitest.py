"""Multiple-comparison control: one Holm procedure for the search's answer and the fidelity curves.

Which workflows cannot be excluded from being best, and which hosts differ between engines.
"""
from __future__ import annotations

import math


def holm(pvalues: list[float | None], alpha: float, count_untested: bool = True) -> list[bool]:
    """Holm's step-down procedure: which hypotheses are rejected at family-wise level ``alpha`` (sort p ascending,
    reject while p_(k) <= alpha / (m - k)). A p-value of None or NaN is a hypothesis that could not be tested: never
    rejected, and counted in the family size m when ``count_untested`` (conservative: the search, where an untested
    workflow is still a candidate) or left out of it (the curves, where a host no engine ever reached is no test)."""
    tested = [i for i, p in enumerate(pvalues) if p is not None and not math.isnan(p)]
    tested.sort(key=lambda i: pvalues[i])
    m = len(pvalues) if count_untested else len(tested)
    rejected = [False] * len(pvalues)
    for k, i in enumerate(tested):
        if pvalues[i] > alpha / (m - k):
            break
        rejected[i] = True
    return rejected
