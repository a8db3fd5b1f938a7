"""report.md and its plots for a finished (or partial) workflow search."""
from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np


def _read_csv(path: Path) -> list[dict]:
    if not path.exists():
        return []
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:   # a spreadsheet's byte-order mark is no column name
            return list(csv.DictReader(f))
    except (csv.Error, UnicodeDecodeError) as e:   # a field past csv's size limit, bytes that are not text
        raise ValueError(f"{path} is damaged ({type(e).__name__}: {e}): the search's state and answer are saved; "
                         f"move the file away and `workflow-rl search --resume {path.parent}` writes the report "
                         "again") from None


def _f(x) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def write_report(search, summary: dict) -> Path:
    """report.md and its plots; ``summary``: the search's summary (its answer, confidence set and regret)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from workflow_rl.search.answer import fit_records
    from workflow_rl.search.gp import N_CANDIDATES, posterior
    from workflow_rl.workflow import Workflow, all_workflows

    cfg, out = search.cfg, search.out
    plots = out / "plots"
    plots.mkdir(parents=True, exist_ok=True)
    its = search.state.iterations
    log = _read_csv(out / "training_log.csv")

    # 1. learning and compliance curves over cumulative training episodes, one colour per workflow
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(9, 6.5), sharex=True)
    cum = np.cumsum([_f(r["episodes"]) for r in log]) if log else np.array([])
    groups: dict[str, list[int]] = {}
    for i, r in enumerate(log):
        seed = f" seed {r['seed']}" if r.get("seed") not in (None, "") else ""
        groups.setdefault(f"{r.get('iteration', '?')}: {r['workflow']}{seed}", []).append(i)
    for label, idx in groups.items():
        ax1.plot(cum[idx], [_f(log[i]["env_reward"]) for i in idx], lw=1.2, label=label)
        ax2.plot(cum[idx], [_f(log[i]["compliance"]) for i in idx], lw=1.2)
    ax1.set_ylabel("env return per episode")
    ax2.set_ylabel("batch compliance")
    ax2.axhline(cfg.train.compliance_threshold, color="k", ls="--", lw=0.8)
    ax2.set_xlabel("training episodes (cumulative)")
    if len(groups) <= 12:
        ax1.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(plots / "learning_curves.png", dpi=110)
    plt.close(fig)

    # 2. GP posterior over all 120 workflows, sorted by mean, with the observed points
    gp_png = None
    if len(its) >= 2:
        ws = [Workflow.parse(r.workflow) for r in its]
        y = np.array([r.observed_reward for r in its])
        gp = fit_records(its, cfg.train.seed)
        mu, sd = posterior(gp)
        order = np.argsort(-mu)
        pos = {k: p for p, k in enumerate(order)}
        fig, ax = plt.subplots(figsize=(10, 4))
        ax.fill_between(range(N_CANDIDATES), (mu - 2 * sd)[order], (mu + 2 * sd)[order], alpha=0.25,
                        label="mean ± 2 std")
        ax.plot(range(N_CANDIDATES), mu[order], lw=1.2, label="posterior mean")
        ax.scatter([pos[w.index] for w in ws], y, c="C3", s=18, zorder=3, label="observed")
        ax.set_xlabel("workflows, sorted by posterior mean")
        ax.set_ylabel("evaluated env return")
        ax.set_title(f"GP posterior (kernel {gp.kernel_})", fontsize=8)
        ax.legend(fontsize=8)
        fig.tight_layout()
        gp_png = plots / "gp_posterior.png"
        fig.savefig(gp_png, dpi=110)
        plt.close(fig)
        top = [(all_workflows()[k].codes, mu[k], sd[k]) for k in order[:10]]
    else:
        top = []

    # 3. reward per iteration with the incumbent
    fig, ax = plt.subplots(figsize=(8, 3.5))
    if its:
        x = [r.iteration for r in its]
        y = [r.observed_reward for r in its]
        colors = ["C2" if r.status == "compliant" else "C1" for r in its]
        ax.errorbar(x, y, yerr=[r.observed_ci95 for r in its], fmt="none", ecolor="gray", lw=0.8)
        ax.scatter(x, y, c=colors, zorder=3)
        best_so_far, cur = [], -math.inf
        for r in its:
            if r.status == "compliant":
                cur = max(cur, r.observed_reward)
            best_so_far.append(cur if cur > -math.inf else np.nan)
        ax.step(x, best_so_far, where="post", color="C2", lw=1, label="best compliant so far")
        ax.legend(fontsize=8)
    ax.set_xlabel("iteration")
    ax.set_ylabel("evaluated env return")
    fig.tight_layout()
    fig.savefig(plots / "reward_per_iteration.png", dpi=110)
    plt.close(fig)

    best = search.best()
    lines = [
        "# Workflow search report", "",
        f"Red agent **{cfg.train.red_agent}**, engine {cfg.train.engine}, {cfg.train.n_envs} envs, "
        f"budget {search.state.episodes_used:,} / {cfg.total_episodes:,} training episodes, "
        f"{len(its)} workflows trained, {sum(r.status == 'compliant' for r in its)} compliant"
        + (f", {cfg.batch_slots} at a time in one batch" if cfg.batch_slots > 1 else "") + "."
        + (f" Each workflow trained {cfg.seeds_per_workflow} seeds: its eval return is the mean over seeds "
           "± a 95% Student-t interval across them, and its policy is its best compliant seed's."
           if cfg.seeds_per_workflow > 1 else ""),
        "",
    ]
    if best:
        lines += [f"**Best workflow: {best.workflow}** ({' > '.join(Workflow.parse(best.workflow).names)}), "
                  f"evaluated return {best.observed_reward:.2f} ± {best.observed_ci95:.2f} "
                  f"({summary['best_interval_source']}; {cfg.eval_episodes} held-out episodes of {cfg.eval_length} "
                  f"steps), status {best.status}, eligible {summary['best_is_eligible']}. Policy: "
                  "`best_policy.pt`.", "",
                  f"**95% confidence set** ({summary['confidence_set_size']} of {N_CANDIDATES} workflows cannot be "
                  f"excluded from being best): {', '.join(summary['confidence_set'])}.", "",
                  f"How: {summary['confidence_set_method']}.", ""]
    if "universal" in summary:
        u = summary["universal"]
        lines += [f"**From a universal agent** ({u['agent']}): evaluated under all 120 workflows (low-fidelity "
                  f"observations; {u['universal_eligible']} called eligible), then {u['fine_tuned']} fine-tuned from "
                  f"it; {u['budget_note']}. Eligibility calls: {u['calls_eligible']} eligible, "
                  f"{u['calls_ineligible']} ineligible ({u['calls_from_universal']} from the universal agent's "
                  f"evaluation, the rest from fine-tuning); the confidence set keeps "
                  f"{u['confidence_set_keeps_ineligible']} workflows called ineligible. Per workflow: `screen.csv`. "
                  f"Its screen (the evaluation under all 120): {u.get('screen_source') or 'computed'}; "
                  f"{u.get('wall_note', '')}.",
                  ""]
    if "regret" in summary:
        regret = f"{summary['regret']:.2f}" if summary["regret"] is not None else (
            "n/a (the ground truth holds the answer ineligible)" if summary.get("answer_eligible_in_ground_truth")
            is False else "n/a (the answer is not in the ground truth)")
        lines += [f"Against the ground truth `{summary['ground_truth']}` (best {summary['ground_truth_best']}): "
                  f"simple regret {regret}, rank {summary['answer_rank'] or 'n/a'}, in its top set: "
                  f"{summary['answer_in_top_set']}.", ""]
    if "ground_truth_statement" in summary:
        lines += ["## Ground truth", "", "`ground_truth.csv`: " + summary["ground_truth_statement"], ""]
    lines += ["## Iterations", "", "| it | workflow | why | parent | compliance | eval return | episodes | status |",
              "|---:|---|---|---|---:|---:|---:|---|"]
    for r in its:
        comp = "n/a" if r.compliance is None else f"{r.compliance:.3f}"
        lines.append(f"| {r.iteration} | {r.workflow} | {r.reason} | {r.parent or '-'} | {comp} | "
                     f"{r.observed_reward:.2f} ± {r.observed_ci95:.2f} | {r.episodes_trained} | "
                     f"{r.status} |")
    lines += ["", "## Plots", "", "![learning and compliance curves](plots/learning_curves.png)", ""]
    if gp_png:
        lines += ["![GP posterior over the 120 workflows](plots/gp_posterior.png)", "",
                  "Top workflows by posterior mean:", "", "| workflow | mean | std |", "|---|---:|---:|"]
        lines += [f"| {c} | {m:.2f} | {s:.2f} |" for c, m, s in top]
        lines.append("")
    lines += ["![reward per iteration](plots/reward_per_iteration.png)", ""]
    path = out / "report.md"
    path.write_text("\n".join(lines))
    return path
