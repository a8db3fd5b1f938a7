"""What a trained agent does, per red agent: its action mix and how often it places a decoy it already placed.

Blue's observation (52 bits: per host, activity and compromise) does not say which decoys blue has placed, so a
policy cannot tell a new decoy from a repeat, which does nothing (the decoy's port is taken). This counts, over
``--envs`` native episodes of 100 steps per red agent, greedy and sampled: the share of steps per action kind and
the share of decoy actions that repeat one (same type, same host) already placed in that episode.

    PYTHONPATH=. python benchmarks/studies/agent_actions.py pretrained:universal --envs 200

Results: RESULTS.md (issue I, "What the shipped agent does").
"""
from __future__ import annotations

import argparse
import json
import sys

import numpy as np
import torch

from workflow_rl.rl import pretrained
from workflow_rl.envs.factory import make_vector_env
from workflow_rl.rl.envstep import TorchStepper
from workflow_rl.rl.planning.planner import make_act
from workflow_rl.sim import tables as T

KINDS = {"sleep": (T.A_SLEEP, T.A_MONITOR), "monitor": (T.A_MONITOR, T.A_ANALYSE), "analyse": (T.A_ANALYSE, T.A_REMOVE),
         "remove": (T.A_REMOVE, T.A_DECOY), "decoy": (T.A_DECOY, T.A_RESTORE), "restore": (T.A_RESTORE, T.N_ACTIONS)}
"""Action kinds as index ranges of the 145 CAGE2 actions (``sim.tables``)."""


def repeated_decoys(actions: np.ndarray) -> tuple[int, int]:
    """(decoy actions that repeat one placed earlier in the same episode, all decoy actions); ``actions`` is
    (episodes, steps)."""
    lo, hi = KINDS["decoy"]
    rep = tot = 0
    for row in actions:
        d = row[(row >= lo) & (row < hi)]
        tot += len(d)
        rep += len(d) - len(np.unique(d))
    return rep, tot


STEPS = 100
"""The episode length played here: CAGE2's longest."""


def play(act, red: str, episodes: int, seed: int, engine: str, workers: int) -> dict[str, np.ndarray]:
    """Actions, rewards (episodes, 100) and red access (episodes, 100, 13) of ``act`` on ``engine``: the native
    engine plays every episode at once; CybORG plays them ``workers`` at a time, one process each, back to back
    (episodes reset in the step that ends them, so the same processes go on)."""
    n = episodes if engine == "native" else workers
    opts = {"vectorization": "pipes" if n > 1 else "sync"} if engine == "cyborg" else {}
    env = make_vector_env(n, red, engine=engine, episode_length=STEPS, seed=seed, **opts)
    st = TorchStepper(env, "cpu")
    obs, _ = st.reset(seed=seed)
    rounds = -(-episodes // n)
    a_rows, r_rows, x_rows = [], [], []
    try:
        for t in range(rounds * STEPS):
            a = act(obs, t % STEPS).to(torch.int64)
            out = st.step(a)
            a_rows.append(a.numpy().copy())
            r_rows.append(out.reward.numpy().copy())
            x_rows.append(out.access.numpy().copy())
            obs = out.obs.clone()
            if engine == "cyborg" and t % STEPS == STEPS - 1:
                print(f"cyborg: {(t // STEPS + 1) * n}/{rounds * n} episodes", flush=True)
    finally:
        env.close()

    def episodes_of(rows: list) -> np.ndarray:   # (steps, n, ...) -> (rounds * n, 100, ...)
        x = np.stack(rows).reshape(rounds, STEPS, n, *rows[0].shape[1:])
        return np.moveaxis(x, 2, 1).reshape(rounds * n, STEPS, *rows[0].shape[1:])[:episodes]

    return {"actions": episodes_of(a_rows), "rewards": episodes_of(r_rows), "access": episodes_of(x_rows)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("agent", help="pretrained:NAME or a checkpoint file")
    p.add_argument("--envs", type=int, default=200, help="episodes per red agent and mode")
    p.add_argument("--red-agents", nargs="+", default=["B_lineAgent", "RedMeanderAgent"])
    p.add_argument("--seed", type=int, default=11)
    a = p.parse_args(argv)
    agent, wf = pretrained.load(a.agent)   # a shipped agent or a checkpoint file
    rows = []
    for red in a.red_agents:
        for greedy in (True, False):
            gen = torch.Generator().manual_seed(a.seed)
            acts = play(make_act(agent, workflow=wf, greedy=greedy, generator=gen), red, a.envs, a.seed,
                        "native", 1)["actions"]
            rep, tot = repeated_decoys(acts)
            rows.append({"red": red, "mode": "greedy" if greedy else "sampled",
                         **{k: round(float(((acts >= lo) & (acts < hi)).mean()), 3) for k, (lo, hi) in KINDS.items()},
                         "decoys_repeated": round(rep / max(tot, 1), 3),
                         "distinct_decoys_per_episode": round((tot - rep) / a.envs, 2)})
            print(json.dumps(rows[-1]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
