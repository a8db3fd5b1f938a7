"""The native CAGE2 engine on an NVIDIA GPU: the rules of :mod:`workflow_rl.sim.rules` compiled with numba-cuda.

One CUDA thread steps one env, running the very functions the CPU kernel runs (``compile_rules`` with
``numba.cuda.jit(device=True)`` instead of ``numba.njit``), so the two targets give identical trajectories,
rewards included. The state stays a struct of arrays with the env batch first (a :class:`SimState` of device
arrays); outputs are written into whatever device arrays the caller passes, e.g. views of torch tensors made with
``numba.cuda.as_cuda_array`` (no copies: :class:`workflow_rl.envs.native_env.CudaVectorEnv` does this). The small rule
tables are compiled into the kernel as constants; the two lookup tables that depend on ``official_bugs`` go to the
device once per process.

Needs ``numba-cuda`` (tested with 0.30.4). numba-cuda 0.30.4 registers an overload for ``np.row_stack``, which
numpy 2.5 removed, so its first compilation fails there; where numpy has no ``row_stack`` this module restores it
as the alias of ``np.vstack`` it was (numpy 2.0-2.4) before importing ``numba.cuda`` (checked: with numpy 2.5.5 the
kernel then compiles to PTX, and without the alias even a trivial kernel does not).

Under numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1`` set before ``numba.cuda`` is first imported) this module
runs on any CPU, as plain Python: that is how CI checks the CUDA path against the CPU kernel.
"""
from __future__ import annotations

import os
from typing import NamedTuple

import numpy as np

if not hasattr(np, "row_stack"):   # numba-cuda 0.30.4 overloads it at import; numpy 2.5 removed the vstack alias
    np.row_stack = np.vstack

from numba import cuda  # noqa: E402 (after the guard above)
from numba.cuda import config as cuda_config  # noqa: E402

from workflow_rl.sim import native as N  # noqa: E402
from workflow_rl.sim import attackers, rules  # noqa: E402
from workflow_rl.sim.native import SimState, StepBuffers  # noqa: E402

THREADS_PER_BLOCK = 128
_SIMULATOR = bool(cuda_config.ENABLE_CUDASIM)   # NUMBA_ENABLE_CUDASIM=1: kernels run as Python, nothing to cache

@cuda.jit(device=True, inline="always")
def _thread_index():
    return cuda.grid(1)


MAX_REGISTERS = int(os.environ.get("WORKFLOW_RL_CUDA_MAX_REGISTERS") or 0) or None
"""A cap on the step kernel's registers per thread, read from ``WORKFLOW_RL_CUDA_MAX_REGISTERS`` at import: a probe
for ``benchmarks/device/gpu_check.py`` (fewer registers, more warps in flight per SM, but spills; at 1M envs the kernel
is latency-bound with 56 registers), not a setting for users. None (unset): no cap."""

_KERNELS: dict[int, object] = {}


def kernel():
    """The step kernel for the attackers registered now (``sim.attackers``), built once per registry. Cached on disk
    (keyed on rules.py, where the kernel is written, and on the registry's fingerprint in its name): a new process
    loads the compiled kernel instead of spending ~20-30 s compiling it (measured on an H100); not with a register
    cap, which that key does not hold."""
    v = attackers.version()
    if v not in _KERNELS:
        dev = rules.compile_rules(cuda.jit(device=True, inline="always"))
        # every attacker inlined, the family too (Attacker.inline is the CPU's compile-time economy): a device
        # function called with the whole state passes its ~50 array structs by value, which inlining avoids
        attackers.rule_namespace(cuda.jit(device=True, inline="always"), dev)
        dev["thread_index"] = _thread_index
        cap = {"max_registers": MAX_REGISTERS} if MAX_REGISTERS and not _SIMULATOR else {}   # the simulator: no cap
        jit = cuda.jit(cache=not _SIMULATOR and MAX_REGISTERS is None, **cap)
        _KERNELS.clear()
        _KERNELS[v] = rules.compile_rules(jit, dev, (rules.step_grid,), attackers.fingerprint())["step_grid"]
    return _KERNELS[v]


_TABLES: dict[tuple, tuple] = {}


