"""Which workflows cannot be excluded from being the best: the multiple-comparison-aware tests.

The multiple-comparison-aware tests behind the ground truth's "distinguishable from the best" and a search's confidence
set.

Both ask the same question of each workflow i other than the reference (the best): is mu_best > mu_i at family-wise
level alpha? One one-sided test per i, and Holm's step-down correction over all of them, so the probability that
*any* workflow as good as the best is wrongly excluded stays <= alpha (whatever the dependence between the tests).
The workflows not excluded, with the best, form the confidence set.

* Seeds (the ground truth: every workflow trained K >= 2 times): Welch's t-test on the per-seed values (unequal
  variances, Welch-Satterthwaite degrees of freedom). A workflow with one seed has no spread to test with: it is
  never excluded (the honest side).
* GP posterior (a search: most workflows untried): a z-test on the posterior of mu_best - mu_i, whose variance uses
  the posterior covariance, so correlated workflows are compared as such.
"""
from __future__ import annotations

import math

import numpy as np
from scipy import stats

from workflow_rl import multitest

ALPHA = 0.05
"""Family-wise error rate of every "cannot be excluded from being best" statement (95%)."""


def holm(pvalues: list[float | None], alpha: float = ALPHA) -> list[bool]:
    """Holm at family level ``alpha``; a workflow that could not be tested (None) is never rejected and still counts
    in the family size."""
    return multitest.holm(pvalues, alpha, count_untested=True)


def welch_greater(best: list[float], other: list[float]) -> float | None:
    """One-sided Welch p-value of H0: mean(best) <= mean(other) (None with fewer than 2 values on a side)."""
    if len(best) < 2 or len(other) < 2:
        return None
    a, b = np.asarray(best, float), np.asarray(other, float)
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    diff = a.mean() - b.mean()
    if va + vb == 0:
        return 0.0 if diff > 0 else 1.0
    df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1)) if va and vb else \
        len(a if va else b) - 1
    return float(stats.t.sf(diff / math.sqrt(va + vb), df))


def distinguishable_from_best(samples: dict[str, list[float]], alpha: float = ALPHA) -> tuple[str, dict]:
    """(best, {workflow: (holm-adjusted decision, raw p)}) over per-seed values: the best is the highest mean,
    and each other workflow is tested against it with Welch's t (Holm-corrected)."""
    best = max(samples, key=lambda w: np.mean(samples[w]))
    others = [w for w in samples if w != best]
    ps = [welch_greater(samples[best], samples[w]) for w in others]
    rej = holm(ps, alpha)
    return best, {w: (r, p) for w, r, p in zip(others, rej, ps)}


def posterior_confidence_set(mu: np.ndarray, cov: np.ndarray, ref: int, candidates: list[int],
                             alpha: float = ALPHA) -> list[int]:
    """Candidates whose posterior cannot be shown worse than ``ref``'s (Holm-corrected one-sided z-tests on
    mu_ref - mu_i with the posterior covariance); ``ref`` is always in."""
    others = [i for i in candidates if i != ref]
    ps = []
    for i in others:
        var = cov[ref, ref] + cov[i, i] - 2 * cov[ref, i]
        d = mu[ref] - mu[i]
        ps.append(float(stats.norm.sf(d / math.sqrt(var))) if var > 1e-12 else (0.0 if d > 0 else 1.0))
    rej = holm(ps, alpha)
    return [ref] + [i for i, r in zip(others, rej) if not r]


def pooled_variance(samples: dict[str, list[float]]) -> float | None:
    """The within-workflow seed variance pooled over workflows (each weighted by its seeds - 1; one-seed workflows
    add nothing); None when no workflow has 2 seeds."""
    groups = [np.asarray(v, float) for v in samples.values()]
    df = sum(len(g) - 1 for g in groups)
    return float(sum(((g - g.mean()) ** 2).sum() for g in groups) / df) if df > 0 else None


def workflow_effect(samples: dict[str, list[float]], alpha: float = ALPHA) -> dict | None:
    """Do the workflows differ at all? One-way random-effects ANOVA over per-seed values (workflows the groups).

    Why: "not distinguishable from the best" for every workflow can mean too few seeds or no differences to find;
    this tells them apart. ``p`` tests H0: every workflow has the same mean (F = between / within mean square).
    ``between_sd`` estimates the spread of the workflows' true values (the method of moments, 0 when negative) and
    ``between_sd_upper`` its one-sided upper 95% bound (exact for equal seeds per workflow, the usual Satterthwaite
    n0 approximation otherwise): a small bound says the choice of workflow cannot matter by more than that. None
    with fewer than 2 workflows or no workflow with 2 seeds."""
    groups = [np.asarray(v, float) for v in samples.values()]
    k, n_total = len(groups), sum(len(g) for g in groups)
    if k < 2 or n_total - k < 1:
        return None
    grand = np.concatenate(groups).mean()
    ss_between = sum(len(g) * (g.mean() - grand) ** 2 for g in groups)
    df_b, df_w = k - 1, n_total - k
    ms_b, ms_w = ss_between / df_b, pooled_variance(samples)
    n0 = (n_total - sum(len(g) ** 2 for g in groups) / n_total) / df_b   # seeds per workflow (balanced: K)
    if ms_w == 0:
        return None
    f = ms_b / ms_w
    upper_ratio = max(0.0, (f / stats.f.ppf(alpha, df_b, df_w) - 1) / n0)   # sigma_b^2 / sigma_w^2 bound
    return {"workflows": k, "seeds": n_total, "f": float(f), "p": float(stats.f.sf(f, df_b, df_w)),
            "within_sd": float(math.sqrt(ms_w)), "between_sd": float(math.sqrt(max(0.0, (ms_b - ms_w) / n0))),
            "between_sd_upper": float(math.sqrt(upper_ratio * ms_w))}


def median_interval(values: list[float], level: float = 1 - ALPHA) -> tuple[float, float, float]:
    """(median, low, high) with the distribution-free order-statistic interval [x_(j), x_(n+1-j)], j the largest
    with P(Binomial(n, 1/2) <= j-1) <= (1-level)/2 (no resampling noise). Below 6 values no j reaches 95%: the
    interval is then the sample's range."""
    v = np.sort(np.asarray(values, float))
    n = len(v)
    j = 1
    while j + 1 <= (n + 1) // 2 and stats.binom.cdf(j, n, 0.5) <= (1 - level) / 2:
        j += 1
    return float(np.median(v)), float(v[j - 1]), float(v[n - j])
