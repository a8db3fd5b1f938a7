"""The native CAGE2 engine on the CPU: batched state as a struct of arrays, stepped by numba-compiled kernels.

Why per-env compiled code: a CAGE2 step is a few hundred tiny integer operations of which a given (blue, red)
action pair touches one or two hosts. Vectorised tensor code must evaluate every branch for every env, while a
compiled loop over envs that only does
the work its actions need runs several times faster and parallelises over cores with ``prange``.

The per-env rules are written once, in :mod:`workflow_rl.sim.rules`; this module compiles them with
``numba.njit`` and adds the CPU launcher (chunks of envs, ``prange`` over chunks). :mod:`workflow_rl.sim.cuda`
compiles the same functions as CUDA device functions, one thread per env, so both targets give identical
trajectories. Randomness is counter-based (see :mod:`workflow_rl.sim.rules`).
"""
from __future__ import annotations

import os
from typing import Callable, NamedTuple

import numba
import numpy as np
from numba import njit

from workflow_rl.sim import attackers, family, rules
from workflow_rl.sim import tables as T

if "NUMBA_THREADING_LAYER" not in os.environ:
    # numba's own thread pool, not OpenMP: OpenMP's threads keep spinning after each parallel step and fight torch's
    # threads for the cores. Measured on the 2-core CPU, 8 workflows x 200 envs in one batch: 7,658 transitions/s
    # with OpenMP, 46,973 with workqueue (6.1x); the engine alone is no slower (1.05-1.12x faster at 65,536 envs).
    # workqueue refuses parallel calls from several threads at once; every caller here steps from one thread.
    numba.config.THREADING_LAYER = "workqueue"

_N = T.N_HOSTS

_mix = rules.compile_rules(njit(inline="always"), functions=(rules._mix,))["_mix"]   # for the RNG keys below


# ---------------------------------------------------------------------------------------------------------- state
class SimState(NamedTuple):
    """Batched CAGE2 state; every array has the env batch as its first dimension.

    True state (what CybORG's hosts hold), red's memory, the red agents' own state machines, and the persistent part
    of blue's observation. About 400 bytes per env.
    """

    key: np.ndarray            # (N,) uint64   per-env RNG key (from the run seed and env index)
    episode: np.ndarray        # (N,) int64    episodes started by this env (part of the RNG counter)
    t: np.ndarray              # (N,) int32    step within the episode
    red_kind: np.ndarray       # (N,) int8     the attacker of the current episode (its kind: sim.attackers)
    red_cdf: np.ndarray        # (N,K) float64 cumulative odds of each of the K red kinds, drawn at every reset
    sess_priv: np.ndarray      # (N,13) int16  red sessions as root/SYSTEM (User0's foothold not included)
    sess_rem: np.ndarray       # (N,13) int16  user-level sessions Remove can kill (detected non-SSH exploit)
    sess_user: np.ndarray      # (N,13) int16  other user-level sessions (SSH, or undetected)
    red_file: np.ndarray       # (N,13) int8   a density-0.9 red file exists (until Restore)
    decoys: np.ndarray         # (N,13) int16  bitmask of decoy types placed
    vsftpd: np.ndarray         # (N,13) int8   Vsftpd decoy copies (official Vsftpd stacks)
    ot_down: np.ndarray        # (N,) int8     OTService stopped on Op_Server0
    ot_broken: np.ndarray      # (N,) int8     Op_Server0 restored once: Impact no longer stops OTService (bug)
    red_ports: np.ndarray      # (N,13) int16  red's remembered ports per host (last successful scan)
    red_scanned: np.ndarray    # (N,13) int8   host ip is in red's port memory
    ot_known: np.ndarray       # (N,) int8     red learnt OTService (escalated Op_Server0)
    obs_comp: np.ndarray       # (N,13) int8   blue's persistent Compromised column (0 No,1 Unknown,2 User,3 Priv)
    last_success: np.ndarray   # (N,) int8     success of red's previous action
    last_dns_empty: np.ndarray  # (N,) int8    red's previous scan returned nothing (no Operational routing)
    bl_state: np.ndarray       # (N,) int8     B_lineAgent's state a
    bl_target: np.ndarray      # (N,) int8     B_lineAgent's user host (-1 until chosen)
    bl_s12: np.ndarray         # (N,) int8     B_lineAgent's cached state-12 action exists
    m_known_ips: np.ndarray    # (N,) int32    Meander: ips known to red's action space (host bitmask)
    m_known_subnets: np.ndarray  # (N,) int8
    m_scanned_subnets: np.ndarray  # (N,) int8
    m_scanned_ips: np.ndarray  # (N,) int32
    m_exploited: np.ndarray    # (N,) int32
    m_escalated: np.ndarray    # (N,) int32
    m_mapped: np.ndarray       # (N,) int32    host_ip_map keys (hosts red exploited successfully)
    m_last_ip: np.ndarray      # (N,) int8
    m_last_host: np.ndarray    # (N,) int8
    # the attacker family's memory (sim.family; one attacker plays an env's episode, so they share it, and each
    # sets it afresh at its episode's first step)
    fam_kind: np.ndarray       # (N,) int8     red's previous action kind (tables.R_*), read back with its success
    fam_tgt: np.ndarray        # (N,) int8     its target (host; subnet for R_DRS; -1 none)
    fam_hosts: np.ndarray      # (N,) int32    hostnames known to red's action space (User0, then each exploited)
    fam_sess: np.ndarray       # (N,) int32    hosts red believes it holds a session on
    fam_root: np.ndarray       # (N,) int32    hosts red believes it holds privileged (escalated)
    fam_fresh: np.ndarray      # (N,) int32    hosts scanned since red's last failed exploit there
    fam_user: np.ndarray       # (N,) int8     the user host of its route (-1 before it is drawn)
    fam_tick: np.ndarray       # (N,) int8     the hold phase's round-robin counter
    fam_burnt: np.ndarray      # (N,) int32    user hosts it gave up routing through


