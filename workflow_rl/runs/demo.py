"""``runs.demo``: a scripted defender on native envs against B_line and Meander, returns and the engine's speed.

``workflow-rl demo`` prints it; :func:`demo` returns it, one :class:`DemoRow` per red agent.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from workflow_rl.sim import attackers

LENGTHS = (30, 50, 100)
"""The CAGE2 episode lengths whose running returns the demo reports (one 100-step episode gives all three)."""


@dataclass
class DemoRow:
    """One red agent's cells: per length the mean and standard error of the blue return; env-steps per second."""

    red_agent: str
    cells: dict[int, tuple[float, float]]
    steps_per_s: float


def demo(policy: str = "restore_compromised", red_agents=attackers.cage2(attacking=True), n_envs: int = 4096,
         episodes: int = 8192, seed: int = 0, progress: bool = True, threads: int | str | None = None) -> list[DemoRow]:
    """Play ``episodes`` 100-step episodes per red agent with the scripted ``policy`` (``workflow_rl.policies``) in
    rounds of ``n_envs`` native envs; each length's running return and the engine's env-steps per second. Threads
    (``threads``: a count, 'auto' or 'off', as ``--threads``) are sized for ``n_envs`` envs stepped at once."""
    from workflow_rl import make_vector_env, parse_red_agent
    from workflow_rl import threads as thread_policy
    from workflow_rl.policies import POLICIES

    thread_policy.configure(thread_policy.Work(envs=n_envs), threads)
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}: use one of {', '.join(POLICIES)}")
    rng = np.random.default_rng(seed)
    rows = []
    for red in [parse_red_agent(r) for r in red_agents]:
        env = make_vector_env(n_envs, red, seed=seed, copy=False)
        try:
            totals, steps_per_s = _rounds(env, POLICIES[policy], rng, n_envs, episodes, progress, red)
        finally:
            env.close()
        cells = {}
        for length in LENGTHS:
            x = np.concatenate(totals[length])[:episodes]
            cells[length] = (float(x.mean()), float(x.std(ddof=1) / np.sqrt(len(x))))
        rows.append(DemoRow(red, cells, steps_per_s))
    return rows


def _rounds(env, policy, rng, n_envs: int, episodes: int, progress: bool, red: str) -> tuple[dict, float]:
    """Enough rounds of ``n_envs`` 100-step episodes for ``episodes``: each round's running returns at 30, 50 and
    100 steps, and env-steps per second. A huge episode count takes minutes, so it shows a progress bar (a line per
    round without ``progress``) rather than looking dead."""
    from workflow_rl.rl.runlog import progress_bar

    obs, _ = env.reset()
    rounds = -(-episodes // n_envs)
    totals = {length: [] for length in LENGTHS}
    stepped, t_env = 0, 0.0
    bar = progress_bar(rounds * n_envs, 0, progress)
    for i in range(rounds):
        ret = np.zeros(n_envs)
        for t in range(max(LENGTHS)):
            act = policy(t, obs, rng)
            t0 = time.perf_counter()
            obs, r, _, _, _ = env.step(act)
            t_env += time.perf_counter() - t0
            stepped += n_envs
            ret += r
            if t + 1 in totals:
                totals[t + 1].append(ret.copy())
        bar.update(n_envs)
        if not progress:
            print(f"{red}: round {i + 1}/{rounds} ({(i + 1) * n_envs:,} episodes)", flush=True)
    bar.close()
    return totals, stepped / t_env
