"""Where a trained agent's return differs between the native engine and real CybORG: the same agent, the same red
agent, ``--episodes`` 100-step episodes on each engine, compared step window by step window (reward per step, the
agent's action mix, red's access per host).

Why: the shipped ``cage2`` scores -56.30 natively and -58.18 on real CybORG (greedy, same protocol), while the
engine matches CybORG for every scripted defender (RESULTS.md, issue K). A trained policy can find behaviour one
engine rewards and the other does not; the step window where the reward gap opens, and what the agent and red do
there on each engine, say which rule to look at.

    WORKFLOW_RL_CAGE2_SCENARIO=... PYTHONPATH=. python benchmarks/engine_gap.py pretrained:cage2 --red bline \\
        --episodes 100 --workers 2 --out runs/engine-gap-bline

Writes OUT/engine_gap.json and OUT/engine_gap.md.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.agent_actions import KINDS  # noqa: E402
from workflow_rl.envs.factory import make_vector_env  # noqa: E402
from workflow_rl.rl import pretrained  # noqa: E402
from workflow_rl.rl.checkpoint import agent_from_checkpoint, load_checkpoint  # noqa: E402
from workflow_rl.rl.envstep import TorchStepper  # noqa: E402
from workflow_rl.rl.evaluate import agent_act  # noqa: E402
from workflow_rl.sim import tables as T  # noqa: E402
from workflow_rl.workflow import Workflow  # noqa: E402

STEPS = 100
WINDOW = 10


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


def windows(x: np.ndarray) -> list[tuple[float, float]]:
    """Per window of 10 steps: mean reward per episode in that window and its 95% half-width."""
    out = []
    for w in range(0, STEPS, WINDOW):
        s = x[:, w:w + WINDOW].sum(1)
        out.append((float(s.mean()), float(1.96 * s.std(ddof=1) / np.sqrt(len(s)))))
    return out


def kind_shares(actions: np.ndarray, w: int) -> dict[str, float]:
    a = actions[:, w:w + WINDOW]
    return {k: float(((a >= lo) & (a < hi)).mean()) for k, (lo, hi) in KINDS.items()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("agent", help="pretrained:NAME or a checkpoint file")
    p.add_argument("--red", default="bline")
    p.add_argument("--episodes", type=int, default=100)
    p.add_argument("--workers", type=int, default=2, help="CybORG worker processes")
    p.add_argument("--greedy", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--seed", type=int, default=5)
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    if a.agent.startswith(pretrained.PREFIX):
        agent, wf = pretrained.load(a.agent)
    else:
        ck = load_checkpoint(a.agent)
        agent, wf = agent_from_checkpoint(ck), Workflow.parse(ck["workflow"]) if ck.get("workflow") else None
    runs = {eng: play(agent_act(agent, wf, a.greedy, torch.Generator().manual_seed(a.seed)), a.red, a.episodes,
                      a.seed, eng, a.workers) for eng in ("native", "cyborg")}
    res = {"agent": a.agent, "red": a.red, "episodes": a.episodes, "greedy": a.greedy,
           "return": {e: float(r["rewards"].sum(1).mean()) for e, r in runs.items()}, "windows": []}
    for i, w in enumerate(range(0, STEPS, WINDOW)):
        row = {"steps": f"{w + 1}-{w + WINDOW}"}
        for e, r in runs.items():
            row[f"{e}_reward"], row[f"{e}_ci"] = windows(r["rewards"])[i]
            row[f"{e}_kinds"] = kind_shares(r["actions"], w)
        res["windows"].append(row)
    res["access_late"] = {e: {T.HOSTS[h]: float((r["access"][:, 80:, h] > 0).mean()) for h in range(len(T.HOSTS))}
                          for e, r in runs.items()}
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "engine_gap.json").write_text(json.dumps(res, indent=1))
    lines = [f"`{a.agent}` vs {a.red}, {a.episodes} episodes per engine, {'greedy' if a.greedy else 'sampled'}: "
             f"return native {res['return']['native']:.2f}, CybORG {res['return']['cyborg']:.2f}", "",
             "| steps | native reward | CybORG reward | gap | native remove/decoy/restore/analyse | CybORG ditto |",
             "|---|---:|---:|---:|---|---|"]
    for row in res["windows"]:
        kn, kc = row["native_kinds"], row["cyborg_kinds"]
        fmt = lambda k: "/".join(f"{k[x]:.2f}" for x in ("remove", "decoy", "restore", "analyse"))  # noqa: E731
        lines.append(f"| {row['steps']} | {row['native_reward']:.2f} ± {row['native_ci']:.2f} | "
                     f"{row['cyborg_reward']:.2f} ± {row['cyborg_ci']:.2f} | "
                     f"{row['cyborg_reward'] - row['native_reward']:+.2f} | {fmt(kn)} | {fmt(kc)} |")
    lines += ["", "| host | red access, steps 81-100, native | CybORG |", "|---|---:|---:|"]
    for h in T.HOSTS:
        lines.append(f"| {h} | {res['access_late']['native'][h]:.3f} | {res['access_late']['cyborg'][h]:.3f} |")
    (out / "engine_gap.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