class StepBuffers(NamedTuple):
    """Preallocated outputs of one batched step (written in place by the kernel)."""

    obs: np.ndarray            # (N,52) float32
    reward: np.ndarray         # (N,) float32
    truncated: np.ndarray      # (N,) bool
    access: np.ndarray         # (N,13) int8   true red access after the step (after autoreset, if any)
    final_obs: np.ndarray      # (N,52) float32  last observation of an episode that just ended
    final_access: np.ndarray   # (N,13) int8
    red_action: np.ndarray     # (N,3) int8    red's action this step: kind (tables.R_*), target (host; the subnet
                               #               for R_DRS; -1 none), success (0/1) -- what a viewer shows


GPU_LAYOUTS = ("C", "F")
"""Memory orders of the 2-D (env, host) arrays on the GPU (``sim.cuda``; on the CPU they are always "C"). "C",
env-major as here: a thread's row is contiguous, so a warp reading one host of 32 envs touches 32 rows, e.g. 416
bytes for 13 int8 hosts, to use 32. "F", host-major: the same ``a[env, host]`` indexing, but 32 envs' values of one
host are adjacent, so the warp's load is coalesced. The rules are not touched: numba compiles the kernel once per
layout from the same source, and the results are the same bit for bit (the arithmetic is). Which is faster is
measured (``benchmarks/device/gpu_check.py``'s engine stage), not assumed: :data:`GPU_LAYOUT`."""

GPU_LAYOUT = "F"
"""The default GPU layout. Measured on one H100 (BENCHMARKS.md, 2026-11-27): "F" steps 1,048,576 envs in 0.35-0.41 ms
against 1.34-1.41 ms for "C" (2.6-3.8x the env-steps/s; Nsight Compute: DRAM throughput 1.30 TB/s vs 0.58), and as a
replayed CUDA graph at 65,536 envs 22-26 us against 81-86 us."""


def check_gpu_layout(layout: str) -> str:
    """``layout`` if it is one of :data:`GPU_LAYOUTS`; a ValueError naming them otherwise."""
    if layout not in GPU_LAYOUTS:
        raise ValueError(f"gpu_layout must be one of {', '.join(GPU_LAYOUTS)} (C env-major as on the CPU, F "
                         f"host-major), got {layout!r}")
    return layout


