"""A Gaussian process over the 120 workflows, and GP-UCB selection.

Kernel: the Mallows kernel, k(a, b) = s^2 exp(-||phi(a) - phi(b)||^2 / (2 l^2)) with phi the 10-dim pairwise-order
embedding (+1/-1 per type pair). ||phi(a) - phi(b)||^2 = 40 * Kendall(a, b), so this is an RBF in Kendall distance,
positive definite on permutations. Plus a white-noise term, or, where every observation is a mean over seeds, each
observation's own noise variance (its squared standard error) as a per-sample ``alpha``. Signal variance, length
scale and noise are fitted by maximising the marginal likelihood (scikit-learn's GaussianProcessRegressor, a few
seeded restarts).

UCB: score = mu + sqrt(beta_t) * sigma over all 120 candidates. By default beta_t follows Srinivas et al. (2010),
Theorem 1 for a finite decision set: beta_t = 2 log(|D| t^2 pi^2 / (6 delta)), delta = 0.1; ``beta`` fixes it.

Constrained expected improvement (Gardner et al. 2014; Gelbart et al. 2014): the answer must be *eligible*
(compliant in training and evaluation), and whether a workflow can be made compliant is itself structured (e.g.
ordering user hosts before enterprise ones leaves a defender no compliant way to fix enterprise hosts while users
are re-compromised). A GP classifier over the same pairwise-order features gives P(eligible); the score is
EI(mu, sigma; best eligible value so far) * P(eligible), so the budget is not spent on workflows whose policy could
not be the answer.
"""
from __future__ import annotations

import math
import warnings

import numpy as np
from scipy.stats import norm
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process import GaussianProcessClassifier, GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel

from workflow_rl.workflow import Workflow, all_workflows, kendall

N_CANDIDATES = 120


def features(workflows=None) -> np.ndarray:
    ws = all_workflows() if workflows is None else workflows
    return np.stack([w.pairwise() for w in ws])


def mallows_kernel(signal: float = 1.0, length_scale: float = 3.0, noise: float | None = 0.1, fixed: bool = False):
    """The Mallows kernel plus a fitted white-noise level (``noise`` None: no white noise, the per-observation
    noise is given to the GP instead)."""
    bounds = "fixed" if fixed else None
    k = ConstantKernel(signal, constant_value_bounds=bounds or (1e-3, 1e3)) * \
        RBF(length_scale, length_scale_bounds=bounds or (0.3, 30.0))
    return k if noise is None else k + WhiteKernel(noise, noise_level_bounds=bounds or (1e-4, 1.0))


JITTER = 1e-8
"""Numerical floor of the per-observation noise (standardised units), as scikit-learn's own default alpha."""


def fit_gp(workflows: list[Workflow], y: np.ndarray, seed: int = 0, kernel=None,
           noise_var: np.ndarray | None = None) -> GaussianProcessRegressor:
    """GP fitted to observed (workflow, value) pairs; targets are standardised inside (normalize_y).

    ``noise_var``: each observation's own noise variance (e.g. the squared standard error of a mean over seeds),
    in the units of ``y``. Given, it is the GP's per-sample ``alpha`` (rescaled to the standardised targets) and
    the kernel has no shared white-noise term: a workflow measured precisely pins the posterior, a noisy one
    does not. Without it one white-noise level is fitted for all observations."""
    y = np.asarray(y, float)
    fixed = kernel is not None
    alpha = JITTER
    if noise_var is not None:
        scale = float(np.std(y)) or 1.0       # normalize_y divides y by its std; alpha must follow it
        alpha = np.maximum(np.asarray(noise_var, float) / scale ** 2, JITTER)
    gp = GaussianProcessRegressor(kernel=kernel if fixed else mallows_kernel(noise=None if noise_var is not None
                                                                             else 0.1),
                                  alpha=alpha, normalize_y=True, optimizer=None if fixed else "fmin_l_bfgs_b",
                                  n_restarts_optimizer=0 if fixed else 3, random_state=seed)
    with warnings.catch_warnings():
        # hyperparameters at a bound (e.g. near-zero noise with few points) are expected, not a user problem
        warnings.simplefilter("ignore", ConvergenceWarning)
        gp.fit(features(workflows), y)
    return gp


