"""``workflow-rl`` command line. Every bad input ends in one ``error: ...`` line naming the fix (exit status 2)."""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, no usage dump
        self.exit(2, f"error: {message} (see `{self.prog} --help`)\n")


def _positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {v}")
    return v


# ----------------------------------------------------------------------------------------------------------- demo
def cmd_demo(args) -> int:
    """Scripted defender on native envs against B_line and Meander: returns at 30/50/100 steps and throughput."""
    from workflow_rl import make_vector_env
    from workflow_rl.policies import POLICIES

    if args.policy not in POLICIES:
        raise ValueError(f"unknown policy {args.policy!r}: use one of {', '.join(POLICIES)}")
    policy = POLICIES[args.policy]
    from workflow_rl import parse_red_agent

    reds = [parse_red_agent(r) for r in args.red_agents]
    rng = np.random.default_rng(args.seed)
    print(f"native engine, {args.n_envs} envs, defender '{args.policy}', {args.episodes} episodes per red agent")
    print(f"{'red agent':16s} {'30 steps':>18s} {'50 steps':>18s} {'100 steps':>18s} {'env-steps/s':>12s}")
    for red in reds:
        env = make_vector_env(args.n_envs, red, seed=args.seed, copy=False)
        obs, _ = env.reset()
        rounds = -(-args.episodes // args.n_envs)
        totals = {30: [], 50: [], 100: []}
        stepped, t_env = 0, 0.0
        for _ in range(rounds):
            ret = np.zeros(args.n_envs)
            for t in range(100):
                act = policy(t, obs, rng)
                t0 = time.perf_counter()
                obs, r, _, _, _ = env.step(act)
                t_env += time.perf_counter() - t0
                stepped += args.n_envs
                ret += r
                if t + 1 in totals:
                    totals[t + 1].append(ret.copy())
        cells = []
        for length in (30, 50, 100):
            x = np.concatenate(totals[length])[: args.episodes]
            cells.append(f"{x.mean():9.2f} ± {x.std(ddof=1) / np.sqrt(len(x)):5.2f}")
        print(f"{red:16s} {cells[0]:>18s} {cells[1]:>18s} {cells[2]:>18s} {stepped / t_env:12,.0f}")
        env.close()
    print("(mean ± standard error of the blue return; real CybORG reference values are in tests/data)")
    return 0


# ---------------------------------------------------------------------------------------------------- cyborg-setup
def cmd_cyborg_setup(args) -> int:
    from workflow_rl.envs.cyborg import install_scenario, package_scenario_dir

    path = install_scenario(args.scenario)
    print(f"CybORG Scenario2 data ready: {path}")
    print(f"(csle-cyborg reads its scenarios from {package_scenario_dir()})")
    return 0


# ------------------------------------------------------------------------------------------------------------ main
def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="workflow-rl", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    d = sub.add_parser("demo", help="scripted defender on native envs vs B_line and Meander (returns, speed)")
    d.add_argument("--n-envs", type=_positive_int, default=4096)
    d.add_argument("--episodes", type=_positive_int, default=8192, help="episodes per red agent")
    d.add_argument("--policy", default="restore_compromised")
    d.add_argument("--red-agents", nargs="+", default=["B_lineAgent", "RedMeanderAgent"])
    d.add_argument("--seed", type=int, default=0)
    d.set_defaults(func=cmd_demo)

    c = sub.add_parser("cyborg-setup", help="install/check CybORG's Scenario2 data for the cyborg engine")
    c.add_argument("--scenario", default=None,
                   help="folder with Scenario2.yaml and images/ (default: $WORKFLOW_RL_CAGE2_SCENARIO)")
    c.set_defaults(func=cmd_cyborg_setup)
    return p


def main(argv: list[str] | None = None) -> int:
    from workflow_rl.envs.cyborg import CybORGUnavailable

    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, CybORGUnavailable, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
