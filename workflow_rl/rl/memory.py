"""What blue remembers within an episode that its observation does not show.

Three optional parts, each a block of 0/1 policy inputs that is cleared when the episode ends:

- **decoys** (``--decoy-memory``, 104 bits, one per decoy action: 8 types x 13 hosts): set when blue takes it.
  CAGE2's blue observation says nothing of blue's own decoys, and a decoy of a type already on a host does nothing
  (its port is taken): a memoryless policy repeats decoys already in place (``benchmarks/studies/agent_actions.py``
  counts them).
- **red** (``--red-memory``, 26 bits: per host, red activity seen and an exploit seen): set when the observation
  shows it. The observation's activity bits describe this step only (a scan shows once, then is gone), so a
  memoryless policy forgets which hosts red has found and cannot tell B_line's path from Meander's sweep.
- **clock** (``--clock-memory``, 1 input): the steps taken so far this episode / 100. Neither the observation nor
  the other blocks say how far into the episode blue is, and red's scripts move in phases.

With ``--mask-decoys`` (needs the decoy memory) the decoy bits mean "in place": a Restore of a host clears that
host's bits, as it removes its decoys, and the policy may not choose a decoy that cannot take effect -- one whose
OS does not match the host, whose port a real service or a decoy in place holds, or that is already in place
(invalid-action masking; its logits are set to a large negative number, :meth:`Memory.mask`). The mask is a
function of the policy input alone, so sampling, the PPO update and evaluation apply it identically without
storing it. It uses official CybORG's port table (its Vsftpd opens port 80).

Memory at step ``t`` = blue's decoy actions at steps ``< t`` and red activity in observations ``<= t``. Pure
functions of blue's own actions and observations, so the same on every engine, and in-place tensor ops without
host reads (CUDA graphs keep working). The layout is decoys first, then red, then the clock.
"""
from __future__ import annotations

from dataclasses import astuple, dataclass
from typing import Any

import torch

from workflow_rl.checks import flag
from workflow_rl.sim import tables as T
from workflow_rl.sim.tables import A_DECOY, A_RESTORE

N_HOSTS = 13
DECOY_DIM = A_RESTORE - A_DECOY
"""One input per decoy action (8 decoy types x 13 hosts): whether blue took it earlier in the episode."""
RED_DIM = 2 * N_HOSTS
"""Per host: red activity (a scan or an exploit) seen this episode, then an exploit seen this episode."""
CLOCK_STEP = 0.01
"""What the clock input gains per step: steps so far / 100, CAGE2's longest episode (0 at an episode's first step)."""
MASKED = -1e8
"""The logit of a masked action: exp() underflows to 0, and 0 * MASKED stays finite in the entropy."""