def allocate_state(num_envs: int) -> SimState:
    """Zeroed state for ``num_envs`` envs (call :func:`seed_state` and :func:`reset_all` before stepping)."""
    n, h = num_envs, _N
    z = np.zeros
    return SimState(
        key=z(n, np.uint64), episode=z(n, np.int64), t=z(n, np.int32), red_kind=z(n, np.int8),
        red_cdf=z((n, attackers.n_kinds()), np.float64),
        sess_priv=z((n, h), np.int16), sess_rem=z((n, h), np.int16), sess_user=z((n, h), np.int16),
        red_file=z((n, h), np.int8), decoys=z((n, h), np.int16), vsftpd=z((n, h), np.int8),
        ot_down=z(n, np.int8), ot_broken=z(n, np.int8), red_ports=z((n, h), np.int16),
        red_scanned=z((n, h), np.int8), ot_known=z(n, np.int8), obs_comp=z((n, h), np.int8),
        last_success=z(n, np.int8), last_dns_empty=z(n, np.int8), bl_state=z(n, np.int8),
        bl_target=z(n, np.int8), bl_s12=z(n, np.int8), m_known_ips=z(n, np.int32), m_known_subnets=z(n, np.int8),
        m_scanned_subnets=z(n, np.int8), m_scanned_ips=z(n, np.int32), m_exploited=z(n, np.int32),
        m_escalated=z(n, np.int32), m_mapped=z(n, np.int32), m_last_ip=z(n, np.int8), m_last_host=z(n, np.int8),
        fam_kind=z(n, np.int8), fam_tgt=z(n, np.int8), fam_hosts=z(n, np.int32), fam_sess=z(n, np.int32),
        fam_root=z(n, np.int32), fam_fresh=z(n, np.int32), fam_user=z(n, np.int8), fam_tick=z(n, np.int8),
        fam_burnt=z(n, np.int32),
    )


_HOST_MASK = (1 << _N) - 1
_SUBNET_MASK = (1 << len(T.SUBNETS)) - 1
_PORT_MASK = (1 << len(T.PORT_NUMBERS)) - 1
_DECOY_MASK = (1 << T.N_DECOYS) - 1
_BLINE_LAST = len(T.BLINE_JUMPS) - 1
_FLAGS = ("red_file", "ot_down", "ot_broken", "red_scanned", "ot_known", "last_success", "last_dns_empty", "bl_s12")
_BITMASKS = {"decoys": _DECOY_MASK, "red_ports": _PORT_MASK, "m_known_ips": _HOST_MASK, "m_scanned_ips": _HOST_MASK,
             "m_exploited": _HOST_MASK, "m_escalated": _HOST_MASK, "m_mapped": _HOST_MASK,
             "m_known_subnets": _SUBNET_MASK, "m_scanned_subnets": _SUBNET_MASK, "fam_hosts": _HOST_MASK,
             "fam_sess": _HOST_MASK, "fam_root": _HOST_MASK, "fam_fresh": _HOST_MASK, "fam_burnt": _HOST_MASK}
_PER_STEP_COUNTS = ("sess_priv", "sess_rem", "sess_user", "vsftpd")
"""Counts the rules raise by at most one per step and clear at a reset (red's sessions: one exploit a step;
Vsftpd copies: one decoy a step)."""


def state_values(episode_length: int) -> dict[str, tuple[int, int] | tuple[int, ...]]:
    """Per :class:`SimState` field, what a state the rules wrote can hold in an episode of ``episode_length``
    steps: an inclusive ``(lo, hi)`` range, or (``bl_target``) the values it can take. The one place these are
    written down, so that a saved state (a checkpoint's engine snapshot) is checked against what the kernels can
    reach (:func:`check_state`) rather than trusted: a step counter past the episode's end never truncates it (the
    run trains on, finishing no episode), a red kind of 7 plays no red agent, a B_line state of 20 reads past its
    jump table. ``key`` (any 64-bit key) and ``red_cdf`` (floats: :func:`check_state`) are not listed."""
    def per_step(dtype) -> tuple[int, int]:
        info = np.iinfo(dtype)   # a count that can pass its dtype's top wraps (long episodes): any value then
        return (0, episode_length) if episode_length <= info.max else (int(info.min), int(info.max))

    values: dict = {"episode": (0, np.iinfo(np.int64).max), "t": (0, episode_length - 1),
                    "red_kind": (0, attackers.n_kinds() - 1), "obs_comp": (0, 3), "bl_state": (0, _BLINE_LAST),
                    "bl_target": (-1, T.USER1, T.USER2, T.USER3, T.USER4),
                    "m_last_ip": (-1, _N - 1), "m_last_host": (-1, _N - 1),
                    "fam_kind": (0, len(T.RED_ACTIONS) - 1), "fam_tgt": (-1, _N - 1), "fam_user": (-1, _N - 1),
                    "fam_tick": (0, family.HOLD_TICKS - 1)}
    values.update({f: (0, 1) for f in _FLAGS})
    values.update({f: (0, m) for f, m in _BITMASKS.items()})
    dtypes = {f: a.dtype for f, a in zip(SimState._fields, allocate_state(0))}
    values.update({f: per_step(dtypes[f]) for f in _PER_STEP_COUNTS})
    return values


