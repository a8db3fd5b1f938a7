"""Where and how an evaluation's engine runs, one rule for every job that plays an agent.

For train's held-out evaluation, evaluate and replay: one rule each, so the jobs cannot drift apart.
"""
from __future__ import annotations

from workflow_rl.rl.config import EPISODE_WORKERS


def engine_device(engine: str, device: str) -> str:
    """Where an evaluation's engine runs: the native engine on the run's ``device`` (its CPU or CUDA build), real
    CybORG on the CPU whatever the device. The agent stays on the run's device either way: its acting function
    moves the observations to it and the actions back (``rl.planning.planner.make_act``)."""
    return device if engine == "native" else "cpu"


def engine_opts(vectorization: str, start_method: str | None, scenario: str | None, engine: str) -> dict:
    """Options of an evaluation env. It steps per step: episode workers fall back to shared memory there; the
    native engine picks its CPU or CUDA build from the device."""
    if engine == "cyborg":
        vec = "shared_memory" if vectorization == EPISODE_WORKERS else vectorization
        return {"vectorization": vec, "start_method": start_method, "scenario": scenario}
    return {}
