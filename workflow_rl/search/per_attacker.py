"""Does the workflow that defends best depend on the attacker? (issue Y item 4)

A search against one attacker answers "which compliant priority order defends best against *this* red"; an operator
choosing a workflow asks whether the answer would change against another. This module reads the evidence a search
leaves (its ``screen.csv``: the universal agent's held-out return and compliance under all 120 workflows against the
search's attacker, and its ``summary.json``: the fine-tuned answer and its 95% confidence set) for several
attackers and asks three questions of it, each as a test at the 95% level rather than a comparison of point means:

* **Can the set that can be followed change?** The workflows the universal agent follows (greedy evaluated
  compliance >= the search's threshold) per attacker, their overlap, and which are followable against one attacker
  and not another. Which hosts red compromises decides which fixes are due, so a priority order that is easy to
  follow against B_line can be impossible against a red that never reaches the user subnet.
* **Does the workflow matter at all against this attacker?** Cochran's Q over the followable workflows' screened
  means (inverse-variance weights, k - 1 degrees of freedom): a small p says the workflows' returns differ by more
  than their evaluation noise. Where it does not, every followable order is as good as another against it and no
  answer of a search can be better than "any of these".
* **Does the best change?** Per attacker the screen's best followable workflow and its 95% confidence set (Holm over
  one-sided z-tests of the best against each other followable workflow, ``search.stats``). Attacker A's best "fails"
  against B when B's set excludes it: a multiple-comparison-aware claim that A's choice is worse against B than B's
  best, with no winner's curse (A's best is chosen on A's episodes, tested on B's). The gap (B's best minus A's
  best, both on B's screen) is reported beside it; B's best is selected on those same episodes, so that gap is
  biased upward -- the test, not the gap, is the claim.

Why the screen and not a per-attacker ground truth (every workflow trained from scratch, 3 seeds): that costs about
4 million episodes per attacker (``benchmarks/results/ground_truth``); the screen costs 60,000 evaluation episodes
and is what the search itself decides on. Its numbers are the universal agent's, conditioned on each workflow, not a
specialist's: a claim here is about what this agent can follow and how well, which the fine-tuned answers check.
"""
from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import stats as sps

from workflow_rl.search.stats import ALPHA, posterior_confidence_set


@dataclass(frozen=True)
class Screen:
    """One attacker's screen: per workflow (codes) the universal agent's mean return, its 95% half-width and whether
    it is followed (its greedy compliance >= the search's threshold)."""

    red_agent: str
    mean: dict[str, float]
    ci95: dict[str, float]
    followed: dict[str, bool]

    def followable(self) -> list[str]:
        return [w for w in self.mean if self.followed[w]]

    def se(self, w: str) -> float:
        return self.ci95[w] / 1.96

    def best(self) -> str | None:
        """The followable workflow with the highest screened mean (None if none is followable)."""
        ok = self.followable()
        return max(ok, key=lambda w: self.mean[w]) if ok else None


@dataclass(frozen=True)
class Answer:
    """A search's answer: the fine-tuned workflow it returns, its held-out value and 95% interval, its confidence
    set and how many workflows it fine-tuned; ``agent``, the universal agent it started from."""

    agent: str
    red_agent: str
    seed: int | None
    workflow: str
    value: float
    ci95: float
    confidence_set: tuple[str, ...]
    fine_tuned: int


def read_screen(path: Path, red_agent: str) -> Screen:
    """A search's ``screen.csv`` (``search.universal.screen_rows``) as a :class:`Screen`."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if len(rows) != 120:
        raise ValueError(f"{path}: {len(rows)} workflows, a screen has 120")
    return Screen(red_agent, {r["workflow"]: float(r["universal_mean"]) for r in rows},
                  {r["workflow"]: float(r["universal_ci95"]) for r in rows},
                  {r["workflow"]: r["universal_eligible"] == "True" for r in rows})


def read_answer(summary: dict) -> Answer:
    """A search's ``summary.json`` (already parsed) as an :class:`Answer`."""
    return Answer(summary.get("universal", {}).get("agent", ""), summary["red_agent"], summary.get("seed"),
                  summary["best_workflow_codes"], float(summary["best_reward"]), float(summary["best_ci95"]),
                  tuple(summary["confidence_set"]), int(summary["workflows_evaluated"]))


def read_search(summary_file: Path) -> tuple[Screen, Answer]:
    """One collected search: ``NAME-summary.json`` and the ``NAME-screen.csv`` beside it."""
    summary_file = Path(summary_file)
    summary = json.loads(summary_file.read_text())
    screen_file = summary_file.with_name(summary_file.name[:-len("-summary.json")] + "-screen.csv")
    return read_screen(screen_file, summary["red_agent"]), read_answer(summary)


