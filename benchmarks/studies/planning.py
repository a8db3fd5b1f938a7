"""Measure the planner (issue M) on the native engine: planned vs greedy paired by episode, the belief's accuracy,
and the time per decision.

    python benchmarks/studies/planning.py compare --red B_lineAgent --episodes 100 --out benchmarks/results/planning
    python benchmarks/studies/planning.py belief --red RedMeanderAgent --episodes 50 --out benchmarks/results/planning
    python benchmarks/studies/planning.py truth --red RedMeanderAgent --episodes 24 --episode-seed 99 --horizon 10
    python benchmarks/studies/planning.py calibration --red RedMeanderAgent --episodes 20 --episode-seed 4242
    python benchmarks/studies/planning.py oracle --red RedMeanderAgent --episodes 100 --out DIR

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
import sys
import time
from pathlib import Path

import numpy as np
import torch

from workflow_rl.checks import fail
from workflow_rl.rl.planning.belief import ParticleBelief
from workflow_rl.envs.factory import make_vector_env, parse_red_agent
from workflow_rl.rl import pretrained
from workflow_rl.rl.evaluate import CAGE2_WINNER, EVAL_SEED, play_cells
from workflow_rl.rl.planning.planner import PlanConfig, make_act, play_true_state
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
                      min_gain=args.min_gain, value_scale=args.value_scale,
                      max_rollouts=args.max_rollouts, analyse_candidates=args.analyse_candidates).validate()
    red = parse_red_agent(args.red)
    lengths = sorted(set(args.lengths))
    greedy, t_g = play(make_act(agent, workflow=workflow), red, args.episodes, args.episode_seed, lengths, workflow)
    planned_act = (make_act(agent, plan, args.seed, workflow) if args.length_unknown else
                   {L: make_act(agent, plan, args.seed, workflow, episode_length=L) for L in lengths})
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
    act = make_act(agent, workflow=workflow)
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


def calibration(args) -> dict:
    """The belief's calibration beside the greedy agent: over every step, host and access level (user, privileged)
    of the evaluation episodes, the belief's probability of that level binned against how often it was red's true
    access; the first bin (probability exactly 0) counts the truth the belief has lost."""
    plan = PlanConfig(particles=args.particles)
    red = parse_red_agent(args.red)
    act = make_act(args.agent)
    env = make_vector_env(args.episodes, red, engine="native", episode_length=max(LENGTHS), seed=args.episode_seed)
    obs, _ = env.reset(seed=args.episode_seed)
    beliefs = [ParticleBelief(plan.belief(), args.seed + i) for i in range(args.episodes)]
    p, y = [], []
    for t in range(max(LENGTHS)):
        a = act(torch.as_tensor(obs), t).numpy()
        obs, _, _, _, info = env.step(a)
        for i, b in enumerate(beliefs):
            b.update(int(a[i]), obs[i])
            probs = b.access_probs()
            for level in (1, 2):
                p.append(probs[:, level])
                y.append(info["red_access"][i] == level)
    p, y = np.concatenate(p), np.concatenate(y)
    edges = [0.0, 1e-9, 0.05, 0.2, 0.4, 0.6, 0.8, 0.95, 1 - 1e-9, 1.01]
    bins = [{"from": lo, "to": hi, "count": int(m.sum()), "mean_probability": float(p[m].mean()),
             "truth": int(y[m].sum())} for lo, hi in zip(edges, edges[1:]) for m in [(p >= lo) & (p < hi)] if m.any()]
    return {"red_agent": red, "episodes": args.episodes, "episode_seed": args.episode_seed,
            "particles": args.particles, "bins": bins}


def truth(args) -> dict:
    """The planner given the true state (one particle) vs greedy, paired on the same native episodes; each cell
    (``--lengths``) its own episodes of that length. The true-state planner is never told the episode's length
    (``play_true_state``: rollouts play their full horizon), so its L-step cell is what a length-unknown run's
    first L steps score; the per-episode returns (``cell_returns``) pair it with a ``compare`` run's."""
    agent, workflow = pretrained.load(args.agent)
    plan = PlanConfig(1, args.top_k, args.horizon, args.rollouts, min_gain=args.min_gain,
                      value_scale=args.value_scale, max_rollouts=args.max_rollouts).validate()
    red = parse_red_agent(args.red)
    kind = {"SleepAgent": 0, "B_lineAgent": 1, "RedMeanderAgent": 2}[red]
    greedy, _ = play(make_act(agent, workflow=workflow), red, args.episodes, args.episode_seed, lengths=args.lengths)
    cells, returns, t0 = {}, {}, time.perf_counter()
    for length in args.lengths:   # each cell its own episodes of that length, as the CLI's planned cells
        planned = play_true_state(agent, workflow, plan, kind, args.episodes, length, args.episode_seed, args.seed)
        g = greedy[length][0]
        cells[length] = {"greedy": ci(g), "planned_true_state": ci(planned), "difference": ci(planned - g)}
        returns[length] = (g.tolist(), planned.tolist())
    return {"red_agent": red, "agent": args.agent, "episodes": args.episodes, "episode_seed": args.episode_seed,
            "plan": vars(plan), "seed": args.seed, "length_known": False, **cells[max(args.lengths)],
            "cells": cells, "seconds_per_decision": (time.perf_counter() - t0) / (args.episodes * sum(args.lengths)),
            "cell_returns": {m: {str(L): r[i] for L, r in returns.items()}
                             for i, m in enumerate(("greedy", "planned_true_state"))}}


