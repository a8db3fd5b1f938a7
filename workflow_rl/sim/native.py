"""The native CAGE2 engine: batched state as a struct of arrays, and pure numba kernels that step it.

Why per-env compiled code: a CAGE2 step is a few hundred tiny integer operations of which a given (blue, red)
action pair touches one or two hosts. Vectorised tensor code must evaluate every branch for every env (measured
~0.5M env-steps/s on a 2-core CPU, and torch.compile did not help), while a compiled loop over envs that only does
the work its actions need runs several times faster and parallelises over cores with ``prange``.

Randomness is counter-based: every draw is a hash of (env key, episode, step, draw slot). A trajectory therefore
depends only on the run seed and the env index, never on the thread schedule or the batch size, and any other
implementation of the rules (e.g. a tensor path for GPUs) can reproduce the exact same draws.

The rules live in :mod:`workflow_rl.sim.tables`; section numbers (SPEC §x) refer to the CAGE2 specification.
"""
from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np
from numba import njit, prange

from workflow_rl.sim import tables as T

# ------------------------------------------------------------------------------------------------------ constants
_N = T.N_HOSTS
_REAL_PORTS = T.REAL_PORTS
_REAL_CONNS = T.REAL_CONNS
_CONF = T.CONF_TENTHS
_OUTCOME = T.EXPLOIT_OUTCOME
_EXPLOIT_PORT = T.EXPLOIT_PORT
_DECOY_OS = T.DECOY_OS
_DECOY_CHECK = T.DECOY_CHECK_PORT
_WINDOWS = T.WINDOWS
_IS_OP = T.IS_OPERATIONAL
_JUMPS = T.BLINE_JUMPS
_ENT_OF_USER = T.BLINE_ENTERPRISE_OF_USER
_REVEAL_IP = T.REVEAL_IP
_REVEAL_SUBNET = T.REVEAL_SUBNET
_SUBNET_HOSTS = T.SUBNET_HOSTS_MASK
_SUBNET_OF = T.HOST_SUBNET
_ENT_SESSION_MASK = T.ENT_HOSTS_MASK
_VS_BIT = 1 << T.D_VSFTPD
_SSHD_BIT = 1 << T.D_SSHD

# draw slots of the counter-based RNG
_SLOT_RED_TARGET, _SLOT_EXPLOIT_TOP, _SLOT_EXPLOIT_OTHER, _SLOT_DETECT, _SLOT_ESCALATE, _SLOT_BLINE = range(6)

ACT_NONE, ACT_SCAN, ACT_EXPLOIT = 0, 1, 2


def _decoy_port_table(open_port: np.ndarray) -> np.ndarray:
    """Port mask opened by each of the 256 possible sets of placed decoys."""
    out = np.zeros(256, dtype=np.int32)
    for m in range(256):
        for k in range(T.N_DECOYS):
            if m >> k & 1:
                out[m] |= 1 << int(open_port[k])
    return out


_DECOY_PORTS_OFFICIAL = _decoy_port_table(T.DECOY_OPEN_PORT_OFFICIAL)
_DECOY_PORTS_FIXED = _decoy_port_table(T.DECOY_OPEN_PORT_FIXED)


def _trap_table(traps: np.ndarray) -> np.ndarray:
    """For each exploit, the mask of decoy types that trap it."""
    out = np.zeros(T.N_EXPLOITS, dtype=np.int32)
    for k in range(T.N_DECOYS):
        if traps[k] >= 0:
            out[traps[k]] |= 1 << k
    return out


_TRAPPED_BY_OFFICIAL = _trap_table(T.DECOY_TRAPS_OFFICIAL)
_TRAPPED_BY_FIXED = _trap_table(T.DECOY_TRAPS_FIXED)


# ---------------------------------------------------------------------------------------------------------- state
class SimState(NamedTuple):
    """Batched CAGE2 state; every array has the env batch as its first dimension.

    True state (what CybORG's hosts hold), red's memory, the red agents' own state machines, and the persistent part
    of blue's observation. About 380 bytes per env.
    """

    key: np.ndarray            # (N,) uint64   per-env RNG key (from the run seed and env index)
    episode: np.ndarray        # (N,) int64    episodes started by this env (part of the RNG counter)
    t: np.ndarray              # (N,) int32    step within the episode
    red_kind: np.ndarray       # (N,) int8     RED_SLEEP / RED_BLINE / RED_MEANDER
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


