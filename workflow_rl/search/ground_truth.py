"""The ground truth: every listed workflow trained K times, and scoring a search's answer with it.

Every listed workflow trained K times under one protocol (``search --exhaustive --seeds-per-workflow K``), written as
``ground_truth.csv``; and reading such a file back to score a search's answer (simple regret, rank).

A ground truth only scores a search run under the same *protocol*, the settings that define what a workflow's value
means (PROTOCOL_FIELDS): a file for another red agent, post-gate budget, threshold or evaluation length is refused.
"""
from __future__ import annotations

import csv
import math
from pathlib import Path

from workflow_rl.checks import MAX_EPISODE_LENGTH, check_int
from workflow_rl.envs.names import parse_red_agent
from workflow_rl.rl.evaluate import across_seeds
from workflow_rl.search.records import Record
from workflow_rl.search.stats import ALPHA, distinguishable_from_best, workflow_effect
from workflow_rl.checks import check_return
from workflow_rl.workflow import Workflow

PROTOCOL_FIELDS = ("red_agent", "n_envs", "episode_length", "post_gate_episodes", "compliance_threshold",
                   "eval_length")
"""The settings that define a workflow's value (its training protocol and evaluation); every row carries them."""

COLUMNS = ["workflow", "mean", "ci95", "std", "n_seeds", "seed_values", "compliance", "eval_compliance",
           "episodes", "gate_episodes", "status", "eligible", "rank", "p_value", "distinguishable_from_best",
           *PROTOCOL_FIELDS]


def protocol(cfg) -> dict:
    """The protocol of a search's settings, in the form the CSV holds."""
    t = cfg.train
    return {"red_agent": parse_red_agent(t.red_agent), "n_envs": t.n_envs, "episode_length": t.episode_length,
            "post_gate_episodes": t.post_gate_episodes, "compliance_threshold": t.compliance_threshold,
            "eval_length": cfg.eval_length}


def ground_truth_rows(records: list[Record], cfg) -> list[dict]:
    """One row per trained workflow, best first: mean and 95% t interval over seeds, and, among eligible workflows
    (``Record.eligible``), whether each is distinguishable from the best (Holm-corrected one-sided Welch t-tests
    against the best; ``stats``). Ineligible workflows are not ranked or tested."""
    threshold = cfg.train.compliance_threshold
    ok = {r.workflow: r.seed_rewards or [r.observed_reward] for r in records if r.eligible(threshold)}
    tests, best = {}, None
    if ok:
        best, tests = distinguishable_from_best(ok, ALPHA)
    means = sorted((sum(v) / len(v) for v in ok.values()), reverse=True)
    rows = []
    for r in records:
        values = r.seed_rewards or [r.observed_reward]
        spread = across_seeds(values)
        decision, p = tests.get(r.workflow, (None, None))
        rows.append({
            "workflow": r.workflow, "mean": spread["mean"], "ci95": spread["ci95"], "std": spread["std"],
            "n_seeds": len(values), "seed_values": ";".join(f"{v:.4f}" for v in values),
            "compliance": r.compliance, "eval_compliance": r.eval_compliance, "episodes": r.episodes_trained,
            "gate_episodes": ";".join("" if g is None else str(g) for g in r.gate_episodes), "status": r.status,
            "eligible": r.workflow in ok, "rank": means.index(spread["mean"]) + 1 if r.workflow in ok else None,
            "p_value": p, "distinguishable_from_best": (False if r.workflow == best else decision),
            **protocol(cfg)})
    return sorted(rows, key=lambda row: (not row["eligible"], -row["mean"]))


def write_ground_truth(records: list[Record], cfg, path: Path) -> list[dict]:
    rows = ground_truth_rows(records, cfg)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        for row in rows:
            w.writerow({k: "" if v is None else v for k, v in row.items()})
    return rows


def eligible_seeds(rows: list[dict]) -> dict[str, list[float]]:
    """{workflow: its per-seed values} of the eligible rows, from rows as written (``ground_truth_rows``) or as read
    back from the CSV (``eligible`` then the string "True")."""
    return {r["workflow"]: [float(v) for v in str(r["seed_values"]).split(";")]
            for r in rows if r["eligible"] in (True, "True")}


def eligible_effect(rows: list[dict]) -> dict | None:
    """:func:`stats.workflow_effect` over the eligible rows' seed values: whether eligible workflows differ at all."""
    return workflow_effect(eligible_seeds(rows))


def best_set_statement(rows: list[dict], effect: dict | None = None) -> str:
    """Which workflows cannot be told apart from the best, and how that was decided; then whether the eligible
    workflows differ at all (one-way ANOVA, ``effect`` = :func:`eligible_effect` of ``rows``, computed here unless
    the caller has it), which says whether "the best" means anything."""
    ok = [r for r in rows if r["eligible"]]
    if not ok:
        return "No workflow is eligible (compliant in training and evaluation): there is no best."
    top = [r["workflow"] for r in ok if not r["distinguishable_from_best"]]
    untested = sum(r["p_value"] in (None, "") and r["workflow"] != ok[0]["workflow"] for r in ok)
    text = (f"Best: {ok[0]['workflow']}. Not distinguishable from it at family-wise 95% (Holm-corrected one-sided "
            f"Welch t-tests against the best over {len(ok)} eligible workflows): {len(top)} workflow(s)"
            + (f", {untested} of them untestable (fewer than 2 seeds)" if untested else "") + f": {', '.join(top)}.")
    e = effect if effect is not None else eligible_effect(rows)
    if e is not None:
        verdict = ("they differ" if e["p"] < ALPHA else
                   "no evidence that they differ at all: the choice among eligible workflows is within seed noise")
        text += (f" Do the {e['workflows']} eligible workflows differ? One-way ANOVA over {e['seeds']} seed values: "
                 f"F {e['f']:.2f}, p {e['p']:.3g}, {verdict}; spread of their true values {e['between_sd']:.2f} "
                 f"(95% upper bound {e['between_sd_upper']:.2f}) against a seed sd of {e['within_sd']:.2f}.")
    return text