def seed_noise(seed_values: list[list[float]]) -> np.ndarray | None:
    """Per-observation noise variances from seeds (variance of each mean: s^2 / K), or None unless every
    observation has at least 2 seeds (then there is nothing per-sample to use and one level is fitted)."""
    if not seed_values or any(len(v) < 2 for v in seed_values):
        return None
    return np.array([np.var(v, ddof=1) / len(v) for v in seed_values])


def posterior(gp: GaussianProcessRegressor) -> tuple[np.ndarray, np.ndarray]:
    """Posterior mean and standard deviation over all 120 workflows (in :func:`all_workflows` order)."""
    mu, sd = gp.predict(features(), return_std=True)
    return mu, sd


def posterior_cov(gp: GaussianProcessRegressor) -> tuple[np.ndarray, np.ndarray]:
    """Posterior mean and covariance of the latent values of all 120 workflows. Without per-sample noise the
    fitted white-noise level is observation noise, not part of a workflow's value: it is taken off the diagonal."""
    mu, cov = gp.predict(features(), return_cov=True)
    white = [k.noise_level for k in _parts(gp.kernel_) if isinstance(k, WhiteKernel)]
    if white:
        cov = cov - np.eye(len(cov)) * white[0] * float(gp._y_train_std) ** 2
    return mu, cov


def _parts(kernel):
    """The leaf kernels of a sum/product kernel."""
    if hasattr(kernel, "k1"):
        return _parts(kernel.k1) + _parts(kernel.k2)
    return [kernel]


def srinivas_beta(t: int, n: int = N_CANDIDATES, delta: float = 0.1) -> float:
    return 2.0 * math.log(n * t * t * math.pi ** 2 / (6.0 * delta))


def ucb_select(mu: np.ndarray, sd: np.ndarray, beta: float, exclude: set[int]) -> int:
    """Index of the UCB argmax among workflows not in ``exclude`` (lowest index on ties)."""
    score = mu + math.sqrt(beta) * sd
    score = np.where(np.isin(np.arange(len(score)), list(exclude)), -np.inf, score)
    return int(np.argmax(score))


def expected_improvement(mu: np.ndarray, sd: np.ndarray, best: float) -> np.ndarray:
    """E[max(0, f - best)] under f ~ N(mu, sd^2), elementwise (0 where sd is 0 and mu <= best)."""
    sd = np.maximum(sd, 1e-12)
    z = (mu - best) / sd
    return (mu - best) * norm.cdf(z) + sd * norm.pdf(z)


def eligibility(workflows: list[Workflow], eligible: list[bool], seed: int = 0) -> np.ndarray:
    """P(eligible) for all 120 workflows from a GP classifier (Laplace approximation; the Mallows kernel without
    noise) fitted to the observed eligibility; with only one class observed so far, that class's observed share for
    every workflow (nothing separates them yet)."""
    y = np.asarray(eligible, int)
    if y.min() == y.max():
        return np.full(N_CANDIDATES, float(y[0]))
    gpc = GaussianProcessClassifier(kernel=mallows_kernel(noise=None), random_state=seed, n_restarts_optimizer=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        gpc.fit(features(workflows), y)
    return gpc.predict_proba(features())[:, list(gpc.classes_).index(1)]


def cei_select(mu: np.ndarray, sd: np.ndarray, best: float, p_eligible: np.ndarray, exclude: set[int]) -> int:
    """Index of the constrained-EI argmax among workflows not in ``exclude`` (lowest index on ties)."""
    score = expected_improvement(mu, sd, best) * p_eligible
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