def oracle(args) -> dict:
    """The planner on its belief told where red is: at each decision the particles whose red access (per host: none,
    user, privileged) differs from the truth's lose their weight (the true state is the one particle where none is
    left). Paired with ``truth`` and ``compare --length-unknown`` on the same episodes (``--episode-seed``), it splits
    the true-state planner's gain over greedy into knowing where red is and knowing the rest (red's sweeps and
    plan, the hosts' exploit history). One 100-step run, length unknown; its running returns are the cells.

    ``--told files`` tells it instead which hosts hold a red file (``SimState.red_file``: what Analyse shows, a
    non-SSH exploit or an escalation since the host's last Restore), every host every step, at no cost: the most
    that information-gathering actions (Analyse) could tell the planner, so the most a search that values them
    could gain."""
    from workflow_rl.envs.native_env import NativeVectorEnv
    from workflow_rl.rl.planning.planner import Planner
    from workflow_rl.sim import native as sim

    agent, workflow = pretrained.load(args.agent)
    plan = PlanConfig(args.particles, args.top_k, args.horizon, args.rollouts, args.fix_candidates,
                      min_gain=args.min_gain, value_scale=args.value_scale, max_rollouts=args.max_rollouts,
                      analyse_candidates=args.analyse_candidates).validate()
    red = parse_red_agent(args.red)
    kind = {"SleepAgent": 0, "B_lineAgent": 1, "RedMeanderAgent": 2}[red]
    n, lengths = args.episodes, sorted(set(args.lengths))
    planner = Planner(agent, workflow, plan, args.seed)
    actor = planner.actor
    env = NativeVectorEnv(n, kind, max(lengths), seed=args.episode_seed)
    obs, info = env.reset(seed=args.episode_seed)
    access, mem, ret = info["red_access"], actor.reset(n), np.zeros(n)
    beliefs = [ParticleBelief(plan.belief(), i) for i in range(n)]
    running, decisions, fallback, kept, last, t0 = {}, 0, 0, [], None, time.process_time()
    for t in range(max(lengths)):
        if t:
            for i, b in enumerate(beliefs):
                b.update(int(last[i]), obs[i])
        x = actor.inputs(torch.as_tensor(obs), mem)
        forced = actor.forced(t)
        if forced is not None:
            a = np.full(n, forced, np.int64)
        else:
            truth, acts = env.sim_state(), []
            for i, b in enumerate(beliefs):
                m = None if mem is None else mem[i:i + 1]
                w = b.weights * (b.access == access[i] if args.told == "access"
                                 else b.state.red_file == truth.red_file[i]).all(1)
                decisions += 1
                kept.append(float(w.sum() / b.weights.sum()))
                if w.sum() > 0:
                    acts.append(planner.choose(b.state, b.access, w, x[i:i + 1], m, (i, t)).action)
                else:
                    fallback += 1
                    acts.append(planner.choose(sim.take_state(truth, [i]), access[i:i + 1], np.ones(1), x[i:i + 1],
                                               m, (i, t)).action)
            a = np.asarray(acts, np.int64)
        actor.took(mem, torch.as_tensor(a))
        last = a
        obs, r, _, _, info = env.step(a)
        access, ret = info["red_access"], ret + r
        if t + 1 in lengths:
            running[t + 1] = ret.copy()
    return {"red_agent": red, "agent": args.agent, "episodes": n, "episode_seed": args.episode_seed,
            "plan": vars(plan), "seed": args.seed, "length_known": False, "told": args.told,
            "cells": {L: {f"planned_{args.told}_oracle": ci(running[L])} for L in lengths},
            "decisions": decisions, "truth_fallback_decisions": fallback,
            "belief_weight_kept": {"mean": float(np.mean(kept)), "median": float(np.median(kept))},
            "cpu_seconds_per_decision": (time.process_time() - t0) / max(decisions, 1),
            "cell_returns": {f"planned_{args.told}_oracle": {str(L): running[L].tolist() for L in lengths}}}


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
    ax.set_title(f"Belief accuracy, {args.particles} particles, greedy pretrained:universal (native engine)", fontsize=9)
    ax.legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    fig.savefig(out / "belief_accuracy.png", dpi=110)
    return {"figure": str(out / "belief_accuracy.png"), "from": drawn}


