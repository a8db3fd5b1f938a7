"""A Gaussian process over the 120 workflows with observations of two fidelities.

*low* (a workflow's value under a universal agent, trained once across all workflows and only evaluated under this one)
and *high* (the value after the search fine-tunes that agent under the workflow, the search's usual observation).

Model (standardised targets):

    y_low(w)  = m     + f(w)        + e,   e ~ N(0, se_w^2)      se_w: the evaluation's own standard error
    y_high(w) = m + d + f(w) + g(w) + e',  e' ~ N(0, v_w)        v_w: its seeds' squared standard error (0 for one)
    f ~ GP(0, s^2 exp(-||phi(w) - phi(w')||^2 / (2 l^2)))        the Mallows kernel of ``gp``
    g(w) ~ N(0, tau^2), independent per workflow                 what fine-tuning adds beyond the shift d

Why this form, and not a fidelity input with its own correlation length: every high observation starts from the
same weights and gets the same further training, so what fine-tuning adds is, to first order, one shift ``d`` (the
gain of the extra episodes) shared by all workflows, and what it adds beyond that differs from workflow to workflow
the way training outcomes do: ``g``, of variance ``tau^2``. Both are learned from the data (``d`` by generalised least
squares together with the mean ``m``; ``s``, ``l`` and ``tau`` by maximising the profile likelihood), which needs
only two numbers beyond the single-fidelity GP - a search has a handful of high observations, too few to fit a
second kernel. The low observations' noise is known (500 episodes' standard error), so it is not fitted. With no
high observation yet ``d`` is not identified and is 0 (it shifts every workflow alike, so no pick or comparison
depends on it).

A workflow's value is its fine-tuned value ``m + d + f(w) + g(w)``: the posterior over it (``posterior_high``) is
what UCB and the confidence set read. ``g`` is part of it, not noise to take off: with one seed per workflow a
fine-tuned workflow's own deviation cannot be told from seed noise, and a workflow not yet fine-tuned could land
anywhere within ``tau`` of its universal value plus ``d``, so its posterior keeps that spread (treating ``g`` as
noise instead makes the confidence set too narrow: it can leave out the best workflow). The likelihood is the same either way; only what is predicted differs.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg import cho_factor, cho_solve
from scipy.optimize import minimize

from workflow_rl.search.gp import features
from workflow_rl.workflow import Workflow

BOUNDS = ((-7.0, 7.0), (np.log(0.3), np.log(30.0)), (np.log(1e-4), np.log(10.0)))
"""log s^2, log l (the single-fidelity GP's length-scale bounds) and log tau^2, in standardised units."""
STARTS = ((0.0, np.log(3.0), np.log(0.1)), (0.0, np.log(1.0), np.log(0.01)), (np.log(0.1), np.log(10.0), 0.0))
"""Fixed starting points of the likelihood maximisation (deterministic: a resumed search fits the same model)."""
JITTER = 1e-8


@dataclass(frozen=True)
class Observations:
    """The search's observations of both fidelities (raw units); ``high`` marks the fine-tuned ones."""

    workflows: list[Workflow]
    y: np.ndarray
    noise: np.ndarray
    """each observation's known noise variance (raw units)"""
    high: np.ndarray

    @classmethod
    def of(cls, low: list[tuple[Workflow, float, float]], high: list[tuple[Workflow, float, float]]):
        """From (workflow, value, known noise variance) triples of each fidelity."""
        rows = [(*x, 0.0) for x in low] + [(*x, 1.0) for x in high]
        return cls([r[0] for r in rows], np.array([r[1] for r in rows], float), np.array([r[2] for r in rows], float),
                   np.array([r[3] for r in rows]))


@dataclass(frozen=True)
class TwoFidelityGP:
    """A fitted model: hyperparameters (log s^2, log l, log tau^2), mean ``m`` and offset ``d`` (raw units)."""

    theta: tuple[float, float, float]
    mean: float
    offset: float
    obs: Observations
    scale: float
    """the targets' standard deviation (what standardises them)"""

    @property
    def tau(self) -> float:
        """The fine-tuning noise's standard deviation, raw units."""
        return float(np.sqrt(np.exp(self.theta[2]))) * self.scale


def _kernel(xa: np.ndarray, xb: np.ndarray, log_s2: float, log_l: float) -> np.ndarray:
    d2 = ((xa[:, None, :] - xb[None, :, :]) ** 2).sum(-1)
    return np.exp(log_s2) * np.exp(-d2 / (2.0 * np.exp(2 * log_l)))


def _basis(high: np.ndarray) -> np.ndarray:
    """The mean's regressors: a constant, and the high-fidelity offset once a high observation exists."""
    return np.stack([np.ones(len(high)), high], 1) if high.any() else np.ones((len(high), 1))


def _standard(obs: Observations) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Features, standardised targets, standardised known noise variances, and the scale used."""
    scale = float(np.std(obs.y)) or 1.0
    return features(obs.workflows), (obs.y - obs.y.mean()) / scale, obs.noise / scale ** 2, scale


def _solve(theta, x: np.ndarray, z: np.ndarray, noise: np.ndarray, high: np.ndarray):
    """Cholesky factor of the covariance, the GLS mean coefficients, the residual and the profile negative log
    likelihood."""
    k = _kernel(x, x, theta[0], theta[1])
    k[np.diag_indices_from(k)] += np.maximum(noise, JITTER) + np.exp(theta[2]) * high
    c = cho_factor(k, lower=True)
    h = _basis(high)
    kih = cho_solve(c, h)
    beta = np.linalg.solve(h.T @ kih + JITTER * np.eye(h.shape[1]), kih.T @ z)
    r = z - h @ beta
    nll = 0.5 * r @ cho_solve(c, r) + np.log(np.diag(c[0])).sum()
    return c, beta, r, float(nll)


def fit(obs: Observations, theta: tuple[float, float, float] | None = None) -> TwoFidelityGP:
    """The model fitted to ``obs`` (``theta`` given: those hyperparameters, held fixed, e.g. for hallucinated
    pending observations)."""
    x, z, noise, scale = _standard(obs)
    if theta is None:
        fits = [minimize(_safe_nll, np.array(s), args=(x, z, noise, obs.high), method="L-BFGS-B", bounds=BOUNDS)
                for s in STARTS]
        theta = tuple(float(v) for v in min(fits, key=lambda r: r.fun).x)
    beta = _solve(theta, x, z, noise, obs.high)[1]
    offset = float(beta[1]) * scale if len(beta) > 1 else 0.0
    return TwoFidelityGP(theta, float(beta[0]) * scale + float(obs.y.mean()), offset, obs, scale)


def _safe_nll(theta, x, z, noise, high) -> float:
    try:
        return _solve(theta, x, z, noise, high)[3]
    except np.linalg.LinAlgError:
        return 1e10


def posterior_high(model: TwoFidelityGP, workflows: list[Workflow]) -> tuple[np.ndarray, np.ndarray]:
    """Posterior mean and covariance of the fine-tuned value ``m + d + f(w) + g(w)`` of ``workflows`` (raw units;
    the uncertainty of ``m`` and ``d`` is left out: they shift every workflow alike)."""
    obs = model.obs
    x, z, noise, scale = _standard(obs)
    c, beta, r, _ = _solve(model.theta, x, z, noise, obs.high)
    xs = features(workflows)
    tau2 = np.exp(model.theta[2])
    same = np.array([[float(w == o and h) for o, h in zip(obs.workflows, obs.high)] for w in workflows])
    ks = _kernel(xs, x, model.theta[0], model.theta[1]) + tau2 * same   # g(w) is shared with w's high observations
    mu = beta.sum() + ks @ cho_solve(c, r)
    cov = _kernel(xs, xs, model.theta[0], model.theta[1]) + tau2 * np.eye(len(workflows)) - ks @ cho_solve(c, ks.T)
    return mu * scale + obs.y.mean(), cov * scale ** 2
