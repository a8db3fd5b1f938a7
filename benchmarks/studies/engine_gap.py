"""Where a trained agent's return differs between the native engine and real CybORG: the same agent, the same red
agent, ``--episodes`` 100-step episodes on each engine, compared step window by step window (reward per step, the
agent's action mix, red's access per host).

Why: the shipped ``cage2`` scores -56.30 natively and -58.18 on real CybORG (greedy, same protocol), while the
engine matches CybORG for every scripted defender (RESULTS.md, issue K). A trained policy can find behaviour one
engine rewards and the other does not; the step window where the reward gap opens, and what the agent and red do
there on each engine, say which rule to look at.

    WORKFLOW_RL_CAGE2_SCENARIO=... PYTHONPATH=. python benchmarks/studies/engine_gap.py pretrained:universal --red bline \\
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

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from benchmarks.studies.agent_actions import KINDS, STEPS, play  # noqa: E402
from workflow_rl.rl import pretrained  # noqa: E402
from workflow_rl.rl.planning.planner import make_act  # noqa: E402
from workflow_rl.sim import tables as T  # noqa: E402

WINDOW = 10


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
    agent, wf = pretrained.load(a.agent)   # a shipped agent or a checkpoint file
    runs = {eng: play(make_act(agent, workflow=wf, greedy=a.greedy, generator=torch.Generator().manual_seed(a.seed)),
                      a.red, a.episodes, a.seed, eng, a.workers) for eng in ("native", "cyborg")}
    res = {"agent": a.agent, "red": a.red, "episodes": a.episodes, "greedy": a.greedy,
           "return": {e: float(r["rewards"].sum(1).mean()) for e, r in runs.items()}, "windows": []}
    per_window = {e: windows(r["rewards"]) for e, r in runs.items()}
    for i, w in enumerate(range(0, STEPS, WINDOW)):
        row = {"steps": f"{w + 1}-{w + WINDOW}"}
        for e, r in runs.items():
            row[f"{e}_reward"], row[f"{e}_ci"] = per_window[e][i]
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
