"""Measure the planner (issue M) on the native engine: planned vs greedy paired by episode, the belief's accuracy,
and the time per decision.

    python benchmarks/planning.py compare --red B_lineAgent --episodes 100 --out benchmarks/results/planning
    python benchmarks/planning.py belief --red RedMeanderAgent --episodes 50 --out benchmarks/results/planning
    python benchmarks/planning.py truth --red RedMeanderAgent --episodes 24 --episode-seed 99 --horizon 10

``compare`` plays the evaluation episodes of ``workflow-rl evaluate`` (the same fixed seed; one round of
``--episodes`` envs, so episode i is the CLI's episode i at that count) once greedy and once planned, and reports
each cell (30/50/100) with its 95% interval and the paired difference. ``belief`` runs the greedy agent with a
belief beside it and records, per step, the belief's probability of each host's true red access (mean over hosts)
and whether some particle holds the true access of every host. Run with ``OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1``:
the time per decision is then one core's.
"""
from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np
import torch

from workflow_rl.envs.belief import ParticleBelief
from workflow_rl.envs.factory import make_vector_env, parse_red_agent
from workflow_rl.rl import pretrained
from workflow_rl.rl.evaluate import CAGE2_WINNER, EVAL_SEED, play_cells
from workflow_rl.rl.planner import PlanConfig, agent_acting, play_true_state
from workflow_rl.workflow import parse_workflow_arg

LENGTHS = (30, 50, 100)


def play(act, red: str, episodes: int, seed: int, lengths=LENGTHS, workflow=None) -> tuple[dict, dict]:
    """Per length, (returns, compliant fixes, violating fixes) of each evaluation episode, as ``workflow-rl evaluate``
    plays them (``rl.evaluate.play_cells``: ``act`` one function for every length, or {length: function}), and
    seconds per decision: wall clock and this process's CPU time (one thread: on a shared machine the CPU time is
    what one core spends)."""
    env = make_vector_env(episodes, red, engine="native", episode_length=max(lengths), seed=seed)
    rank = torch.as_tensor(workflow.rank if workflow else np.arange(5))
    decisions = episodes * (sum(lengths) if isinstance(act, dict) else max(lengths))
    t0, c0 = time.perf_counter(), time.process_time()
    cells = play_cells(env, act, seed, list(lengths), workflow is not None, rank, "cpu")
    return cells, {"wall": (time.perf_counter() - t0) / decisions, "cpu": (time.process_time() - c0) / decisions}


def ci(x: np.ndarray) -> tuple[float, float]:
    return float(x.mean()), float(1.96 * x.std(ddof=1) / math.sqrt(len(x))) if len(x) > 1 else float("nan")


def compare(args) -> dict:
    agent, workflow = pretrained.load(args.agent)
    workflow = parse_workflow_arg(args.workflow) if args.workflow else workflow
    plan = PlanConfig(args.particles, args.top_k, args.horizon, args.rollouts, args.fix_candidates,
                      min_gain=args.min_gain, value_scale=args.value_scale).validate()
    red = parse_red_agent(args.red)
    lengths = sorted(set(args.lengths))
    greedy, t_g = play(agent_acting(agent, workflow), red, args.episodes, args.episode_seed, lengths, workflow)
    planned_act = (agent_acting(agent, workflow, plan, args.seed) if args.length_unknown else
                   {L: agent_acting(agent, workflow, plan, args.seed, episode_length=L) for L in lengths})
    planned, t_p = play(planned_act, red, args.episodes, args.episode_seed, lengths, workflow)
    cells = []
    for L in lengths:
        g, p = greedy[L][0], planned[L][0]
        cells.append({"length": L, "greedy": ci(g), "planned": ci(p), "difference": ci(p - g),
                      "winner": CAGE2_WINNER.get((red, L)), "planned_better_episodes": int((p > g).sum()),
                      "planned_worse_episodes": int((p < g).sum()),
                      "compliance": {m: _compliance(*r[L][1:]) for m, r in (("greedy", greedy), ("planned", planned))}
                      if workflow else None})
    return {"red_agent": red, "agent": args.agent, "workflow": workflow.names if workflow else None,
            "episodes": args.episodes, "episode_seed": args.episode_seed, "plan": vars(plan), "seed": args.seed,
            "length_known": not args.length_unknown, "seconds_per_decision": {"greedy": t_g, "planned": t_p},
            "cells": cells, "greedy_returns": greedy[max(lengths)][0].tolist(),
            "planned_returns": planned[max(lengths)][0].tolist(),
            "cell_returns": {m: {str(L): r[L][0].tolist() for L in lengths}
                             for m, r in (("greedy", greedy), ("planned", planned))}}


def _compliance(compliant: np.ndarray, violations: np.ndarray) -> float | None:
    """The share of compliant fixes over all episodes (None: no fix counted), as ``evaluate`` reports it."""
    total = float(compliant.sum() + violations.sum())
    return float(compliant.sum()) / total if total else None


