"""What blue remembers within an episode that its observation does not show: the decoys it has placed.

CAGE2's blue observation (per host: activity and compromise) says nothing of blue's own decoys, and a decoy of a type
already on a host does nothing (its port is taken). A memoryless policy therefore repeats a few decoys: the shipped
generalist's greedy decoy actions repeat one placed earlier in the episode 92-96% of the time
(``benchmarks/agent_actions.py``, RESULTS.md issue I). With ``--decoy-memory`` the policy input carries one bit per
decoy action (type x host), set when blue takes it and cleared when the episode ends. A pure function of blue's own
actions, so it is the same on every engine, and in-place tensor ops without host reads (CUDA graphs keep working).
"""
from __future__ import annotations

import torch

from workflow_rl.rl.ppo import DECOY_DIM
from workflow_rl.sim.tables import A_DECOY


def no_decoys(n: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """The memory of ``n`` envs at an episode's start: (n, 104) float32 zeros."""
    return torch.zeros((n, DECOY_DIM), device=device)


def remember(placed: torch.Tensor, actions: torch.Tensor) -> None:
    """Mark, in place, each env's action in ``actions`` (n,) as placed where it is a decoy action."""
    idx = actions.to(torch.int64) - A_DECOY
    is_decoy = (idx >= 0) & (idx < DECOY_DIM)
    placed.scatter_reduce_(1, idx.clamp(0, DECOY_DIM - 1).unsqueeze(1), is_decoy.unsqueeze(1).to(placed.dtype),
                           reduce="amax")


def policy_input(obs: torch.Tensor, workflow: torch.Tensor, placed: torch.Tensor | None) -> torch.Tensor:
    """The policy input along the last axis: observation, workflow encoding and, with a decoy memory, ``placed``."""
    return torch.cat([obs, workflow] + ([placed] if placed is not None else []), -1)


def forget(placed: torch.Tensor, ended: torch.Tensor) -> None:
    """Clear, in place, the memory of the envs whose episode ``ended`` (n,) bool."""
    placed.masked_fill_(ended.unsqueeze(1), 0.0)
