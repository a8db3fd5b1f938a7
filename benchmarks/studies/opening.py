"""How much a shipped agent's play depends on its opening (issue M): the agent with its own first moves against the
same agent made to play others (``Agent.opening``, what ``train --opening`` trains with), paired on the same native
episodes, per CAGE2 cell.

    PYTHONPATH=. python benchmarks/studies/opening.py sweep --agent pretrained:universal --red B_lineAgent --length 30 \\
        --episodes 1000 --out benchmarks/results/opening          # every first action in place of the agent's own
    PYTHONPATH=. python benchmarks/studies/opening.py forced --agent pretrained:universal --opening 51 116 55 \\
        --episodes 2000 --out benchmarks/results/opening          # one given opening, the six cells

Why: a policy fine-tuned after a fixed opening gains in every cell (RESULTS.md, issue M), while the same opening
played by `cage2` without training loses: the policy's later play is tied to its own first moves, so openings are
compared by training with them, and this script measures how tight the tie is.
Writes OUT/opening_sweep_RED_L.json / OUT/opening_forced_NAME.json and prints a table.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from workflow_rl.rl import pretrained  # noqa: E402
from workflow_rl.rl.evaluate import EVAL_SEED, across_seeds, evaluate_cells  # noqa: E402
from workflow_rl.rl.planning.planner import make_act  # noqa: E402
from workflow_rl.sim import tables as T  # noqa: E402

LENGTHS = (30, 50, 100)
RED = ("B_lineAgent", "RedMeanderAgent")


def returns(spec: str, opening: tuple[int, ...] | None, reds, lengths, episodes: int, seed: int) -> dict:
    """{(red, length): per-episode returns} of agent ``spec`` greedy, with ``opening`` in place of its own (None:
    its own), on the evaluation episodes of ``seed``."""
    agent, workflow = pretrained.load(spec)
    if opening is not None:
        agent.opening = tuple(opening)
    cells = evaluate_cells(make_act(agent, workflow=workflow), list(reds), list(lengths), episodes, seed=seed)
    return {(c.red_agent, c.length): c.played.returns for c in cells}


def paired(a: np.ndarray, b: np.ndarray) -> dict:
    """b - a over the same episodes: mean and Student-t 95% interval, as ``workflow-rl compare`` gives them."""
    d = b - a
    diff = across_seeds(d.tolist())
    return {"difference": diff["mean"], "ci95": diff["ci95"], "better": int((d > 1e-9).sum()),
            "worse": int((d < -1e-9).sum())}


def sweep(args) -> dict:
    """Every action at step ``--step`` (the agent's own at the steps before), against the agent's own opening."""
    cell = (args.red, args.length)
    own = returns(args.agent, None, [args.red], [args.length], args.episodes, args.episode_seed)[cell]
    prefix = tuple(args.prefix)
    rows = []
    for a in range(T.N_ACTIONS):
        r = returns(args.agent, (*prefix, a), [args.red], [args.length], args.episodes, args.episode_seed)
        rows.append({"action": a, "name": T.blue_action_name(a), "mean": float(r[cell].mean()),
                     **paired(own, r[cell])})
    rows.sort(key=lambda x: -x["mean"])
    return {"agent": args.agent, "red_agent": args.red, "length": args.length, "episodes": args.episodes,
            "episode_seed": args.episode_seed, "prefix": list(prefix), "own_mean": float(own.mean()),
            "rows": rows}


def forced(args) -> dict:
    own = returns(args.agent, None, RED, LENGTHS, args.episodes, args.episode_seed)
    new = returns(args.agent, tuple(args.opening), RED, LENGTHS, args.episodes, args.episode_seed)
    return {"agent": args.agent, "opening": args.opening, "names": [T.blue_action_name(a) for a in args.opening],
            "episodes": args.episodes, "episode_seed": args.episode_seed,
            "cells": [{"red_agent": red, "length": L, "own": float(own[(red, L)].mean()),
                       "forced": float(new[(red, L)].mean()), **paired(own[(red, L)], new[(red, L)])}
                      for red in RED for L in LENGTHS]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("what", choices=["sweep", "forced"])
    p.add_argument("--agent", default="pretrained:universal")
    p.add_argument("--red", default="B_lineAgent", choices=RED)
    p.add_argument("--length", type=int, default=30, choices=LENGTHS)
    p.add_argument("--step", type=int, default=0, help="sweep: the step whose action is swept (0-based)")
    p.add_argument("--prefix", type=int, nargs="*", default=None,
                   help="sweep: the actions before --step (default: the agent's greedy choices are not fixed, so "
                        "--step must be 0 without a prefix)")
    p.add_argument("--opening", type=int, nargs="+", default=[51, 116, 55])
    p.add_argument("--episodes", type=int, default=1000)
    p.add_argument("--episode-seed", type=int, default=EVAL_SEED)
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    if args.what == "sweep":
        args.prefix = args.prefix or []
        if len(args.prefix) != args.step:
            p.error(f"--step {args.step} needs --prefix with {args.step} actions (the moves before it)")
    if not 1 <= args.episodes <= 1_000_000 or any(not 0 <= a < T.N_ACTIONS for a in args.opening + (args.prefix or [])):
        p.error("--episodes must be in 1..1000000 and actions in 0..144")
    res = sweep(args) if args.what == "sweep" else forced(args)
    if args.what == "sweep":
        print(f"{args.agent}, {args.red} {args.length}: own opening {res['own_mean']:.3f}")
        for r in res["rows"][:12]:
            print(f"  {r['name']:28s} {r['mean']:8.3f}  {r['difference']:+.3f} +- {r['ci95']:.3f}")
        name = f"opening_sweep_{args.red}_{args.length}_step{args.step}.json"
    else:
        for c in res["cells"]:
            print(f"  {c['red_agent']:16s} {c['length']:3d}  own {c['own']:7.3f}  forced {c['forced']:7.3f}  "
                  f"{c['difference']:+.3f} +- {c['ci95']:.3f}")
        name = f"opening_forced_{'_'.join(map(str, args.opening))}.json"
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / name).write_text(json.dumps(res, indent=1))
        print(f"wrote {Path(args.out) / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