def check_state(state: dict, episode_length: int, step: int | None = None) -> None:
    """A ValueError naming the first field of ``state`` (a :class:`SimState` as a dict, e.g. a checkpoint's
    ``env_state``; fields it lacks are skipped) holding a value the rules cannot write in an episode of
    ``episode_length`` steps (:func:`state_values`); ``red_cdf`` must be cumulative odds as :func:`red_cdf_of`
    writes them. ``step``: every env's step counter must be it (envs of one batch step together from a common
    start, which the trainer relies on to know when episodes end). Shapes and dtypes are the caller's to check."""
    for name, allowed in state_values(episode_length).items():
        if name not in state:
            continue
        a = np.asarray(state[name])
        if len(allowed) == 2:
            bad = (a < allowed[0]) | (a > allowed[1])
            what = f"in {allowed[0]}..{allowed[1]}"
        else:
            bad = ~np.isin(a, allowed)
            what = f"one of {', '.join(map(str, allowed))}"
        if bad.any():
            raise ValueError(f"env_state.{name} holds {a[bad].flat[0]}, which the engine never writes (values are "
                             f"{what}{' for --episode-length ' + str(episode_length) if name == 't' else ''})")
    if step is not None and "t" in state and (np.asarray(state["t"]) != step).any():
        raise ValueError(f"env_state.t is not {step} in every env, the step its batch is at")
    if "red_cdf" in state:
        cdf = np.asarray(state["red_cdf"], np.float64)
        ok = np.isfinite(cdf).all() and (((cdf >= 0) & (cdf <= 1)) | (cdf == 2.0)).all() and \
            (np.diff(cdf, axis=-1) >= 0).all() and (cdf[..., -1] == 2.0).all()
        if not ok:
            raise ValueError("env_state.red_cdf is not the cumulative odds of a red-agent mixture (nondecreasing "
                             "values in [0, 1], 2.0 from the last kind that can be drawn on)")


def allocate_buffers(num_envs: int) -> StepBuffers:
    n = num_envs
    return StepBuffers(
        obs=np.zeros((n, 4 * _N), np.float32), reward=np.zeros(n, np.float32), truncated=np.zeros(n, np.bool_),
        access=np.zeros((n, _N), np.int8), final_obs=np.zeros((n, 4 * _N), np.float32),
        final_access=np.zeros((n, _N), np.int8), red_action=np.zeros((n, 3), np.int8),
    )


WORST_REWARD = float(rules.REWARD_OF_TENTHS[-1])
"""The lowest reward of one step (a Restore, every host's confidentiality lost and the Impact penalty); a step's
reward is in ``[WORST_REWARD, 0]``."""


def check_outputs(obs, access, returns=None, steps: int = 0) -> None:
    """A ValueError unless ``obs`` (N, 52) holds only the 0/1 bits the rules write, ``access`` (N, 13) red access
    levels (``ACCESS_NONE`` .. ``ACCESS_PRIVILEGED``) and ``returns`` (N,) sums of ``steps`` rewards (each in
    ``[WORST_REWARD, 0]``): what a saved batch's current observations and episode sums can be."""
    o, a = np.asarray(obs), np.asarray(access)
    if not ((o == 0) | (o == 1)).all():
        raise ValueError("obs holds values other than the 0/1 bits of an observation")
    if ((a < T.ACCESS_NONE) | (a > T.ACCESS_PRIVILEGED)).any():
        raise ValueError(f"access holds values outside the red access levels {T.ACCESS_NONE}..{T.ACCESS_PRIVILEGED}")
    if returns is not None:
        r = np.asarray(returns, np.float64)
        lo = steps * WORST_REWARD * (1 + 1e-6) - 1e-6   # float rounding of the sum
        if ((r < lo) | (r > 0)).any():
            raise ValueError(f"episode_running.env holds a return outside {steps * WORST_REWARD:g}..0, what {steps} "
                             "steps of an episode can earn")


