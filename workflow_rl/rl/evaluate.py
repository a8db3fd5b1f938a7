"""Held-out evaluation on the CAGE2 protocol: fixed seeds, fresh episodes of 30/50/100 steps against each red agent,
mean and 95% confidence interval of the blue (environment-only) return, and workflow compliance of the fixes."""
from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass
from typing import Callable

import numpy as np
import torch

from workflow_rl.envs.factory import make_vector_env, parse_red_agent
from workflow_rl.rl.compliance import ComplianceTracker
from workflow_rl.rl.envstep import TorchStepper
from workflow_rl.rl.ppo import WORKFLOW_DIM
from workflow_rl.sim import tables
from workflow_rl.workflow import Workflow

# act(obs (N,52) float tensor, t) -> actions (N,) int64 tensor
ActFn = Callable[[torch.Tensor, int], torch.Tensor]
EVAL_SEED = 20_240_601   # held out: training seeds never reach this stream (see evaluate())


@dataclass
class EvalResult:
    red_agent: str
    length: int
    episodes: int
    mean: float
    std: float
    ci95: float
    compliance: float | None
    fixes: int


def evaluate_policy(act: ActFn, red_agent: str, length: int = 100, episodes: int = 1000, engine: str = "native",
                    seed: int = EVAL_SEED, workflow: Workflow | None = None, device: str = "cpu",
                    batch: int = 4096, **engine_options) -> EvalResult:
    """Run ``episodes`` fresh episodes of ``length`` steps (in batches of up to ``batch`` envs)."""
    red = parse_red_agent(red_agent)
    if engine == "cyborg":   # one process per env: as many as there are cores, not one per episode
        batch = min(batch, max(1, os.cpu_count() or 1))
    returns, comp, viol = [], 0.0, 0.0
    done_eps = 0
    round_ = 0
    rank = torch.as_tensor(workflow.rank if workflow else np.arange(5), device=device)
    while done_eps < episodes:
        n = min(batch, episodes - done_eps)
        env = make_vector_env(n, red, engine=engine, episode_length=length, seed=seed + 7919 * round_,
                              device=device, **engine_options)
        stepper = TorchStepper(env, device)
        obs, access = stepper.reset()
        tracker = ComplianceTracker(n, device)
        ret = torch.zeros(n, dtype=torch.float64, device=device)
        for t in range(length):
            a = act(obs, t).to(torch.int64)
            out = stepper.step(a)
            if workflow is not None:
                tracker.step(a, access, rank, 0.0)
            ret += out.reward.to(torch.float64)
            obs, access = out.obs.clone(), out.access.clone()
        counts = tracker.finish(torch.ones(n, dtype=torch.bool, device=device))
        comp += counts.compliant.sum().item()
        viol += counts.violations.sum().item()
        returns.append(ret.cpu().numpy())
        env.close()
        done_eps += n
        round_ += 1
    r = np.concatenate(returns)
    std = float(r.std(ddof=1)) if len(r) > 1 else 0.0
    return EvalResult(red, length, len(r), float(r.mean()), std, 1.96 * std / math.sqrt(len(r)),
                      (comp / (comp + viol)) if workflow is not None and comp + viol > 0 else None, int(comp + viol))


# ----------------------------------------------------------------------------------------------------- baselines
def agent_act(agent, workflow: Workflow | None, greedy: bool, generator: torch.Generator | None = None) -> ActFn:
    """Acting function of a trained agent under a workflow (zeros for an unconditioned agent)."""
    enc = torch.as_tensor(workflow.encode() if workflow else np.zeros(WORKFLOW_DIM, np.float32))

    def act(obs: torch.Tensor, t: int) -> torch.Tensor:
        x = torch.cat([obs, enc.to(obs.device).expand(obs.shape[0], WORKFLOW_DIM)], 1)
        with torch.no_grad():
            return agent.act(x, generator, greedy=greedy)[0]

    return act


def scripted_act(name: str, seed: int = 0) -> ActFn:
    """A scripted policy from :mod:`workflow_rl.policies` as an acting function."""
    from workflow_rl.policies import POLICIES

    policy, rng = POLICIES[name], np.random.default_rng(seed)

    def act(obs: torch.Tensor, t: int) -> torch.Tensor:
        return torch.as_tensor(policy(t, obs.cpu().numpy(), rng), device=obs.device)

    return act


def greedy_workflow_act(workflow: Workflow) -> ActFn:
    """The origin system's greedy workflow heuristic, on what blue can see: Restore the visibly compromised host
    (Compromised = User or Privileged) whose unit type ranks first in the workflow (lowest host index on ties),
    otherwise Sleep. User0 is skipped: its foothold cannot be cleared."""
    host_rank = torch.as_tensor(workflow.host_rank())

    def act(obs: torch.Tensor, t: int) -> torch.Tensor:
        bits = obs.reshape(obs.shape[0], tables.N_HOSTS, 4) > 0.5
        flagged = bits[..., 3]
        flagged[:, tables.USER0] = False
        score = torch.where(flagged, host_rank.to(obs.device) * tables.N_HOSTS + torch.arange(tables.N_HOSTS,
                                                                                       device=obs.device), 10_000)
        h = score.argmin(1)
        return torch.where(flagged.any(1), tables.A_RESTORE + h, torch.zeros_like(h))

    return act


def across_seeds(values: list[float]) -> dict:
    """Mean, sample std and 95% Student-t interval half-width of per-seed results (the seeds are the samples; the
    half-width is NaN for one seed)."""
    from scipy import stats

    v = np.asarray(values, float)
    std = float(v.std(ddof=1)) if len(v) > 1 else 0.0
    half = float(stats.t.ppf(0.975, len(v) - 1) * std / np.sqrt(len(v))) if len(v) > 1 else float("nan")
    return {"n": len(v), "mean": float(v.mean()), "std": std, "ci95": half, "values": v.tolist()}


def result_dict(r: EvalResult) -> dict:
    return asdict(r)