class StepBuffers(NamedTuple):
    """Preallocated outputs of one batched step (written in place by the kernel)."""

    obs: np.ndarray            # (N,52) float32
    reward: np.ndarray         # (N,) float32
    truncated: np.ndarray      # (N,) bool
    access: np.ndarray         # (N,13) int8   true red access after the step (after autoreset, if any)
    final_obs: np.ndarray      # (N,52) float32  last observation of an episode that just ended
    final_access: np.ndarray   # (N,13) int8


def allocate_state(num_envs: int) -> SimState:
    """Zeroed state for ``num_envs`` envs (call :func:`seed_state` and :func:`reset_all` before stepping)."""
    n, h = num_envs, _N
    z = np.zeros
    return SimState(
        key=z(n, np.uint64), episode=z(n, np.int64), t=z(n, np.int32), red_kind=z(n, np.int8),
        sess_priv=z((n, h), np.int16), sess_rem=z((n, h), np.int16), sess_user=z((n, h), np.int16),
        red_file=z((n, h), np.int8), decoys=z((n, h), np.int16), vsftpd=z((n, h), np.int8),
        ot_down=z(n, np.int8), ot_broken=z(n, np.int8), red_ports=z((n, h), np.int16),
        red_scanned=z((n, h), np.int8), ot_known=z(n, np.int8), obs_comp=z((n, h), np.int8),
        last_success=z(n, np.int8), last_dns_empty=z(n, np.int8), bl_state=z(n, np.int8),
        bl_target=z(n, np.int8), bl_s12=z(n, np.int8), m_known_ips=z(n, np.int32), m_known_subnets=z(n, np.int8),
        m_scanned_subnets=z(n, np.int8), m_scanned_ips=z(n, np.int32), m_exploited=z(n, np.int32),
        m_escalated=z(n, np.int32), m_mapped=z(n, np.int32), m_last_ip=z(n, np.int8), m_last_host=z(n, np.int8),
    )


def allocate_buffers(num_envs: int) -> StepBuffers:
    n = num_envs
    return StepBuffers(
        obs=np.zeros((n, 4 * _N), np.float32), reward=np.zeros(n, np.float32), truncated=np.zeros(n, np.bool_),
        access=np.zeros((n, _N), np.int8), final_obs=np.zeros((n, 4 * _N), np.float32),
        final_access=np.zeros((n, _N), np.int8),
    )