def state_bytes_per_env(state: SimState) -> int:
    """Memory of the state per env, in bytes."""
    return int(sum(a.nbytes for a in state) // len(state.key))



# ------------------------------------------------------------------------------------------------------------ RNG
def env_keys(seed: int, num_envs: int, offset: int = 0) -> np.ndarray:
    """Per-env RNG keys derived from a run seed; env ``i`` always gets the same key for the same seed."""
    idx = np.arange(offset, offset + num_envs, dtype=np.uint64)
    base = np.uint64(seed % (1 << 64))
    with np.errstate(over="ignore"):
        return _keys_kernel(base, idx)


@njit(cache=True)
def _keys_kernel(base, idx):
    out = np.empty(idx.shape[0], np.uint64)
    for i in range(idx.shape[0]):
        out[i] = _mix(_mix(base) ^ _mix(idx[i] + np.uint64(0x632BE59BD9B4E019)))
    return out



# ----------------------------------------------------------------------------------------------------- launchers
class Kernels(NamedTuple):
    """The CPU build of the rules for one attacker registry (:mod:`workflow_rl.sim.attackers`)."""

    rules: dict              # every rule, the attackers' and the dispatch compiled inline (rules.compile_rules)
    step_range: Callable     # serial launcher (rules.step_range)
    reset_range: Callable    # rules.reset_range
    step_chunks: Callable    # parallel launcher over chunks of envs (rules.step_chunks)


_KERNELS: dict[int, Kernels] = {}


def kernels() -> Kernels:
    """The CPU kernels for the attackers registered now, built once per registry (numba compiles, or loads from its
    disk cache, at the first call). The launchers are compiled from rules.py, where they are written, so that
    numba's cache (keyed on the source file of the function) is rebuilt whenever a rule changes; their cached names
    carry the registry's fingerprint (``sim.attackers``), so another registry is another cache entry."""
    v = attackers.version()
    if v not in _KERNELS:
        ns = attackers.rule_namespace(njit(inline="always"), rules.compile_rules(njit(inline="always")), njit)
        suffix = attackers.fingerprint()
        rules.compile_rules(njit(cache=True), ns, (rules.step_range, rules.reset_range), suffix)
        rules.compile_rules(njit(parallel=True, cache=True), ns, (rules.step_chunks,), suffix)
        _KERNELS.clear()   # an old registry's kernels are not used again
        _KERNELS[v] = Kernels(ns, ns["step_range"], ns["reset_range"], ns["step_chunks"])
    return _KERNELS[v]

_SERIAL_BELOW = 512  # below this many envs threads cost more than they save
_EVERY = np.zeros(0, np.bool_)   # the launchers' mask meaning "every env"


def _n_chunks(n: int) -> int:
    return max(1, min(n // 256, 8 * numba.get_num_threads()))


# ---------------------------------------------------------------------------------------------------- public API
def red_weights_of(red, num_envs: int) -> np.ndarray:
    """(num_envs, K) probabilities of each of the K red kinds (``sim.attackers``: RED_SLEEP, RED_BLINE, RED_MEANDER
    and those registered) per env: ``red`` is a fixed kind (an integer, or an integer array with one per env) or
    mixture weights (floats, shape (K,) or (num_envs, K): finite, >= 0, a positive sum; normalised here)."""
    k = attackers.n_kinds()
    r = np.asarray(red)
    if np.issubdtype(r.dtype, np.integer):
        if r.size and (r.min() < 0 or r.max() > k - 1):
            raise ValueError(f"red kinds are 0..{k - 1} ({', '.join(attackers.kind_names())}), got "
                             f"{r.min()}..{r.max()}")
        return np.eye(k)[np.broadcast_to(r, (num_envs,))]
    if r.shape[-1:] != (k,):
        raise ValueError(f"red-agent weights need one weight per red kind ({k}), got shape {r.shape}")
    w = np.broadcast_to(r.astype(np.float64), (num_envs, k))
    if not np.all(np.isfinite(w)) or (w < 0).any() or (w.sum(1) <= 0).any():
        raise ValueError(f"red-agent weights must be finite, >= 0 and not all 0, got {r}")
    return w / w.sum(1, keepdims=True)


def red_cdf_of(weights: np.ndarray) -> np.ndarray:
    """The cumulative odds the reset draws a red kind from (``rules._draw_red_kind``): where every later kind has
    weight 0 the entry is 2.0, above any uniform draw, so a kind of weight 0 is never drawn through rounding."""
    w = np.asarray(weights, np.float64)
    cdf = np.cumsum(w, 1)
    later = np.cumsum(w[:, ::-1], 1)[:, ::-1]   # later[:, k] = sum of w[:, k:]
    nothing_after = np.concatenate([later[:, 1:], np.zeros((len(w), 1))], 1) == 0
    return np.where(nothing_after, 2.0, cdf)


def seed_state(state: SimState, seed, red) -> None:
    """Give each env its RNG key and red agent (a fixed kind or mixture weights, as :func:`red_weights_of` takes;
    a mixture draws one kind per episode at each reset from the env's own stream); episode counters restart so a
    seed fully defines a run. ``seed``: one seed for the batch (env i: :func:`env_keys`' stream i), or one per env
    (env i: the stream a one-env batch of seed ``seed[i]`` gets)."""
    if np.ndim(seed):
        state.key[:] = [env_keys(int(s), 1)[0] for s in seed]
    else:
        state.key[:] = env_keys(seed, len(state.key))
    state.episode[:] = -1  # the first reset makes it 0
    state.red_cdf[:] = red_cdf_of(red_weights_of(red, len(state.key)))


def reset_envs(state: SimState, buffers: StepBuffers, mask: np.ndarray | None = None) -> None:
    """Start a new episode in the envs selected by ``mask`` (all by default); writes obs and access."""
    if mask is None:
        mask = np.ones(len(state.key), np.bool_)
    kernels().reset_range(state, mask, 0, len(mask), buffers)


def step(state: SimState, actions: np.ndarray, buffers: StepBuffers, episode_length: int,
         official_bugs: bool = True, mask: np.ndarray | None = None) -> None:
    """Advance every env one step in place. ``actions`` is an int array of blue actions in 0..144, one per env.

    Envs whose episode reaches ``episode_length`` are truncated and reset in the same call (their last observation
    goes to ``buffers.final_obs``). ``mask`` ((N,) bool) steps only the selected envs: the others'
    state and output rows are left as they were, e.g. a planner advancing the rollouts still running.
    """
    ports, trapped = rules.kernel_tables(official_bugs)
    n = len(actions)
    if mask is not None and np.shape(mask) != (n,):
        raise ValueError(f"mask must have one entry per env ({n}), got shape {np.shape(mask)}")
    mask = _EVERY if mask is None else np.require(mask, np.bool_, ("C", "W"))   # one compiled type
    k = kernels()
    if n < _SERIAL_BELOW:
        k.step_range(state, actions, mask, 0, n, np.int32(episode_length), bool(official_bugs), ports, trapped,
                     buffers)
    else:
        k.step_chunks(state, actions, mask, _n_chunks(n), np.int32(episode_length), bool(official_bugs), ports,
                      trapped, buffers)


# ----------------------------------------------------------------------------------------- copies and comparison
def take_state(state: SimState, index) -> SimState:
    """A new state whose env ``j`` is a copy of ``state``'s env ``index[j]`` (an index may repeat: one env copied
    into many, e.g. a belief's particles or a planner's rollouts). The copies share their RNG keys, episode and step
    counters, hence their future draws: give them their own with :func:`rekey` before stepping them apart."""
    idx = np.asarray(index, np.int64)
    return SimState(*(x[idx] for x in state))


def put_state(dst: SimState, index, src: SimState, src_index=None) -> None:
    """Write, in place, ``src``'s envs ``src_index`` (all by default) into ``dst``'s envs ``index``."""
    idx = np.asarray(index, np.int64)
    sidx = slice(None) if src_index is None else np.asarray(src_index, np.int64)
    for d, s in zip(dst, src):
        d[idx] = s[sidx]


def rekey(state: SimState, seed: int, index=None, offset: int = 0) -> None:
    """Give the envs ``index`` (all by default) fresh RNG keys, :func:`env_keys` of ``seed`` from ``offset``: the
    draws of an env depend on (key, episode, step), so copies of one state with different keys then play
    independent futures from it, and the same (seed, offset) gives the same futures again."""
    idx = np.arange(len(state.key)) if index is None else np.asarray(index, np.int64)
    state.key[idx] = env_keys(seed, len(idx), offset)


def obs_distance(obs: np.ndarray, target: np.ndarray) -> np.ndarray:
    """(N,) number of the 52 observation bits in which each row of ``obs`` (N, 52) differs from ``target`` (52,):
    0 where an env reproduces the observation exactly."""
    return ((np.asarray(obs) > 0.5) != (np.asarray(target).reshape(1, -1) > 0.5)).sum(1)


__all__ = ["Kernels", "kernels", "GPU_LAYOUTS", "GPU_LAYOUT", "check_gpu_layout", "SimState", "StepBuffers",
           "allocate_state", "allocate_buffers", "state_values", "check_state", "check_outputs", "WORST_REWARD",
           "seed_state", "red_weights_of", "red_cdf_of", "reset_envs", "step", "env_keys", "state_bytes_per_env",
           "take_state", "put_state", "rekey", "obs_distance"]