def collected(folder: Path) -> dict[str, tuple[list[Screen], list[Answer]]]:
    """Every ``NAME-summary.json`` with its ``NAME-screen.csv`` in ``folder`` (what ``benchmarks/studies/
    per_attacker.py`` copies out), per starting agent (summary.json's ``universal.agent``): one screen per attacker
    and every search's answer. Two searches against one attacker from one agent share one screen (cached); if their
    screens differ, a ValueError (they were not searches from the same agent at the same settings)."""
    out: dict[str, tuple[dict[str, Screen], list[Answer]]] = {}
    for summary in sorted(Path(folder).glob("*-summary.json")):
        screen, answer = read_search(summary)
        screens, answers = out.setdefault(answer.agent, ({}, []))
        if screen.red_agent in screens and screens[screen.red_agent] != screen:
            raise ValueError(f"{summary}: its screen differs from another search's from {answer.agent} against "
                             f"{screen.red_agent}")
        screens.setdefault(screen.red_agent, screen)
        answers.append(answer)
    return {agent: (list(screens.values()), answers) for agent, (screens, answers) in out.items()}


def heterogeneity(screen: Screen) -> tuple[float, int, float]:
    """Cochran's Q over the followable workflows' means (weights 1/se^2): (Q, degrees of freedom, p). p small: the
    workflows' returns differ by more than their evaluation noise against this attacker. (nan, 0, nan) with fewer
    than two followable workflows."""
    ok = screen.followable()
    if len(ok) < 2:
        return math.nan, 0, math.nan
    m = np.array([screen.mean[w] for w in ok])
    w = 1.0 / np.maximum(np.array([screen.se(x) for x in ok]) ** 2, 1e-12)
    q = float((w * (m - (w * m).sum() / w.sum()) ** 2).sum())
    return q, len(ok) - 1, float(sps.chi2.sf(q, len(ok) - 1))


def confidence_set(screen: Screen, alpha: float = ALPHA) -> list[str]:
    """The followable workflows that cannot be shown worse than the screen's best (Holm over one-sided z-tests,
    ``search.stats.posterior_confidence_set`` with independent episodes per workflow: a diagonal covariance); the
    best first."""
    best = screen.best()
    if best is None:
        return []
    ok = screen.followable()
    mu = np.array([screen.mean[w] for w in ok])
    cov = np.diag([screen.se(w) ** 2 for w in ok])
    return [ok[i] for i in posterior_confidence_set(mu, cov, ok.index(best), list(range(len(ok))), alpha)]


def transfer(a: Screen, b: Screen, alpha: float = ALPHA) -> dict:
    """What attacker ``a``'s best followable workflow does against ``b``: whether ``b`` follows it, whether ``b``'s
    confidence set keeps it, and the gap (``b``'s best minus it on ``b``'s screen, with its 95% half-width; upward
    biased, see the module)."""
    wa, wb = a.best(), b.best()
    if wa is None or wb is None:
        return {"workflow": wa, "followed": False, "kept": False, "gap": math.nan, "gap_ci95": math.nan}
    kept = wa in confidence_set(b, alpha)
    return {"workflow": wa, "followed": b.followed[wa], "kept": kept, "gap": b.mean[wb] - b.mean[wa],
            "gap_ci95": 1.96 * math.hypot(b.se(wa), b.se(wb))}


def overlap(screens: list[Screen]) -> dict:
    """The followable sets across attackers: their sizes, the workflows every attacker follows, and per pair of
    attackers the Jaccard index of their sets."""
    sets = {s.red_agent: set(s.followable()) for s in screens}
    common = set.intersection(*sets.values()) if sets else set()
    pairs = {(x, y): (len(sets[x] & sets[y]) / len(sets[x] | sets[y]) if sets[x] | sets[y] else 1.0)
             for x in sets for y in sets if x < y}
    return {"sizes": {k: len(v) for k, v in sets.items()}, "common": sorted(common), "jaccard": pairs}


def summarise(screens: list[Screen], answers: list[Answer], alpha: float = ALPHA) -> dict:
    """Everything the results page and the study print: per attacker the screen's findings and the searches'
    answers, the transfer matrix, the overlap."""
    per = {}
    for s in screens:
        q, df, p = heterogeneity(s)
        cs = confidence_set(s, alpha)
        best = s.best()
        per[s.red_agent] = {
            "followable": len(s.followable()), "best": best,
            "best_mean": s.mean[best] if best else math.nan, "best_ci95": s.ci95[best] if best else math.nan,
            "confidence_set": cs, "q": q, "df": df, "p_workflow_matters": p,
            "answers": [a.__dict__ | {"confidence_set": list(a.confidence_set),
                                      "answer_in_screen_set": a.workflow in cs,
                                      "screen_mean": s.mean[a.workflow]}
                        for a in answers if a.red_agent == s.red_agent]}
    matrix = {a.red_agent: {b.red_agent: transfer(a, b, alpha) for b in screens if b is not a} for a in screens}
    shared = overlap(screens)
    sets = [set(a["confidence_set"]) for a in per.values()]
    # the workflows no attacker's 95% set excludes: a choice that cannot be shown worse than the best anywhere
    shared["in_every_set"] = sorted(set.intersection(*sets)) if sets else []
    shared["jaccard"] = {f"{x}|{y}": v for (x, y), v in shared["jaccard"].items()}   # JSON keys are strings
    return {"alpha": alpha, "attackers": per, "transfer": matrix, "overlap": shared}