def _device_tables(official_bugs: bool) -> tuple:
    """The two lookup tables on the current GPU, copied there once per process and GPU."""
    key = (official_bugs, getattr(cuda.get_current_device(), "id", 0))   # the simulator's device has no id
    if key not in _TABLES:
        _TABLES[key] = tuple(cuda.to_device(t) for t in rules.kernel_tables(official_bugs))
    return _TABLES[key]


LAYOUTS = N.GPU_LAYOUTS   # the memory orders of the GPU arrays: why, in sim/native.py


def to_device(arrays: NamedTuple, stream=0, layout: str = N.GPU_LAYOUT) -> NamedTuple:
    """A copy of a :class:`SimState` (or :class:`StepBuffers`) of numpy arrays as device arrays in ``layout``."""
    order = N.check_gpu_layout(layout)
    return type(arrays)(*(cuda.to_device(np.asarray(a, order=order), stream=stream) for a in arrays))


def to_host(arrays: NamedTuple, stream=0) -> NamedTuple:
    """A numpy copy (C order, whatever the device layout) of a :class:`SimState` (or :class:`StepBuffers`) of device
    arrays."""
    out = type(arrays)(*(a.copy_to_host(stream=stream) for a in arrays))
    if stream != 0:
        stream.synchronize()
    return type(arrays)(*(np.ascontiguousarray(a) for a in out))


def step(state: SimState, actions, buffers: StepBuffers, episode_length: int, official_bugs: bool = True,
         stream=0, threads_per_block: int = THREADS_PER_BLOCK) -> None:
    """Advance every env one step on the GPU, in place, as :func:`workflow_rl.sim.native.step` does on the CPU.

    ``state`` and ``buffers`` hold device arrays, ``actions`` is a device int64 array of blue actions in 0..144; the
    kernel is queued on ``stream`` (0: the default stream) and not waited for.
    """
    n = actions.shape[0]
    ports, trapped = _device_tables(bool(official_bugs))
    blocks = (n + threads_per_block - 1) // threads_per_block
    kernel()[blocks, threads_per_block, stream](state, actions, np.int32(episode_length), bool(official_bugs),
                                                    ports, trapped, buffers)


def lockstep_mismatch(num_envs: int, steps: int, official_bugs: bool, policies, seed: int = 0,
                      episode_length: int = 100, threads_per_block: int = THREADS_PER_BLOCK,
                      layout: str = N.GPU_LAYOUT) -> str | None:
    """Step the CPU kernel and this CUDA kernel side by side from the same state with the same actions; the first
    difference (step, and which output or state field), or None when every output and the whole state agree after
    every step.

    Envs cycle through every registered attacker (``sim.attackers``, in listing order: B_lineAgent,
    RedMeanderAgent, SleepAgent, then the others); env j is defended by ``policies[j % len(policies)]``, each called
    as ``policy(t, obs, rng) -> actions`` on the CPU kernel's observations. The GPU arrays are in ``layout``
    (:data:`LAYOUTS`).
    """
    n = num_envs
    s, b = N.allocate_state(n), N.allocate_buffers(n)
    kinds = np.array([a.kind for a in attackers.attackers()], np.int8)
    N.seed_state(s, seed, kinds[np.arange(n) % len(kinds)])
    N.reset_envs(s, b)
    ds, db = to_device(s, layout=layout), to_device(b, layout=layout)
    rng = np.random.default_rng(seed)
    rows = np.arange(n)
    for t in range(steps):
        choices = np.stack([np.asarray(p(t % episode_length, b.obs, rng)) for p in policies])
        a = choices[rows % len(policies), rows].astype(np.int64)
        step(ds, cuda.to_device(a), db, episode_length, official_bugs, threads_per_block=threads_per_block)
        N.step(s, a, b, episode_length, official_bugs)
        for kind, cpu, dev in (("output", b, to_host(db)), ("state field", s, to_host(ds))):
            for name, x, y in zip(cpu._fields, cpu, dev):
                if not np.array_equal(x, y):
                    return f"step {t}: {kind} {name} differs in {int((x != y).reshape(n, -1).any(1).sum())} envs"
    return None


__all__ = ["kernel", "step", "to_device", "to_host", "lockstep_mismatch", "THREADS_PER_BLOCK", "LAYOUTS"]
