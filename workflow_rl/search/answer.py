"""A search's answer and how sure it is: the best eligible workflow and its 95% confidence set.

The best eligible workflow and the 95% confidence set, the workflows that cannot be excluded from being best given what
the search observed.

The set comes from the GP posterior, not from seed intervals alone, because most workflows are never trained: only
a model says anything about them. Each candidate (every workflow not known to be ineligible: untried ones and
tried eligible ones) is tested against the answer with a one-sided z-test on the posterior of mu_answer - mu_i
(posterior covariance), Holm-corrected over all candidates (``stats.posterior_confidence_set``). Where every
observation is a mean over >= 2 seeds, the GP's noise is each observation's own squared standard error
(``gp.seed_noise``); with one seed per workflow a shared white-noise level is fitted and taken off the posterior of
the latent value. Under 2 observations nothing can be excluded.
"""
from __future__ import annotations

import numpy as np

from workflow_rl.search.gp import fit_gp, posterior_cov, seed_noise
from workflow_rl.search.records import Record
from workflow_rl.search.stats import ALPHA, posterior_confidence_set
from workflow_rl.workflow import Workflow, all_workflows


def fit_records(records: list[Record], seed: int):
    """The GP over the search's observations, with per-sample seed noise where every record has it."""
    ws = [Workflow.parse(r.workflow) for r in records]
    y = np.array([r.observed_reward for r in records])
    return fit_gp(ws, y, seed=seed, noise_var=seed_noise([r.seed_rewards for r in records]))


def best_record(records: list[Record], threshold: float) -> Record | None:
    """The answer: the eligible workflow with the highest observed value (the best overall, if none is eligible)."""
    if not records:
        return None
    ok = [r for r in records if r.eligible(threshold)]
    return max(ok or records, key=lambda r: r.observed_reward)


def confidence_set(records: list[Record], threshold: float, seed: int, screened: list | None = None) -> dict:
    """{"workflows": the 95% confidence set (codes, the answer first), "method": how it was decided}; with
    ``screened`` (a search from a universal agent) from the two-fidelity GP over the workflows it does not call
    ineligible (``search.universal``)."""
    best = best_record(records, threshold)
    if best is None:
        return {"workflows": [], "method": "no workflow trained"}
    if screened:
        return _universal_set(records, screened, threshold, best)
    excluded = {Workflow.parse(r.workflow).index for r in records if not r.eligible(threshold)}
    candidates = [w.index for w in all_workflows() if w.index not in excluded]
    ref = Workflow.parse(best.workflow).index
    if ref not in candidates:
        candidates.append(ref)
    if len(records) < 2:
        keep = [ref] + [i for i in candidates if i != ref]
        method = "fewer than 2 observations: nothing can be excluded"
    else:
        mu, cov = posterior_cov(fit_records(records, seed))
        keep = posterior_confidence_set(mu, cov, ref, candidates, ALPHA)
        noise = "per-seed standard errors" if seed_noise([r.seed_rewards for r in records]) is not None else \
            "one fitted white-noise level"
        method = (f"GP posterior ({noise}), Holm-corrected one-sided z-tests of the answer against each of "
                  f"{len(candidates) - 1} candidates (untried or eligible), family-wise 95%")
    return {"workflows": [all_workflows()[i].codes for i in keep], "method": method}


def _universal_set(records: list[Record], screened: list, threshold: float, best: Record) -> dict:
    """The confidence set of a search from a universal agent: every workflow has an observation, so the
    two-fidelity posterior is tested from the first fine-tuned one on."""
    from workflow_rl.search import universal

    candidates = universal.candidates(records, screened, threshold)
    ref = Workflow.parse(best.workflow).index
    if ref not in candidates:
        candidates.append(ref)
    (mu, cov), model = universal.posterior(records, screened)
    keep = posterior_confidence_set(mu, cov, ref, candidates, ALPHA)
    method = (f"two-fidelity GP posterior (all {len(screened)} workflows under the universal agent, {len(records)} "
              f"fine-tuned; fine-tuning offset {model.offset:+.2f}, its spread across workflows sd {model.tau:.2f}), Holm-corrected "
              f"one-sided z-tests of the answer against each of {len(candidates) - 1} candidates (not called "
              "ineligible), family-wise 95%")
    return {"workflows": [all_workflows()[i].codes for i in keep], "method": method}