def gap(args) -> dict:
    """A planned agent under a workflow (first of ``--files``) against the unconstrained planned agent (second):
    two ``compare`` results on the same episodes, paired by episode, per common length; and the first's compliance.
    The issue's target: compliance >= 0.95 and within 2 points of the unconstrained planner."""
    if not args.files:
        fail("gap compares two compare results: give --files CONSTRAINED FREE")
    constrained, free = (json.loads(Path(f).read_text()) for f in args.files)
    for k in ("red_agent", "episode_seed"):
        if constrained[k] != free[k]:
            fail(f"the two results are not the same episodes ({k}: {constrained[k]} vs {free[k]}): compare them "
                 "on the same --red and --episode-seed")
    n = min(constrained["episodes"], free["episodes"])
    cells = []
    for L in sorted(set(constrained["cell_returns"]["planned"]) & set(free["cell_returns"]["planned"]), key=int):
        a = np.asarray(constrained["cell_returns"]["planned"][L][:n])
        b = np.asarray(free["cell_returns"]["planned"][L][:n])
        cell = next(c for c in constrained["cells"] if c["length"] == int(L))
        cells.append({"length": int(L), "constrained_planned": ci(a), "free_planned": ci(b),
                      "difference": ci(a - b), "compliance": cell["compliance"]})
    return {"red_agent": constrained["red_agent"], "episodes": n, "constrained": constrained["agent"],
            "workflow": constrained["workflow"], "free": free["agent"], "files": args.files, "cells": cells}


UNSET = {"fix_candidates": 0}
"""The settings a result written before they existed ran with (its ``plan`` lacks them)."""


def _settings(plan: dict) -> str:
    """What a compare run's planner settings change from today's defaults (``default``: nothing)."""
    d = vars(PlanConfig())
    changed = [f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}" for k, v in {**UNSET, **plan}.items()
               if d.get(k) != v]
    return ", ".join(changed) or "default"