def _decoy_tables() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(possible, blocks, host) over decoy actions ``j = 13 k + h``: ``possible[j]`` the decoy's OS matches the host
    and its port is free of real services; ``blocks[j', j]`` decoy ``j'`` in place takes the port decoy ``j`` needs
    (same host; a decoy blocks itself); ``host[j]`` its host."""
    k = torch.arange(DECOY_DIM) // N_HOSTS
    h = torch.arange(DECOY_DIM) % N_HOSTS
    os_ = torch.as_tensor(T.DECOY_OS)[k]
    windows = torch.as_tensor(T.WINDOWS)[h]
    os_ok = (os_ == T.OS_ANY) | ((os_ == T.OS_WINDOWS) & windows) | ((os_ == T.OS_LINUX) & ~windows)
    check = torch.as_tensor(T.DECOY_CHECK_PORT)[k]
    opens = torch.as_tensor(T.DECOY_OPEN_PORT_OFFICIAL)[k]
    port_free = (torch.as_tensor(T.REAL_PORTS)[h] >> check) & 1 == 0
    blocks = (h[:, None] == h[None, :]) & ((opens[:, None] == check[None, :]) | torch.eye(DECOY_DIM, dtype=torch.bool))
    return os_ok & port_free, blocks, h


_POSSIBLE, _BLOCKS, _DECOY_HOST = _decoy_tables()
_ON_DEVICE: dict[tuple[torch.device, torch.dtype], tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}


def _tables_on(device: torch.device, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(possible, blocks as ``dtype``, host) on ``device``, copied there once: a host-to-device copy inside a rollout
    step would cost two transfers per step and cannot be captured in a CUDA graph (the first, eager run fills this)."""
    key = (device, dtype)
    if key not in _ON_DEVICE:
        _ON_DEVICE[key] = (_POSSIBLE.to(device), _BLOCKS.to(device, dtype), _DECOY_HOST.to(device))
    return _ON_DEVICE[key]


@dataclass(frozen=True)
class Memory:
    """Which memory blocks a policy input carries (the ``decoy_memory`` and ``red_memory`` PPO settings)."""

    decoys: bool = False
    red: bool = False
    masked: bool = False
    """decoy bits mean "in place" (cleared by a Restore of their host) and impossible decoys are masked out."""
    clock: bool = False

    SETTINGS = ("decoy_memory", "red_memory", "mask_decoys", "clock_memory")
    """The PPO settings behind ``decoys``, ``red``, ``masked`` and ``clock``, in field order."""

    @classmethod
    def of(cls, ppo: Any) -> Memory:
        """The memory of a :class:`~workflow_rl.rl.ppo.PPOConfig` or of its saved dict (keys a file written
        before a block existed lacks mean "off")."""
        get = ppo.get if isinstance(ppo, dict) else lambda k, d: getattr(ppo, k, d)
        return cls(*(bool(get(k, False)) for k in cls.SETTINGS))

    @property
    def flags(self) -> str:
        """The command-line flags that give this memory, as error messages name them."""
        on = [flag(k) for k, b in zip(self.SETTINGS, astuple(self)) if b]
        return " ".join(on) if on else "no memory flags"

    @property
    def dim(self) -> int:
        return DECOY_DIM * self.decoys + RED_DIM * self.red + self.clock

    def blank(self, n: int, device: torch.device | str = "cpu") -> torch.Tensor | None:
        """The memory of ``n`` envs at an episode's start, (n, dim) zeros; None without memory."""
        return torch.zeros((n, self.dim), device=device) if self.dim else None

    def check_state(self, mem: torch.Tensor, steps: int) -> None:
        """A ValueError unless ``mem`` (n, dim; its shape checked by the caller), a saved memory ``steps`` steps
        into the envs' episodes, holds what :meth:`took` and :meth:`saw` write: 0/1 bits, and a clock of ``steps``
        steps (float32 sums of :data:`CLOCK_STEP`: each addition rounds by at most 2**-24 of the sum, hence the
        tolerance growing with ``steps`` squared)."""
        m = torch.as_tensor(mem, dtype=torch.float64)
        bits = m[:, :self.dim - self.clock]
        if not bool(((bits == 0) | (bits == 1)).all()):
            raise ValueError("memory holds values other than 0/1 bits")
        if self.clock and bool(((m[:, -1] - steps * CLOCK_STEP).abs() > 1e-5 + 6e-10 * steps ** 2).any()):
            raise ValueError(f"memory's clock is not {steps} steps")

    def took(self, mem: torch.Tensor | None, actions: torch.Tensor) -> None:
        """Mark, in place, each env's action in ``actions`` (n,) as placed where it is a decoy action; when
        ``masked``, a Restore clears its host's decoys; advance the clock by a step."""
        if mem is not None and self.clock:
            mem[:, -1].add_(CLOCK_STEP)
        if mem is None or not self.decoys:
            return
        a = actions.to(torch.int64)
        idx = a - A_DECOY
        is_decoy = (idx >= 0) & (idx < DECOY_DIM)
        idx = idx.clamp(0, DECOY_DIM - 1)
        decoys = mem[:, :DECOY_DIM]
        if self.masked:
            possible, _, host = _tables_on(mem.device, mem.dtype)
            decoys.masked_fill_(host[None, :] == (a - A_RESTORE)[:, None], 0.0)   # a Restore's host; none otherwise
            is_decoy &= possible[idx]   # an impossible one places nothing
        decoys.scatter_reduce_(1, idx.unsqueeze(1), is_decoy.unsqueeze(1).to(mem.dtype), reduce="amax")

    def mask(self, logits: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """``logits`` (..., 145) with the decoys that cannot take effect set to :data:`MASKED`, read from the decoy
        memory in the policy input ``x`` (..., input width); unchanged unless ``masked``."""
        if not self.masked:
            return logits
        possible, blocks, _ = _tables_on(logits.device, logits.dtype)
        in_place = x[..., x.shape[-1] - self.dim:][..., :DECOY_DIM] > 0.5
        blocked = (in_place.to(logits.dtype) @ blocks) > 0.5
        allowed = possible & ~blocked
        return torch.cat([logits[..., :A_DECOY], logits[..., A_DECOY:A_RESTORE].masked_fill(~allowed, MASKED),
                          logits[..., A_RESTORE:]], -1)

    def saw(self, mem: torch.Tensor | None, obs: torch.Tensor) -> None:
        """Add, in place, the red activity in observations ``obs`` (n, 52): per host bits 0 (activity) and 1
        (exploit) of its four."""
        if mem is None or not self.red:
            return
        lo = DECOY_DIM * self.decoys
        seen = obs.view(obs.shape[0], N_HOSTS, 4)[..., :2].transpose(1, 2).reshape(obs.shape[0], RED_DIM)
        part = mem[:, lo:lo + RED_DIM]
        part.copy_(torch.maximum(part, seen.to(mem.dtype)))


def forget(mem: torch.Tensor | None, ended: torch.Tensor) -> None:
    """Clear, in place, the memory of the envs whose episode ``ended`` (n,) bool."""
    if mem is not None:
        mem.masked_fill_(ended.unsqueeze(1), 0.0)


def policy_input(obs: torch.Tensor, workflow: torch.Tensor, mem: torch.Tensor | None) -> torch.Tensor:
    """The policy input along the last axis: observation, workflow encoding and the memory, if any."""
    return torch.cat([obs, workflow] + ([mem] if mem is not None else []), -1)
