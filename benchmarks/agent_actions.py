"""What a trained agent does, per red agent: its action mix and how often it places a decoy it already placed.

Blue's observation (52 bits: per host, activity and compromise) does not say which decoys blue has placed, so a
policy cannot tell a new decoy from a repeat, which does nothing (the decoy's port is taken). This counts, over
``--envs`` native episodes of 100 steps per red agent, greedy and sampled: the share of steps per action kind and
the share of decoy actions that repeat one (same type, same host) already placed in that episode.

    PYTHONPATH=. python benchmarks/agent_actions.py pretrained:cage2 --envs 200

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
from workflow_rl.rl.checkpoint import agent_from_checkpoint, load_checkpoint
from workflow_rl.rl.envstep import TorchStepper
from workflow_rl.rl.evaluate import agent_act
from workflow_rl.sim import tables as T
from workflow_rl.workflow import Workflow

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


def play(act, red: str, envs: int, seed: int) -> np.ndarray:
    """Actions (envs, 100) of ``act`` in ``envs`` native episodes against ``red``."""
    st = TorchStepper(make_vector_env(envs, red, engine="native", episode_length=100, seed=seed), "cpu")
    obs, _ = st.reset(seed=seed)
    out = []
    for t in range(100):
        a = act(obs, t).to(torch.int64)
        out.append(a.numpy().copy())
        obs = st.step(a).obs.clone()
    return np.stack(out, 1)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("agent", help="pretrained:NAME or a checkpoint file")
    p.add_argument("--envs", type=int, default=200, help="episodes per red agent and mode")
    p.add_argument("--red-agents", nargs="+", default=["B_lineAgent", "RedMeanderAgent"])
    p.add_argument("--seed", type=int, default=11)
    a = p.parse_args(argv)
    if a.agent.startswith(pretrained.PREFIX):
        agent, wf = pretrained.load(a.agent)
    else:
        ck = load_checkpoint(a.agent)
        agent, wf = agent_from_checkpoint(ck), Workflow.parse(ck["workflow"]) if ck.get("workflow") else None
    rows = []
    for red in a.red_agents:
        for greedy in (True, False):
            acts = play(agent_act(agent, wf, greedy, torch.Generator().manual_seed(a.seed)), red, a.envs, a.seed)
            rep, tot = repeated_decoys(acts)
            rows.append({"red": red, "mode": "greedy" if greedy else "sampled",
                         **{k: round(float(((acts >= lo) & (acts < hi)).mean()), 3) for k, (lo, hi) in KINDS.items()},
                         "decoys_repeated": round(rep / max(tot, 1), 3),
                         "distinct_decoys_per_episode": round((tot - rep) / a.envs, 2)})
            print(json.dumps(rows[-1]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
