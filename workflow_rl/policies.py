"""Scripted blue policies on batched 52-dim observations.

These are the six policies whose real-CybORG returns are the project's fidelity reference (tests/data), written to
act on a whole batch at once: ``policy(t, obs, rng) -> actions`` with ``obs`` of shape (N, 52) and ``t`` the 0-based
step within the episode. They double as evaluation baselines and as the demo defender.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from workflow_rl.sim import tables

Policy = Callable[[int, np.ndarray, np.random.Generator], np.ndarray]


def _bits(obs: np.ndarray) -> np.ndarray:
    """(N, 13, 4) 0/1 view of the observation: activity (2 bits), compromised (2 bits)."""
    return (np.asarray(obs).reshape(len(obs), tables.N_HOSTS, 4) > 0.5)


def _first_host(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Lowest-index host other than User0 where ``mask`` (N, 13) holds, and whether there is one."""
    m = mask.copy()
    m[:, tables.USER0] = False
    return m.argmax(axis=1), m.any(axis=1)


def compromised_level(obs: np.ndarray) -> np.ndarray:
    """(N, 13) Compromised column: 0 No, 1 Unknown, 2 User, 3 Privileged."""
    b = _bits(obs)
    return b[..., 2] * 1 + b[..., 3] * 2


def sleep(t: int, obs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return np.zeros(len(obs), np.int64)


def random_action(t: int, obs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return rng.integers(0, tables.N_ACTIONS, size=len(obs))


def restore_compromised(t: int, obs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Restore the first host shown as User or Privileged."""
    h, any_ = _first_host(compromised_level(obs) >= 2)
    return np.where(any_, tables.A_RESTORE + h, tables.A_SLEEP)


def remove_then_restore(t: int, obs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Restore the first Privileged host; otherwise Remove on the first User host."""
    level = compromised_level(obs)
    hp, anyp = _first_host(level == 3)
    hu, anyu = _first_host(level == 2)
    return np.where(anyp, tables.A_RESTORE + hp, np.where(anyu, tables.A_REMOVE + hu, tables.A_SLEEP))


def decoy_cycle(t: int, obs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Cycle through decoy types and hosts, ignoring the observation."""
    return np.full(len(obs), tables.A_DECOY + 13 * (t % 8) + (t % 13), np.int64)


def analyse_flagged(t: int, obs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Restore the first Privileged host; otherwise Analyse the first host with Exploit activity."""
    b = _bits(obs)
    hp, anyp = _first_host(compromised_level(obs) == 3)
    he, anye = _first_host(b[..., 0] & b[..., 1])
    return np.where(anyp, tables.A_RESTORE + hp, np.where(anye, tables.A_ANALYSE + he, tables.A_SLEEP))


POLICIES: dict[str, Policy] = {
    "sleep": sleep,
    "random": random_action,
    "restore_compromised": restore_compromised,
    "remove_then_restore": remove_then_restore,
    "decoy_cycle": decoy_cycle,
    "analyse_flagged": analyse_flagged,
}
