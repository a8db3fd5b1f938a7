"""Where each agent's points go, per attacker: the parts of its return (Restores paid, hosts red held, Impact) and
its action mix, on the episodes an evaluation of the same seed plays (``workflow_rl.rl.behaviour``).

    python benchmarks/studies/behaviour.py universal=pretrained:universal \\
        hopper=benchmarks/results/robust/agents/hopper.pt --red-agents UserHopper B_line --episodes 500 \\
        --seed 777 --out benchmarks/results/robust/behaviour.json

Greedy, unconstrained (``--workflow none``), native engine. ``make results`` renders the file into docs/results.md.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from workflow_rl.files import atomic_write
from workflow_rl.rl.behaviour import profile, summary
from workflow_rl.rl.planning.planner import make_act


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("agents", nargs="+", help="NAME=SPEC: a name for the table and a checkpoint or pretrained:NAME")
    p.add_argument("--red-agents", nargs="+", default=["UserHopper", "DelayedB_line", "B_line", "Meander"])
    p.add_argument("--episodes", type=int, default=500)
    p.add_argument("--length", type=int, default=100)
    p.add_argument("--seed", type=int, default=777)
    p.add_argument("--out", type=Path, required=True)
    a = p.parse_args(argv)
    out = {"command": "python benchmarks/studies/behaviour.py " + " ".join(argv or sys.argv[1:]),
           "engine": "native", "mode": "greedy", "workflow": "none", "agents": {}}
    for item in a.agents:
        name, _, spec = item.partition("=")
        out["agents"][name] = {"spec": spec, "red_agents": {}}
        for red in a.red_agents:
            s = summary(profile(make_act(spec, workflow="none"), red, a.episodes, a.length, a.seed))
            out["agents"][name]["red_agents"][red] = s
            print(f"{name} vs {red}: return {s['return']['mean']:.2f}, parts "
                  + ", ".join(f"{k} {v['mean']:.2f}" for k, v in s["parts"].items()), flush=True)
    with atomic_write(a.out, "w") as f:
        f.write(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
