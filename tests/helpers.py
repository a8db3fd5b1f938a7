"""Shared helpers for the tests: run scripted policies on the native engine."""
import numpy as np

from workflow_rl.sim import native as N


def run_policy(policy, red_kind, n_envs, seed=7, length=100, checkpoints=(30, 50, 100), official_bugs=True):
    """Running returns of ``policy`` at each checkpoint for ``n_envs`` episodes (one per env)."""
    s, b = N.allocate_state(n_envs), N.allocate_buffers(n_envs)
    N.seed_state(s, seed, red_kind)
    N.reset_envs(s, b)
    rng = np.random.default_rng(seed)
    obs = b.obs.copy()
    total = np.zeros(n_envs)
    out = {}
    for t in range(length):
        N.step(s, np.asarray(policy(t, obs, rng), np.int64), b, length, official_bugs)
        obs = b.obs.copy()
        total += b.reward
        if t + 1 in checkpoints:
            out[t + 1] = total.copy()
    return out
