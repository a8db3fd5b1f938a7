"""Train one proposed workflow and turn its trained policies into a search :class:`Record`.

Kept apart from the search loop so every executor (in this process, batched, on a Ray worker) calls the same
functions without importing the loop that calls them.
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from workflow_rl.rl.checkpoint import load_checkpoint
from workflow_rl.rl.pretrained import starting_weights
from workflow_rl.rl.evaluate import EVAL_SEED, across_seeds, evaluate_policy
from workflow_rl.rl.planning.planner import make_act
from workflow_rl.rl.schedule import passed_gate
from workflow_rl.rl.trainer import Trainer
from workflow_rl.search.config import SearchConfig
from workflow_rl.search.records import Proposal, Record, SearchInterrupted  # noqa: F401 - re-exported
from workflow_rl.workflow import Workflow


def initial_weights(cfg: SearchConfig, out: Path, p: Proposal) -> dict | None:
    """The weights a proposed workflow starts from: its parent's, else the search's init checkpoint, else None."""
    if p.parent_checkpoint:
        return load_checkpoint(out / p.parent_checkpoint, cfg.train.device)["agent"]
    if cfg.universal_fraction is not None:   # the search's own universal agent (``search.universal``)
        from workflow_rl.search.universal import initial_state

        return initial_state(cfg, out)
    if cfg.init_checkpoint:
        return starting_weights(cfg.init_checkpoint, cfg.train.ppo, cfg.train.device)
    return None


def train_and_evaluate(cfg: SearchConfig, out: str | Path, p: Proposal, progress: bool = False) -> Record:
    """Train the proposed workflow (warm-started from its parent, resumed from its own checkpoint if one exists)
    and evaluate it on the held-out seeds; returns its record. Runs in the driver or in a Ray worker."""
    out = Path(out)
    run_dir = out / p.run_dir
    t0, started = time.perf_counter(), time.time()
    trainer = Trainer(cfg.train_config(Workflow.parse(p.workflow), p.budget), run_dir,
                      init_agent_state=initial_weights(cfg, out, p), progress=progress,
                      log_prefix={"iteration": p.iteration})
    ck = run_dir / "checkpoints" / "latest.pt"
    if ck.is_file():
        trainer.restore(load_checkpoint(ck, cfg.train.device))
    summary = trainer.run()
    if summary["stop_reason"] == "interrupted":
        raise SearchInterrupted(str(ck))
    return evaluate_record(cfg, p, [trainer.agent], [summary], t0, started)


def seed_status(cfg: SearchConfig, p: Proposal, stop_reason: str | None) -> str:
    """Why one seed's training ended, as a record status."""
    if passed_gate(stop_reason):
        return "compliant"
    if stop_reason == "budget" and p.budget < cfg.workflow_cap:
        return "budget_cut"   # the search budget, not the workflow's own cap, ended it
    return "not_compliant"


def _mean_or_none(values) -> float | None:
    v = [x for x in values if x is not None]
    return float(np.mean(v)) if v else None


def evaluate_record(cfg: SearchConfig, p: Proposal, agents: list, summaries: list[dict], t0: float,
                    started: float, checkpoints: list[str] | None = None) -> Record:
    """Evaluate a trained workflow's policies (one per seed) on the held-out seeds and build its search record
    (``t0``: the ``perf_counter`` at which its training started; ``started``: the same moment as a timestamp).

    One seed: its evaluation. Several: the observation is the mean over seeds with a Student-t interval across
    them; the status is compliant only if every seed complied; the kept checkpoint is the best compliant seed's
    (the best seed's if none complied)."""
    wf = Workflow.parse(p.workflow)
    device = cfg.train.device
    evs = [evaluate_policy(make_act(a, workflow=wf), cfg.train.red_agent, cfg.eval_length, cfg.eval_episodes,
                           engine="native", seed=EVAL_SEED, workflow=wf, device=device) for a in agents]
    statuses = [seed_status(cfg, p, s["stop_reason"]) for s in summaries]
    status = ("compliant" if all(x == "compliant" for x in statuses) else
              "budget_cut" if "budget_cut" in statuses else "not_compliant")
    checkpoints = checkpoints or [str(Path(p.run_dir) / "checkpoints" / "latest.pt")]
    pool = [i for i, x in enumerate(statuses) if x == "compliant"] or list(range(len(evs)))
    keep = max(pool, key=lambda i: evs[i].mean)
    if len(evs) == 1:
        reward, ci = evs[0].mean, evs[0].ci95
    else:
        spread = across_seeds([e.mean for e in evs])
        reward, ci = spread["mean"], spread["ci95"]
    return Record(
        iteration=p.iteration, workflow=wf.codes, reason=p.reason, ucb_score=p.ucb, posterior_mean=p.mean,
        posterior_std=p.std, beta=p.beta, parent=p.parent, observed_reward=reward, observed_ci95=ci,
        compliance=_mean_or_none(s["compliance"] for s in summaries),
        eval_compliance=_mean_or_none(e.compliance for e in evs),
        episodes_trained=sum(s["episodes"] for s in summaries), status=status,
        wall_time=time.perf_counter() - t0, started_at=started, finished_at=time.time(), run_dir=p.run_dir,
        checkpoint=checkpoints[keep], seed_rewards=[e.mean for e in evs], seed_status=statuses,
        seed_eval_compliance=[e.compliance for e in evs], gate_episodes=[s.get("gate_episodes") for s in summaries])
