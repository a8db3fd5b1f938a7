"""A Gaussian process over the 120 workflows, and GP-UCB selection.

Kernel: the Mallows kernel, k(a, b) = s^2 exp(-||phi(a) - phi(b)||^2 / (2 l^2)) with phi the 10-dim pairwise-order
embedding (+1/-1 per type pair). ||phi(a) - phi(b)||^2 = 40 * Kendall(a, b), so this is an RBF in Kendall distance,
positive definite on permutations. Plus a white-noise term. Signal variance, length scale and noise are fitted by
maximising the marginal likelihood (scikit-learn's GaussianProcessRegressor, a few seeded restarts).

UCB: score = mu + sqrt(beta_t) * sigma over all 120 candidates. By default beta_t follows Srinivas et al. (2010),
Theorem 1 for a finite decision set: beta_t = 2 log(|D| t^2 pi^2 / (6 delta)), delta = 0.1; ``beta`` fixes it.
"""
from __future__ import annotations

import math
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel

from workflow_rl.workflow import Workflow, all_workflows, kendall

N_CANDIDATES = 120


def features(workflows=None) -> np.ndarray:
    ws = all_workflows() if workflows is None else workflows
    return np.stack([w.pairwise() for w in ws])


def mallows_kernel(signal: float = 1.0, length_scale: float = 3.0, noise: float = 0.1, fixed: bool = False):
    bounds = "fixed" if fixed else None
    k = ConstantKernel(signal, constant_value_bounds=bounds or (1e-3, 1e3)) * \
        RBF(length_scale, length_scale_bounds=bounds or (0.3, 30.0))
    return k + WhiteKernel(noise, noise_level_bounds=bounds or (1e-4, 1.0))


def fit_gp(workflows: list[Workflow], y: np.ndarray, seed: int = 0, kernel=None) -> GaussianProcessRegressor:
    """GP fitted to observed (workflow, value) pairs; targets are standardised inside (normalize_y)."""
    fixed = kernel is not None
    gp = GaussianProcessRegressor(kernel=kernel if fixed else mallows_kernel(), normalize_y=True,
                                  optimizer=None if fixed else "fmin_l_bfgs_b",
                                  n_restarts_optimizer=0 if fixed else 3, random_state=seed)
    with warnings.catch_warnings():
        # hyperparameters at a bound (e.g. near-zero noise with few points) are expected, not a user problem
        warnings.simplefilter("ignore", ConvergenceWarning)
        gp.fit(features(workflows), np.asarray(y, float))
    return gp


def posterior(gp: GaussianProcessRegressor) -> tuple[np.ndarray, np.ndarray]:
    """Posterior mean and standard deviation over all 120 workflows (in :func:`all_workflows` order)."""
    mu, sd = gp.predict(features(), return_std=True)
    return mu, sd


def srinivas_beta(t: int, n: int = N_CANDIDATES, delta: float = 0.1) -> float:
    return 2.0 * math.log(n * t * t * math.pi ** 2 / (6.0 * delta))


def ucb_select(mu: np.ndarray, sd: np.ndarray, beta: float, exclude: set[int]) -> int:
    """Index of the UCB argmax among workflows not in ``exclude`` (lowest index on ties)."""
    score = mu + math.sqrt(beta) * sd
    score = np.where(np.isin(np.arange(len(score)), list(exclude)), -np.inf, score)
    return int(np.argmax(score))


def initial_design(n: int, first: Workflow | None = None) -> list[Workflow]:
    """Farthest-point design in Kendall distance: start from ``first`` (critical_first by default), then repeatedly
    add the workflow farthest from those chosen (lowest index on ties). Spreads the first evaluations over the
    permutation space, so the GP's hyperparameters are fitted from diverse points."""
    ws = all_workflows()
    chosen = [first or Workflow.parse("critical_first")]
    while len(chosen) < min(n, len(ws)):
        dist = [min(kendall(w, c) for c in chosen) if w not in chosen else -1.0 for w in ws]
        chosen.append(ws[int(np.argmax(dist))])
    return chosen[:n]
