"""The belief's fit along greedy-played episodes: at which step (if any) the planner's fallback would reject its model.

Why greedy play: the fallback's question is whether the belief's prior explains what blue sees, which does not
depend on who chose blue's actions; greedy episodes are cheap on real CybORG (a planned one is minutes on the
2-core box), so the false-rejection check against B_line and Meander can run there. Each episode follows a
:class:`ParticleBelief` (the planner's defaults: 1024 particles, prior ``--prior``) until its fit falls below
``--min-fit`` (the planner's default), as the planned ``act`` stops following it there.

    python benchmarks/results/planning/fallback/fit.py --engine cyborg --red B_lineAgent RedMeanderAgent \
        --episodes 10 --out benchmarks/results/planning/fallback/fit_cyborg_in_prior.json
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np

from workflow_rl.rl.planning.belief import BeliefConfig, ParticleBelief
from workflow_rl.rl.planning.planner import PlanConfig, make_act
from workflow_rl.sim import attackers


def episodes(engine: str, red: str, n: int, steps: int, prior: str, min_fit: float):
    """(step of rejection or None, lowest fit seen, re-seeds) per episode."""
    if engine == "cyborg":
        from workflow_rl.envs.cyborg import CybORGEnv

        env = CybORGEnv(red, episode_length=steps, seed=7)
    else:
        from workflow_rl.envs.native_env import NativeVectorEnv

        env = None
    out = []
    for e in range(n):
        act = make_act("pretrained:universal", None, workflow="none")
        if env is None:
            native = NativeVectorEnv(1, attackers.kind_of(red), steps, seed=5000 + e)
            obs, _ = native.reset(seed=5000 + e)
            obs = obs[0]
        else:
            obs, _ = env.reset(seed=5000 + e)
        belief = ParticleBelief(BeliefConfig(PlanConfig().particles, prior), seed=e)
        rejected, low = None, 1.0
        for t in range(steps - 1):   # the last step's observation is never planned on
            a = act(obs, t)
            if env is None:
                o, *_ = native.step(np.array([a]))
                obs = o[0]
            else:
                obs, *_ = env.step(a)
            belief.update(a, obs)
            low = min(low, belief.fit)
            if belief.fit < min_fit:
                rejected = t + 1   # the planned act's step that rejects it
                break
        out.append({"rejected_at": rejected, "lowest_fit": low, "reseeds": belief.reseeds})
    if env is not None:
        env.close()
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--engine", choices=("native", "cyborg"), default="native")
    p.add_argument("--red", nargs="+", required=True)
    p.add_argument("--episodes", type=int, default=10)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--prior", default=PlanConfig().red_agent)
    p.add_argument("--min-fit", type=float, default=PlanConfig().min_fit)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    result = {"engine": args.engine, "prior": args.prior, "min_fit": args.min_fit, "steps": args.steps, "red": {}}
    for red in args.red:
        start = time.time()
        rows = episodes(args.engine, red, args.episodes, args.steps, args.prior, args.min_fit)
        result["red"][red] = rows
        print(f"{red}: rejected at {[r['rejected_at'] for r in rows]}, lowest fit "
              f"{min(r['lowest_fit'] for r in rows):.2e}, {time.time() - start:.0f} s", flush=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