def budget(args) -> dict:
    """The score against the planning budget from the length-known ``compare`` results of ``--agent`` in
    ``--out`` (no workflow; a settings' cells may come from several files, e.g. one per length): per settings, CPU
    ms per decision, each cell's paired difference planned - greedy on the first ``--episodes`` episodes of each
    red agent (or as many as ran), and the six-cell sum where all six were played; ``budget{tag}.md`` and
    ``budget{tag}.png``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out, n = Path(args.out), args.episodes
    out.mkdir(parents=True, exist_ok=True)
    runs: dict[str, dict] = {}
    for f in sorted(out.glob("compare_*.json")):
        r = json.loads(f.read_text())
        if not r.get("length_known") or r.get("agent") != args.agent or r.get("workflow"):
            continue
        row = runs.setdefault(_settings(r["plan"]), {"ms": {}, "cells": {}, "files": []})
        steps = r["episodes"] * sum(map(int, r["cell_returns"]["planned"]))   # its planned decisions
        row["ms"].setdefault(r["red_agent"], []).append((1000 * r["seconds_per_decision"]["planned"]["cpu"], steps))
        row["files"].append(f.name)
        for L in map(int, r["cell_returns"]["planned"]):
            g = np.asarray(r["cell_returns"]["greedy"][str(L)][:n])
            p = np.asarray(r["cell_returns"]["planned"][str(L)][:n])
            row["cells"][(r["red_agent"], L)] = {"episodes": len(g), "greedy": ci(g), "planned": ci(p),
                                                 "difference": ci(p - g)}
    for row in runs.values():   # a run split by length (one file per cell): its files' times, per decision
        row["ms"] = {red: float(np.average([m for m, _ in t], weights=[w for _, w in t]))
                     for red, t in row["ms"].items()}
    reds = ("B_lineAgent", "RedMeanderAgent")
    order = sorted(runs, key=lambda k: float(np.mean(list(runs[k]["ms"].values()))))
    short = {"B_lineAgent": "B_line", "RedMeanderAgent": "Meander"}
    head = "| settings | CPU ms / decision | " + " | ".join(f"{short[r]} {L}" for r in reds for L in LENGTHS) \
        + " | six-cell sum |"
    lines = [f"Planned - greedy, paired, the first {n} evaluation episodes per red agent or as many as ran (the "
             "count beside each cell; 95% intervals); six-cell sum: planned (greedy) on those episodes, winner "
             f"{sum(CAGE2_WINNER.values()):.2f}.", "", head,
             "|---" + "|---:" * (2 + len(reds) * len(LENGTHS)) + "|"]
    rows = []
    for k in order:
        row = runs[k]
        cells = [row["cells"].get((r, L)) for r in reds for L in LENGTHS]
        six = (sum(c["planned"][0] for c in cells), sum(c["greedy"][0] for c in cells)) if all(cells) else None
        ms = float(np.mean(list(row["ms"].values())))
        lines.append(f"| {k} | {ms:.1f} | " + " | ".join(f"{c['difference'][0]:+.2f} ± {c['difference'][1]:.2f} "
                                                          f"(n={c['episodes']})" if c else "" for c in cells)
                     + f" | {f'{six[0]:.2f} ({six[1]:.2f})' if six else ''} |")
        rows.append({"settings": k, "cpu_ms": ms, "six_cell": six, "files": row["files"],
                     "cells": {f"{r} {L}": c for (r, L), c in row["cells"].items()}})
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    for L, mark in zip(LENGTHS, "os^"):
        pts = [(runs[k]["ms"]["RedMeanderAgent"], runs[k]["cells"][("RedMeanderAgent", L)]["difference"], k)
               for k in order if ("RedMeanderAgent", L) in runs[k]["cells"]]
        left.errorbar([p[0] for p in pts], [p[1][0] for p in pts], [p[1][1] for p in pts], fmt=mark, capsize=3,
                      label=f"Meander {L}")
        if L == max(LENGTHS):
            for x, (y, _), k in pts:
                left.annotate(k, (x, y), fontsize=6, xytext=(3, 3), textcoords="offset points")
    left.axhline(0, color="grey", lw=0.8)
    left.set_xlabel("CPU ms per decision (one core, belief included)")
    left.set_ylabel("planned - greedy (paired)")
    left.set_title(f"Meander cells, first {n} episodes", fontsize=9)
    left.legend(fontsize=7)
    six_pts = [(r["cpu_ms"], r["six_cell"][0], r["settings"]) for r in rows if r["six_cell"]]
    six_pts = [(0.0, next(r["six_cell"][1] for r in rows if r["six_cell"]), "greedy")] + six_pts if six_pts else []
    right.plot([p[0] for p in six_pts], [p[1] for p in six_pts], "o-")
    for x, y, k in six_pts:
        right.annotate(k, (x, y), fontsize=6, xytext=(3, 3), textcoords="offset points")
    right.axhline(sum(CAGE2_WINNER.values()), color="red", ls="--", lw=0.8, label="CAGE2 winner")
    right.set_xlabel("CPU ms per decision")
    right.set_ylabel("six-cell sum")
    right.set_title(f"Six cells (B_line and Meander, first {n} episodes each)", fontsize=9)
    right.legend(fontsize=7)
    fig.suptitle("pretrained:universal planned on the native engine, episode length known", fontsize=9)
    fig.tight_layout()
    (out / f"budget{args.tag}.md").write_text("\n".join(lines) + "\n")
    fig.savefig(out / f"budget{args.tag}.png", dpi=110)
    print("\n".join(lines))
    return {"table": str(out / f"budget{args.tag}.md"), "figure": str(out / f"budget{args.tag}.png"), "rows": rows}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("what", choices=["compare", "belief", "calibration", "truth", "oracle", "figure", "gap", "budget"])
    p.add_argument("--agent", default="pretrained:universal")
    p.add_argument("--red", default="B_lineAgent")
    p.add_argument("--episodes", type=int, default=100)
    p.add_argument("--episode-seed", type=int, default=EVAL_SEED)
    p.add_argument("--seed", type=int, default=0)
    d = PlanConfig()
    p.add_argument("--particles", type=int, default=d.particles)
    p.add_argument("--top-k", type=int, default=d.top_k)
    p.add_argument("--horizon", type=int, default=d.horizon)
    p.add_argument("--rollouts", type=int, default=d.rollouts)
    p.add_argument("--max-rollouts", type=int, default=d.max_rollouts)
    p.add_argument("--fix-candidates", type=int, default=d.fix_candidates)
    p.add_argument("--analyse-candidates", type=int, default=d.analyse_candidates)
    p.add_argument("--value-scale", type=float, default=d.value_scale)
    p.add_argument("--min-gain", type=float, default=d.min_gain)
    p.add_argument("--lengths", nargs="+", type=int, default=list(LENGTHS),
                   help="compare, truth: the episode lengths (cells) to play")
    p.add_argument("--told", choices=["access", "files"], default="access",
                   help="oracle: tell the planner red's access per host, or which hosts hold a red file (Analyse)")
    p.add_argument("--length-unknown", action="store_true",
                   help="compare: do not tell the planner the episode's length (one 100-step run serves every cell)")
    p.add_argument("--workflow", default=None, help="compare: act and count compliance under this workflow "
                                                    "(default: the agent's own, if any)")
    p.add_argument("--files", nargs=2, metavar=("CONSTRAINED", "FREE"),
                   help="gap: two compare results, the agent under its workflow and the unconstrained one")
    p.add_argument("--out", default=None)
    p.add_argument("--tag", default="")
    args = p.parse_args()
    torch.set_num_threads(1)
    if args.what in ("figure", "budget"):
        res = {"figure": figure, "budget": budget}[args.what](args)
        print({k: v for k, v in res.items() if k != "rows"})
        return
    res = {"compare": compare, "belief": belief, "calibration": calibration, "truth": truth, "oracle": oracle,
           "gap": gap}[args.what](args)
    res["command"] = "python benchmarks/studies/planning.py " + " ".join(sys.argv[1:])
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