def load_ground_truth(path: str | Path, cfg) -> dict[str, dict]:
    """{workflow codes: row} of a ground_truth.csv written under ``cfg``'s protocol; a ValueError naming the
    problem (missing, malformed, another protocol) otherwise."""
    table, rows = read_ground_truth(path)
    want = {k: str(v) for k, v in protocol(cfg).items()}
    for k, v in want.items():
        got = {r[k] for r in rows}
        if got != {v} and not _same_number(got, v):
            raise ValueError(f"--ground-truth {path} was measured with {k} {', '.join(sorted(got))}, this search "
                             f"uses {v}: use a ground truth of the same protocol")
    return table


def read_ground_truth(path: str | Path) -> tuple[dict[str, dict], list[dict]]:
    """({workflow codes: row}, the rows as read) of a ground_truth.csv, whatever its protocol (``mean`` a float,
    ``eligible`` a bool in the table); a ValueError naming the problem (missing, malformed) otherwise."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"--ground-truth {path}: no such file (write one with `workflow-rl search --exhaustive "
                         "--seeds-per-workflow 3 --out DIR`: DIR/ground_truth.csv)")
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:   # a spreadsheet's byte-order mark is no column name
            rows = list(csv.DictReader(f))
        missing = [c for c in COLUMNS if rows and c not in rows[0]]
        if not rows or missing:
            raise ValueError("no rows" if not rows else f"missing columns {', '.join(missing)}")
        table = {}
        for r in rows:
            wf = Workflow.parse(r["workflow"]).codes   # a named order (critical_first) is its codes' row
            r = {**r, "workflow": wf}
            if wf in table:
                raise ValueError(f"workflow {wf} has two rows")
            mean = float(r["mean"])
            if r["eligible"] not in ("True", "False"):
                raise ValueError(f"workflow {wf} has eligible {r['eligible']!r}, not True or False")
            if r["eligible"] == "True" and not all(map(math.isfinite, [mean, *eligible_seeds([r])[wf]])):
                raise ValueError(f"eligible workflow {wf} has mean {r['mean']} and seed values {r['seed_values']}: "
                                 "an eligible row's values are finite numbers")
            # and returns that its episodes can score (an edited -1e308 made the regret and the mean difference
            # to an evaluation Infinity, which summary.json and workflows.json then held)
            steps = (MAX_EPISODE_LENGTH if r.get("eval_length") in ("", None) else   # no length: the longest
                     check_int("eval_length", int(r["eval_length"]), 1, MAX_EPISODE_LENGTH))
            for v in [mean] * math.isfinite(mean) + (eligible_seeds([r])[wf] if r["eligible"] == "True" else []):
                check_return(f"workflow {wf}'s return", v, steps)
            table[wf] = {**r, "mean": mean, "eligible": r["eligible"] == "True"}
    except (ValueError, TypeError, csv.Error, UnicodeDecodeError) as e:   # TypeError: a row short of fields
        raise ValueError(f"--ground-truth {path} is not a ground_truth.csv ({e})") from None
    return table, rows


def _same_number(got: set[str], want: str) -> bool:
    try:
        return len(got) == 1 and math.isclose(float(next(iter(got))), float(want))
    except ValueError:
        return False


def score_answer(table: dict[str, dict], answer: str | None) -> dict:
    """The answer's simple regret (ground-truth best eligible mean minus the answer's ground-truth mean), its rank
    among the eligible workflows, whether it is in the ground truth's top set and whether the ground truth holds it
    eligible at all. Regret and rank are None where the answer is not in the file (never guessed) and where the
    ground truth holds it ineligible (a search that answered it broke the constraint its answer must meet: counted
    apart, ``answer_eligible_in_ground_truth`` False, rather than scored by a return a compliant policy does not
    reach)."""
    ok = [r for r in table.values() if r["eligible"]]
    row = table.get(answer) if answer else None
    if row is None or not ok:
        return {"regret": None, "answer_rank": None, "answer_in_top_set": None, "ground_truth_best": None,
                "answer_eligible_in_ground_truth": None}
    best = max(ok, key=lambda r: r["mean"])
    if not row["eligible"]:
        return {"regret": None, "answer_rank": None, "answer_in_top_set": False,
                "ground_truth_best": best["workflow"], "answer_eligible_in_ground_truth": False}
    return {"regret": best["mean"] - row["mean"], "answer_rank": 1 + sum(r["mean"] > row["mean"] for r in ok),
            "answer_in_top_set": row["distinguishable_from_best"] != "True", "ground_truth_best": best["workflow"],
            "answer_eligible_in_ground_truth": True}