def belief(args) -> dict:
    agent, workflow = pretrained.load(args.agent)
    plan = PlanConfig(particles=args.particles)
    red = parse_red_agent(args.red)
    act = agent_acting(agent, workflow)
    n, steps = args.episodes, max(LENGTHS)
    env = make_vector_env(n, red, engine="native", episode_length=steps, seed=args.episode_seed)
    obs, _ = env.reset(seed=args.episode_seed)
    beliefs = [ParticleBelief(plan.belief(), args.seed + i) for i in range(n)]
    p_true = np.zeros((n, steps))
    held = np.zeros((n, steps), bool)
    red_right = np.zeros((n, steps))
    kind = {"B_lineAgent": 1, "RedMeanderAgent": 2, "SleepAgent": 0}[red]
    t0 = time.perf_counter()
    for t in range(steps):
        a = act(torch.as_tensor(obs), t).numpy()
        obs, _, _, trunc, info = env.step(a)
        see = np.where(trunc[:, None], info.get("final_obs", obs), obs)
        truth = np.where(trunc[:, None], info["final_info"]["red_access"], info["red_access"]) if trunc.any() \
            else info["red_access"]
        for i, b in enumerate(beliefs):
            b.update(int(a[i]), see[i])
            p_true[i, t] = b.access_probs()[np.arange(13), truth[i]].mean()
            held[i, t] = (b.access == truth[i]).all(1).any()
            red_right[i, t] = b.red_posterior()[kind]
    took = time.perf_counter() - t0
    return {"red_agent": red, "episodes": n, "episode_seed": args.episode_seed, "particles": args.particles,
            "seconds_per_update": took / (n * steps),
            "reseeds_per_episode": float(np.mean([b.reseeds for b in beliefs])),
            "p_true_access_by_step": p_true.mean(0).tolist(), "p_true_access_mean": float(p_true.mean()),
            "truth_held_by_step": held.mean(0).tolist(), "truth_held_mean": float(held.mean()),
            "p_true_red_agent_by_step": red_right.mean(0).tolist()}


def truth(args) -> dict:
    """The planner given the true state (one particle) vs greedy, paired on the same native episodes."""
    agent, workflow = pretrained.load(args.agent)
    plan = PlanConfig(1, args.top_k, args.horizon, args.rollouts, min_gain=args.min_gain,
                      value_scale=args.value_scale).validate()
    red = parse_red_agent(args.red)
    kind = {"SleepAgent": 0, "B_lineAgent": 1, "RedMeanderAgent": 2}[red]
    greedy, _ = play(agent_acting(agent, workflow), red, args.episodes, args.episode_seed)
    t0 = time.perf_counter()
    planned = play_true_state(agent, workflow, plan, kind, args.episodes, max(LENGTHS), args.episode_seed, args.seed)
    g = greedy[max(LENGTHS)][0]
    return {"red_agent": red, "episodes": args.episodes, "plan": vars(plan), "greedy": ci(g),
            "planned_true_state": ci(planned), "difference": ci(planned - g),
            "seconds_per_decision": (time.perf_counter() - t0) / (args.episodes * max(LENGTHS))}


def figure(args) -> dict:
    """The belief's accuracy over the 100 steps from the ``belief`` results in ``--out`` (one line per red agent)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(args.out)
    fig, ax = plt.subplots(figsize=(7, 3.6))
    drawn = []
    for f in sorted(out.glob("belief_*.json")):
        r = json.loads(f.read_text())
        steps = np.arange(1, len(r["p_true_access_by_step"]) + 1)
        ax.plot(steps, r["p_true_access_by_step"], label=f"{r['red_agent']}: P(true access), mean over hosts")
        ax.plot(steps, r["truth_held_by_step"], "--", label=f"{r['red_agent']}: a particle holds every host's")
        drawn.append(f.name)
    ax.set_xlabel("step")
    ax.set_ylim(0.8, 1.005)
    ax.set_title(f"Belief accuracy, {args.particles} particles, greedy pretrained:cage2 (native engine)", fontsize=9)
    ax.legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    fig.savefig(out / "belief_accuracy.png", dpi=110)
    return {"figure": str(out / "belief_accuracy.png"), "from": drawn}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("what", choices=["compare", "belief", "truth", "figure"])
    p.add_argument("--agent", default="pretrained:cage2")
    p.add_argument("--red", default="B_lineAgent")
    p.add_argument("--episodes", type=int, default=100)
    p.add_argument("--episode-seed", type=int, default=EVAL_SEED)
    p.add_argument("--seed", type=int, default=0)
    d = PlanConfig()
    p.add_argument("--particles", type=int, default=d.particles)
    p.add_argument("--top-k", type=int, default=d.top_k)
    p.add_argument("--horizon", type=int, default=d.horizon)
    p.add_argument("--rollouts", type=int, default=d.rollouts)
    p.add_argument("--fix-candidates", type=int, default=d.fix_candidates)
    p.add_argument("--value-scale", type=float, default=d.value_scale)
    p.add_argument("--min-gain", type=float, default=d.min_gain)
    p.add_argument("--lengths", nargs="+", type=int, default=list(LENGTHS),
                   help="compare: the episode lengths (cells) to play")
    p.add_argument("--length-unknown", action="store_true",
                   help="compare: do not tell the planner the episode's length (one 100-step run serves every cell)")
    p.add_argument("--workflow", default=None, help="compare: act and count compliance under this workflow "
                                                    "(default: the agent's own, if any)")
    p.add_argument("--out", default=None)
    p.add_argument("--tag", default="")
    args = p.parse_args()
    torch.set_num_threads(1)
    if args.what == "figure":
        print(figure(args))
        return
    res = {"compare": compare, "belief": belief, "truth": truth}[args.what](args)
    res["command"] = "python benchmarks/planning.py " + " ".join(__import__("sys").argv[1:])
    short = {k: v for k, v in res.items() if not k.endswith("_returns") and not k.endswith("_by_step")}
    print(json.dumps(short, indent=1))
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        name = f"{args.what}_{res['red_agent']}_{args.episodes}{args.tag}.json"
        (out / name).write_text(json.dumps(res, indent=1))
        print("wrote", out / name)


if __name__ == "__main__":
    main()
