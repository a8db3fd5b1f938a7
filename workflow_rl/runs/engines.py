"""How an evaluation's engine runs (its options), one rule for every job that plays an agent.

For train's held-out evaluation, evaluate and replay, so the jobs cannot drift apart; where it runs is
``devices.engine_device``.
"""
from __future__ import annotations

from workflow_rl.rl.config import EPISODE_WORKERS


def engine_opts(vectorization: str, start_method: str | None, scenario: str | None, engine: str) -> dict:
    """Options of an evaluation env. It steps per step: episode workers fall back to shared memory there; the
    native engine picks its CPU or CUDA build from the device."""
    if engine == "cyborg":
        vec = "shared_memory" if vectorization == EPISODE_WORKERS else vectorization
        return {"vectorization": vec, "start_method": start_method, "scenario": scenario}
    return {}