def state_bytes_per_env(state: SimState) -> int:
    """Memory of the state per env, in bytes."""
    return int(sum(a.nbytes for a in state) // len(state.key))


# ------------------------------------------------------------------------------------------------------------ RNG
_M1 = np.uint64(0x9E3779B97F4A7C15)
_M2 = np.uint64(0xBF58476D1CE4E5B9)
_M3 = np.uint64(0x94D049BB133111EB)
_C_EP = np.uint64(0xD6E8FEB86659FD93)
_C_T = np.uint64(0xA0761D6478BD642F)
_C_SLOT = np.uint64(0xE7037ED1A0B428DB)
_INV53 = 1.0 / 9007199254740992.0


@njit(inline="always")
def _mix(z):
    z = z + _M1
    z = (z ^ (z >> np.uint64(30))) * _M2
    z = (z ^ (z >> np.uint64(27))) * _M3
    return z ^ (z >> np.uint64(31))


@njit(inline="always")
def _uniform(key, episode, t, slot):
    """U[0,1) draw number ``slot`` of step ``t`` of ``episode`` for the env with ``key``."""
    x = key ^ (np.uint64(episode) * _C_EP) ^ (np.uint64(t) * _C_T) ^ (np.uint64(slot + 1) * _C_SLOT)
    return np.float64(_mix(_mix(x)) >> np.uint64(11)) * _INV53


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


# ------------------------------------------------------------------------------------------------------ bit utils
@njit(inline="always")
def _popcount(x):
    c = 0
    while x:
        x &= x - 1
        c += 1
    return c


@njit(inline="always")
def _nth_bit(mask, n):
    """Index of the n-th (0-based) set bit of mask."""
    i = 0
    while True:
        if mask >> i & 1:
            if n == 0:
                return i
            n -= 1
        i += 1


@njit(inline="always")
def _uniform_bit(mask, u):
    """A set bit of ``mask`` chosen uniformly with the draw ``u``."""
    c = _popcount(mask)
    k = int(u * c)
    if k >= c:
        k = c - 1
    return _nth_bit(mask, k)


@njit(inline="always")
def _n_sessions(s, i, h):
    n = np.int32(s.sess_priv[i, h]) + s.sess_rem[i, h] + s.sess_user[i, h]
    if h == T.USER0:
        n += 1  # red's permanent RedPhish foothold
    return n


@njit(inline="always")
def _has_enterprise_session(s, i):
    return (_n_sessions(s, i, T.ENT0) + _n_sessions(s, i, T.ENT1) + _n_sessions(s, i, T.ENT2)) > 0


# ----------------------------------------------------------------------------------------------------- red agents
@njit(inline="always")
def _bline_choose(s, i):
    """B_lineAgent's next (action kind, target) from its state and the success of red's last action (§4.5)."""
    a = np.int32(s.bl_state[i])
    if s.last_success[i]:
        if a < 14:
            a += 1
    else:
        a = _JUMPS[a]
    if a == 12 and s.bl_s12[i] == 0:
        if s.last_dns_empty[i]:
            a = 1  # built while the Op_Server0 scan was empty: restart at 0, then the loop's success step -> 1
        else:
            s.bl_s12[i] = 1
    s.bl_state[i] = a
    tgt = np.int32(s.bl_target[i])
    if tgt < 0 and a >= 1:
        tgt = T.USER1 + int(_uniform(s.key[i], s.episode[i], s.t[i], _SLOT_BLINE) * 4)
        s.bl_target[i] = tgt
    ent = _ENT_OF_USER[tgt] if tgt >= 0 else -1
    if a == 0:
        return T.R_DRS, T.SUBNET_USER
    if a == 1:
        return T.R_DNS, tgt
    if a == 2:
        return T.R_EXPLOIT, tgt
    if a == 3:
        return T.R_ESCALATE, tgt
    if a == 4:
        return T.R_DNS, ent
    if a == 5:
        return T.R_EXPLOIT, ent
    if a == 6:
        return T.R_ESCALATE, ent
    if a == 7:
        return T.R_DRS, T.SUBNET_ENTERPRISE
    if a == 8:
        return T.R_DNS, T.ENT2
    if a == 9:
        return T.R_EXPLOIT, T.ENT2
    if a == 10:
        return T.R_ESCALATE, T.ENT2
    if a == 11:
        return T.R_DNS, T.OPS0
    if a == 12:
        return T.R_EXPLOIT, T.OPS0
    if a == 13:
        return T.R_ESCALATE, T.OPS0
    return T.R_IMPACT, T.OPS0


@njit(inline="always")
def _meander_choose(s, i):
    """RedMeanderAgent's bookkeeping of its last result, then the first rule that applies (§4.6)."""
    ok = s.last_success[i]
    li = np.int32(s.m_last_ip[i])
    if li >= 0:
        b = np.int32(1) << li
        if ok:
            s.m_mapped[i] |= b
        else:
            s.m_exploited[i] &= ~b
            op = s.m_escalated[i] & T.OP_HOSTS_MASK
            if op:
                s.m_escalated[i] &= ~op
                s.m_exploited[i] &= ~op
            else:
                ent = s.m_escalated[i] & T.ENT_HOSTS_MASK
                if ent:
                    s.m_escalated[i] &= ~ent
                    s.m_exploited[i] &= ~ent
        s.m_last_ip[i] = -1
    lh = np.int32(s.m_last_host[i])
    if lh >= 0:
        b = np.int32(1) << lh
        if not ok:
            s.m_escalated[i] &= ~b
            if s.m_mapped[i] & b:
                s.m_exploited[i] &= ~b
        s.m_last_host[i] = -1

    if s.m_escalated[i] >> T.OPS0 & 1:
        s.m_last_host[i] = T.OPS0
        return T.R_IMPACT, T.OPS0
    sub = s.m_known_subnets[i] & ~s.m_scanned_subnets[i]
    if sub:
        k = _nth_bit(sub, 0)
        s.m_scanned_subnets[i] |= 1 << k
        return T.R_DRS, k
    u = _uniform(s.key[i], s.episode[i], s.t[i], _SLOT_RED_TARGET)
    cand = s.m_known_ips[i] & ~s.m_scanned_ips[i]
    if cand:
        h = _uniform_bit(cand, u)
        s.m_scanned_ips[i] |= 1 << h
        return T.R_DNS, h
    mapped = s.m_mapped[i]
    known_hosts = mapped | (1 << T.USER0)
    cand = known_hosts & ~s.m_escalated[i] & ~(mapped & ~s.m_exploited[i])
    if cand:
        h = _uniform_bit(cand, u)
        s.m_escalated[i] |= 1 << h
        s.m_last_host[i] = h
        return T.R_ESCALATE, h
    cand = s.m_known_ips[i] & ~s.m_exploited[i]
    if cand:
        h = _uniform_bit(cand, u)
        s.m_exploited[i] |= 1 << h
        s.m_last_ip[i] = h
        return T.R_EXPLOIT, h
    return T.R_SLEEP, -1  # CybORG raises here; unreachable (the Defender can always be re-tried)


# ---------------------------------------------------------------------------------------------------- red execute
@njit(inline="always")
def _decoy_ports(s, i, h, decoy_ports_tab):
    return decoy_ports_tab[s.decoys[i, h] & 0xFF]


@njit(inline="always")
def _routable(s, i, h):
    return (not _IS_OP[h]) or _has_enterprise_session(s, i)


@njit(inline="always")
def _red_execute(s, i, kind, h, decoy_ports_tab, trapped_by):
    """Run red's action against the post-blue state.

    Returns (success, n_events, n_distinct_local_ports, has_4444) of the events it logs on host ``h``.
    """
    if kind == T.R_SLEEP:
        return 0, 0, 0, 0
    if kind == T.R_DRS:
        if h == T.SUBNET_OPERATIONAL and not _has_enterprise_session(s, i):
            return 0, 0, 0, 0
        s.m_known_ips[i] |= _SUBNET_HOSTS[h]
        return 1, 0, 0, 0
    if kind == T.R_DNS:
        if not _routable(s, i, h):
            s.last_dns_empty[i] = 1
            return 1, 0, 0, 0
        s.last_dns_empty[i] = 0
        ports = _REAL_PORTS[h] | _decoy_ports(s, i, h, decoy_ports_tab)
        s.red_ports[i, h] = ports
        s.red_scanned[i, h] = 1
        conns = _REAL_CONNS[h] + _popcount(s.decoys[i, h] & ~_VS_BIT) + s.vsftpd[i, h]
        return 1, conns, _popcount(ports), 0
    if kind == T.R_EXPLOIT:
        return _exploit(s, i, h, trapped_by)
    if kind == T.R_ESCALATE:
        n = _n_sessions(s, i, h)
        if n == 0:
            return 0, 0, 0, 0
        if s.sess_priv[i, h] == 0 and h != T.USER0:
            nu = np.int32(s.sess_rem[i, h]) + s.sess_user[i, h]
            u = _uniform(s.key[i], s.episode[i], s.t[i], _SLOT_ESCALATE)
            if u * nu < s.sess_rem[i, h]:
                s.sess_rem[i, h] -= 1
            else:
                s.sess_user[i, h] -= 1
            s.sess_priv[i, h] += 1
            s.red_file[i, h] = 1
        r = _REVEAL_IP[h]
        if r >= 0:
            s.m_known_ips[i] |= 1 << r
        r = _REVEAL_SUBNET[h]
        if r >= 0:
            s.m_known_subnets[i] |= 1 << r
        if h == T.OPS0:
            s.ot_known[i] = 1
        return 1, 0, 0, 0
    # Impact
    if _n_sessions(s, i, T.OPS0) == 0 or s.ot_known[i] == 0:
        return 0, 0, 0, 0
    if s.ot_broken[i] == 0:
        s.ot_down[i] = 1
    return 1, 0, 0, 0


@njit(inline="always")
def _exploit(s, i, h, trapped_by):
    """ExploitRemoteService on host h: choose from remembered ports, run against current processes (§4.3-4.4)."""
    if not s.red_scanned[i, h] or not _routable(s, i, h):
        return 0, 0, 0, 0
    p = s.red_ports[i, h]
    opts = 0
    if p >> T.P21 & 1:
        opts |= 1 << T.X_FTP
    if p >> T.P25 & 1:
        opts |= 1 << T.X_HARAKA
    if (p >> T.P3390 & 1) and ((p >> T.P80 & 1) or (p >> T.P443 & 1)):
        opts |= 1 << T.X_SQL
    if p >> T.P443 & 1:
        opts |= 1 << T.X_HTTPS
    if p >> T.P80 & 1:
        opts |= 1 << T.X_HTTP
    if p >> T.P139 & 1:
        opts |= 1 << T.X_ETERNAL
    if p >> T.P3389 & 1:
        opts |= 1 << T.X_BLUEKEEP
    if p >> T.P22 & 1:
        opts |= 1 << T.X_SSH
    if opts == 0:
        return 0, 0, 0, 0
    key, ep, t = s.key[i], s.episode[i], s.t[i]
    top = _nth_bit(opts, 0)
    e = top
    if opts != (1 << top):
        if _uniform(key, ep, t, _SLOT_EXPLOIT_TOP) >= 0.75:
            e = _uniform_bit(opts & ~(1 << top), _uniform(key, ep, t, _SLOT_EXPLOIT_OTHER))
    out = _OUTCOME[h, e]
    if e == T.X_SSH:
        if out == T.OUT_SSH_USER:
            s.sess_user[i, h] += 1
            return 1, 11, 1, 0
        if out == T.OUT_SSH_FAIL or (s.decoys[i, h] & _SSHD_BIT):
            return 0, 10, 1, 0
        return 0, 0, 0, 0
    if out == T.OUT_PRIV or out == T.OUT_USER:
        s.red_file[i, h] = 1
        detected = _uniform(key, ep, t, _SLOT_DETECT) < 0.95
        if out == T.OUT_PRIV:
            s.sess_priv[i, h] += 1
        elif detected:
            s.sess_rem[i, h] += 1
        else:
            s.sess_user[i, h] += 1
        if detected:
            return 1, 2, 2, 1
        return 1, 1, 1, 0
    if s.decoys[i, h] & trapped_by[e]:
        return 0, 2, 1, 0
    return 0, 0, 0, 0


# ------------------------------------------------------------------------------------------------ blue execution
@njit(inline="always")
def _restore(s, i, h, official_bugs):
    s.sess_priv[i, h] = 0
    s.sess_rem[i, h] = 0
    s.sess_user[i, h] = 0
    s.red_file[i, h] = 0
    s.decoys[i, h] = 0
    s.vsftpd[i, h] = 0
    if h == T.OPS0:
        s.ot_down[i] = 0
        if official_bugs:
            s.ot_broken[i] = 1


@njit(inline="always")
def _try_decoy(s, i, k, h, decoy_ports_tab):
    """Place decoy k on host h if its OS matches and its port is free; True on success."""
    os_ = _DECOY_OS[k]
    if (os_ == T.OS_WINDOWS and not _WINDOWS[h]) or (os_ == T.OS_LINUX and _WINDOWS[h]):
        return False
    used = _REAL_PORTS[h] | _decoy_ports(s, i, h, decoy_ports_tab)
    if used >> _DECOY_CHECK[k] & 1:
        return False
    s.decoys[i, h] |= 1 << k
    if k == T.D_VSFTPD:
        s.vsftpd[i, h] += 1
    return True


@njit(inline="always")
def _classify(n, n_ports, has4444, first_is_decoy):
    """BlueTableWrapper._interpret_connections (§6): the Activity of a host's anomalous process entries."""
    if n >= 3 and n_ports >= 3:
        return ACT_SCAN
    if has4444:
        return ACT_EXPLOIT
    if n >= 3 and n_ports == 1:
        return ACT_EXPLOIT
    if first_is_decoy:
        return ACT_NONE
    return ACT_SCAN


@njit(inline="always")
def _write_access(s, i, out):
    for h in range(_N):
        if s.sess_priv[i, h] > 0 or h == T.USER0:
            out[i, h] = T.ACCESS_PRIVILEGED
        elif s.sess_rem[i, h] + s.sess_user[i, h] > 0:
            out[i, h] = T.ACCESS_USER
        else:
            out[i, h] = T.ACCESS_NONE


@njit(inline="always")
def _reset_env(s, i):
    s.episode[i] += 1
    s.t[i] = 0
    for h in range(_N):
        s.sess_priv[i, h] = 0
        s.sess_rem[i, h] = 0
        s.sess_user[i, h] = 0
        s.red_file[i, h] = 0
        s.decoys[i, h] = 0
        s.vsftpd[i, h] = 0
        s.red_ports[i, h] = 0
        s.red_scanned[i, h] = 0
        s.obs_comp[i, h] = 0
    s.ot_down[i] = 0
    s.ot_broken[i] = 0
    s.ot_known[i] = 0
    s.last_success[i] = 0
    s.last_dns_empty[i] = 0
    s.bl_state[i] = 0
    s.bl_target[i] = -1
    s.bl_s12[i] = 0
    s.m_known_ips[i] = 1 << T.USER0
    s.m_known_subnets[i] = 1 << T.SUBNET_USER
    s.m_scanned_subnets[i] = 0
    s.m_scanned_ips[i] = 0
    s.m_exploited[i] = 0
    s.m_escalated[i] = 0
    s.m_mapped[i] = 0
    s.m_last_ip[i] = -1
    s.m_last_host[i] = -1


@njit(inline="always")
def _step_env(s, i, action, episode_length, official_bugs, decoy_ports_tab, trapped_by, b):
    """One CAGE2 step of env i: red chooses, blue executes, red executes, reward, observation (§0)."""
    # red picks its action from its own view of the previous step
    rk = s.red_kind[i]
    r_kind, r_tgt = T.R_SLEEP, -1
    if rk == T.RED_BLINE:
        r_kind, r_tgt = _bline_choose(s, i)
    elif rk == T.RED_MEANDER:
        r_kind, r_tgt = _meander_choose(s, i)

    # blue executes first
    restore_cost = 0
    decoy_host = -1
    analyse_host = -1
    analyse_file = 0
    if action >= T.A_RESTORE:
        h = action - T.A_RESTORE
        _restore(s, i, h, official_bugs)
        restore_cost = T.RESTORE_COST_TENTHS
        s.obs_comp[i, h] = 0
    elif action >= T.A_DECOY:
        k = (action - T.A_DECOY) // _N
        h = (action - T.A_DECOY) % _N
        if _try_decoy(s, i, k, h, decoy_ports_tab):
            decoy_host = h
    elif action >= T.A_REMOVE:
        h = action - T.A_REMOVE
        s.sess_rem[i, h] = 0
        if s.obs_comp[i, h] != 0:
            s.obs_comp[i, h] = 1
    elif action >= T.A_ANALYSE:
        analyse_host = action - T.A_ANALYSE
        analyse_file = s.red_file[i, analyse_host]

    # then red
    ok, n_ev, n_ports, has4444 = _red_execute(s, i, r_kind, r_tgt, decoy_ports_tab, trapped_by)
    s.last_success[i] = ok
    ev_host = r_tgt if n_ev > 0 else -1

    # reward on the true state, in tenths (exact rounding)
    r = restore_cost
    for h in range(_N):
        if s.sess_priv[i, h] > 0:
            r += _CONF[h]
    if s.ot_down[i]:
        r += T.IMPACT_PENALTY_TENTHS
    b.reward[i] = -np.float32(r) / np.float32(10.0)

    # blue observation: anomalies of this step, then files from Analyse
    for h in range(4 * _N):
        b.obs[i, h] = 0.0
    for which in range(2):
        h = decoy_host if which == 0 else ev_host
        if h < 0 or (which == 1 and h == decoy_host):
            continue
        n = 0
        first_decoy = False
        if h == decoy_host:
            n = 1
            first_decoy = True
        np_, f4 = 0, 0
        if h == ev_host:
            n += n_ev
            np_ = n_ports
            f4 = has4444
        act = _classify(n, np_, f4, first_decoy)
        if act == ACT_EXPLOIT:
            s.obs_comp[i, h] = 2
            b.obs[i, 4 * h] = 1.0
            b.obs[i, 4 * h + 1] = 1.0
        elif act == ACT_SCAN:
            b.obs[i, 4 * h] = 1.0
    if analyse_host >= 0 and analyse_file:
        s.obs_comp[i, analyse_host] = 3
    for h in range(_N):
        c = s.obs_comp[i, h]
        if c == 1 or c == 3:
            b.obs[i, 4 * h + 2] = 1.0
        if c >= 2:
            b.obs[i, 4 * h + 3] = 1.0

    s.t[i] += 1
    if s.t[i] >= episode_length:
        b.truncated[i] = True
        for j in range(4 * _N):
            b.final_obs[i, j] = b.obs[i, j]
            b.obs[i, j] = 0.0
        _write_access(s, i, b.final_access)
        _reset_env(s, i)
    else:
        b.truncated[i] = False
    _write_access(s, i, b.access)


@njit(cache=True)
def _step_range(s, actions, lo, hi, episode_length, official_bugs, decoy_ports_tab, trapped_by, b):
    for i in range(lo, hi):
        _step_env(s, i, actions[i], episode_length, official_bugs, decoy_ports_tab, trapped_by, b)


@njit(parallel=True, cache=True)
def _step_kernel(s, actions, n_chunks, episode_length, official_bugs, decoy_ports_tab, trapped_by, b):
    # prange over chunks calling a non-inlined function: numba's parfor lowering does not write back through a
    # NamedTuple of arrays used directly inside the prange body.
    n = actions.shape[0]
    for c in prange(n_chunks):
        _step_range(s, actions, c * n // n_chunks, (c + 1) * n // n_chunks, episode_length, official_bugs,
                    decoy_ports_tab, trapped_by, b)


@njit(cache=True)
def _reset_range(s, mask, lo, hi, b):
    for i in range(lo, hi):
        if mask[i]:
            _reset_env(s, i)
            for j in range(4 * _N):
                b.obs[i, j] = 0.0
            _write_access(s, i, b.access)


_SERIAL_BELOW = 512  # below this many envs threads cost more than they save


def _n_chunks(n: int) -> int:
    return max(1, min(n // 256, 8 * numba.get_num_threads()))


# ---------------------------------------------------------------------------------------------------- public API
def seed_state(state: SimState, seed: int, red_kind: np.ndarray | int) -> None:
    """Give each env its RNG key and red agent; episode counters restart so a seed fully defines a run."""
    state.key[:] = env_keys(seed, len(state.key))
    state.episode[:] = -1  # the first reset makes it 0
    state.red_kind[:] = red_kind


def reset_envs(state: SimState, buffers: StepBuffers, mask: np.ndarray | None = None) -> None:
    """Start a new episode in the envs selected by ``mask`` (all by default); writes obs and access."""
    if mask is None:
        mask = np.ones(len(state.key), np.bool_)
    _reset_range(state, mask, 0, len(mask), buffers)


def step(state: SimState, actions: np.ndarray, buffers: StepBuffers, episode_length: int,
         official_bugs: bool = True) -> None:
    """Advance every env one step in place. ``actions`` is an int array of blue actions in 0..144.

    Envs whose episode reaches ``episode_length`` are truncated and reset in the same call (their last observation
    goes to ``buffers.final_obs``).
    """
    ports = _DECOY_PORTS_OFFICIAL if official_bugs else _DECOY_PORTS_FIXED
    trapped = _TRAPPED_BY_OFFICIAL if official_bugs else _TRAPPED_BY_FIXED
    n = len(actions)
    if n < _SERIAL_BELOW:
        _step_range(state, actions, 0, n, np.int32(episode_length), bool(official_bugs), ports, trapped, buffers)
    else:
        _step_kernel(state, actions, _n_chunks(n), np.int32(episode_length), bool(official_bugs), ports, trapped,
                     buffers)


__all__ = ["SimState", "StepBuffers", "allocate_state", "allocate_buffers", "seed_state", "reset_envs", "step",
           "env_keys", "state_bytes_per_env"]
