"""The CAGE2 rules for one env, written once as plain Python and compiled for every target.

Each function here reads and writes env ``i`` of a batched state (:class:`workflow_rl.sim.native.SimState`, a struct
of arrays with the env batch first) and calls only the others. :func:`compile_rules` builds the set for one target:
it rebuilds every function over a fresh globals dict (``types.FunctionType(f.__code__, namespace, ...)``) holding the
target's compiled versions and decorates it with the target's jit, so a call ``_exploit(...)`` inside ``_step_env``
resolves to the CPU function in the ``numba.njit`` set and to the device function in the ``numba.cuda.jit`` set. The
CPU launcher (:mod:`workflow_rl.sim.native`, ``prange`` over env chunks) and the CUDA launcher
(:mod:`workflow_rl.sim.cuda`, one thread per env) are the only target-specific code.

Why rebuild rather than call ``@njit`` functions from CUDA kernels (which recent numba-cuda can do): the same plain
functions also run under numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``), which executes kernels as Python and
cannot hand its fake device arrays to CPU-compiled functions. With one source compiled per target, CI on a CPU runs the
real CUDA launch path, indexing and all, through the simulator and checks it bit for bit against the CPU kernel.

Everything is integer arithmetic except the RNG's float64 draws (a 53-bit integer times 2**-53, exact, compared with
constants) and the reward, a float32 table lookup by integer tenths: no float rounding can differ between targets.

The rules' tables are in :mod:`workflow_rl.sim.tables`; section numbers (SPEC §x) refer to the CAGE2 specification.
Randomness is counter-based: every draw is a hash of (env key, episode, step, draw slot), so a trajectory depends only
on the run seed and the env index, never on the thread schedule, the batch size or the target.
"""
from __future__ import annotations

import types
from typing import Callable

import numpy as np
from numba import prange

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
_SLOT_RED_AGENT = 6   # the episode's red agent, drawn at step 0 of the episode (no other draw uses this slot)
# _N_RED (how many red kinds) and _red_choose (the dispatch to each attacker's rules) are not written
# here: sim.attackers.rule_namespace adds them, for the attackers registered, to the namespace the rules compile in.

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


def kernel_tables(official_bugs: bool) -> tuple[np.ndarray, np.ndarray]:
    """The (decoy ports, trapped-by) lookup tables the step takes as arguments: official CybORG or bugs fixed."""
    if official_bugs:
        return _DECOY_PORTS_OFFICIAL, _TRAPPED_BY_OFFICIAL
    return _DECOY_PORTS_FIXED, _TRAPPED_BY_FIXED


# Reward of a step whose penalty is r tenths, for every r a step can reach (a Restore, every host's confidentiality
# and the Impact penalty). The step only indexes this float32 table: no float arithmetic on any target, so CPU and
# GPU rewards are equal by construction (values as the CPU kernel computed them before: -float32(r) / float32(10)).
MAX_PENALTY_TENTHS = T.RESTORE_COST_TENTHS + int(T.CONF_TENTHS.sum()) + T.IMPACT_PENALTY_TENTHS
REWARD_OF_TENTHS = -np.arange(MAX_PENALTY_TENTHS + 1, dtype=np.float32) / np.float32(10.0)

# ------------------------------------------------------------------------------------------------------------ RNG
_M1 = np.uint64(0x9E3779B97F4A7C15)
_M2 = np.uint64(0xBF58476D1CE4E5B9)
_M3 = np.uint64(0x94D049BB133111EB)
_C_EP = np.uint64(0xD6E8FEB86659FD93)
_C_T = np.uint64(0xA0761D6478BD642F)
_C_SLOT = np.uint64(0xE7037ED1A0B428DB)
_INV53 = 1.0 / 9007199254740992.0


def _mix(z):
    z = z + _M1
    z = (z ^ (z >> np.uint64(30))) * _M2
    z = (z ^ (z >> np.uint64(27))) * _M3
    return z ^ (z >> np.uint64(31))


def _uniform(key, episode, t, slot):
    """U[0,1) draw number ``slot`` of step ``t`` of ``episode`` for the env with ``key``."""
    x = key ^ (np.uint64(episode) * _C_EP) ^ (np.uint64(t) * _C_T) ^ (np.uint64(slot + 1) * _C_SLOT)
    return np.float64(_mix(_mix(x)) >> np.uint64(11)) * _INV53


# ------------------------------------------------------------------------------------------------------ bit utils
def _popcount(x):
    c = 0
    while x:
        x &= x - 1
        c += 1
    return c


def _nth_bit(mask, n):
    """Index of the n-th (0-based) set bit of mask."""
    i = 0
    while True:
        if mask >> i & 1:
            if n == 0:
                return i
            n -= 1
        i += 1


def _uniform_bit(mask, u):
    """A set bit of ``mask`` chosen uniformly with the draw ``u``."""
    c = _popcount(mask)
    k = int(u * c)
    if k >= c:
        k = c - 1
    return _nth_bit(mask, k)


def _n_sessions(s, i, h):
    n = np.int32(s.sess_priv[i, h]) + s.sess_rem[i, h] + s.sess_user[i, h]
    if h == T.USER0:
        n += 1  # red's permanent RedPhish foothold
    return n


def _has_enterprise_session(s, i):
    return (_n_sessions(s, i, T.ENT0) + _n_sessions(s, i, T.ENT1) + _n_sessions(s, i, T.ENT2)) > 0


# ----------------------------------------------------------------------------------------------------- red agents
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
def _decoy_ports(s, i, h, decoy_ports_tab):
    return decoy_ports_tab[s.decoys[i, h] & 0xFF]


def _routable(s, i, h):
    return (not _IS_OP[h]) or _has_enterprise_session(s, i)


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
            s.m_known_ips[i] |= np.int32(1) << r  # not 1 << r: an int8 shift overflows in plain Python (the simulator)
        r = _REVEAL_SUBNET[h]
        if r >= 0:
            s.m_known_subnets[i] |= np.int32(1) << r
        if h == T.OPS0:
            s.ot_known[i] = 1
        return 1, 0, 0, 0
    # Impact: stops OTService, which only Op_Server0 runs (elsewhere it fails, changing nothing)
    if h != T.OPS0 or _n_sessions(s, i, T.OPS0) == 0 or s.ot_known[i] == 0:
        return 0, 0, 0, 0
    if s.ot_broken[i] == 0:
        s.ot_down[i] = 1
    return 1, 0, 0, 0


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


def _write_access(s, i, out):
    for h in range(_N):
        if s.sess_priv[i, h] > 0 or h == T.USER0:
            out[i, h] = T.ACCESS_PRIVILEGED
        elif s.sess_rem[i, h] + s.sess_user[i, h] > 0:
            out[i, h] = T.ACCESS_USER
        else:
            out[i, h] = T.ACCESS_NONE


def _draw_red_kind(s, i):
    """The red agent of env i's new episode, drawn from its mixture: the first kind whose cumulative probability
    (``s.red_cdf[i]``) exceeds a uniform draw of the env's own stream. A fixed agent's row is a step (0 before its
    kind, 2 from it on), so it is always drawn; the slot is used by nothing else, so a fixed agent's trajectories
    are the ones they were before mixtures existed."""
    u = _uniform(s.key[i], s.episode[i], 0, _SLOT_RED_AGENT)
    k = 0
    while k < _N_RED - 1 and u >= s.red_cdf[i, k]:  # noqa: F821 (sim.attackers.rule_namespace)
        k += 1
    return k


def _reset_env(s, i):
    s.episode[i] += 1
    s.t[i] = 0
    s.red_kind[i] = _draw_red_kind(s, i)
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


def _step_env(s, i, action, episode_length, official_bugs, decoy_ports_tab, trapped_by, b):
    """One CAGE2 step of env i: red chooses, blue executes, red executes, reward, observation (§0)."""
    # red picks its action from its own view of the previous step
    r_kind, r_tgt = _red_choose(s, i, s.red_kind[i])  # noqa: F821 (sim.attackers.rule_namespace)

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
    b.red_action[i, 0] = r_kind
    b.red_action[i, 1] = r_tgt
    b.red_action[i, 2] = ok
    ev_host = r_tgt if n_ev > 0 else -1

    # reward on the true state: integer tenths summed, one table lookup
    r = restore_cost
    for h in range(_N):
        if s.sess_priv[i, h] > 0:
            r += _CONF[h]
    if s.ot_down[i]:
        r += T.IMPACT_PENALTY_TENTHS
    b.reward[i] = REWARD_OF_TENTHS[r]

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



# ------------------------------------------------------------------------------------------------- CPU launchers
def step_range(s, actions, mask, lo, hi, episode_length, official_bugs, decoy_ports_tab, trapped_by, b):
    """Step envs lo..hi-1 selected by ``mask`` (every one where ``mask`` is empty; one CPU thread); the others and
    their output rows are untouched. One launcher for masked and unmasked steps: the rules are inlined into it, and
    a second inlined copy (a masked launcher of its own) cost a cold compile of 22 s more."""
    every = mask.shape[0] == 0
    for i in range(lo, hi):
        if every or mask[i]:
            _step_env(s, i, actions[i], episode_length, official_bugs, decoy_ports_tab, trapped_by, b)


def step_chunks(s, actions, mask, n_chunks, episode_length, official_bugs, decoy_ports_tab, trapped_by, b):
    """Step the envs ``mask`` selects (every one where it is empty), ``n_chunks`` chunks of envs in parallel
    (``prange``)."""
    # prange over chunks calling a non-inlined function: numba's parfor lowering does not write back through a
    # NamedTuple of arrays used directly inside the prange body.
    n = actions.shape[0]
    for c in prange(n_chunks):
        step_range(s, actions, mask, c * n // n_chunks, (c + 1) * n // n_chunks, episode_length, official_bugs,
                   decoy_ports_tab, trapped_by, b)


def reset_range(s, mask, lo, hi, b):
    """Start a new episode in the envs lo..hi-1 selected by ``mask``; writes their obs (zeros) and access."""
    for i in range(lo, hi):
        if mask[i]:
            _reset_env(s, i)
            for j in range(4 * _N):
                b.obs[i, j] = 0.0
            _write_access(s, i, b.access)


# ------------------------------------------------------------------------------------------------ GPU launcher
def step_grid(s, actions, episode_length, official_bugs, decoy_ports_tab, trapped_by, b):
    """Step env ``thread_index()`` (one GPU thread per env; ``sim/cuda.py`` supplies ``thread_index``). Written here
    so that numba's kernel cache, keyed on this file, is rebuilt whenever a rule changes."""
    i = thread_index()  # noqa: F821 (defined by the CUDA namespace compile_rules fills)
    if i < actions.shape[0]:
        _step_env(s, i, actions[i], episode_length, official_bugs, decoy_ports_tab, trapped_by, b)


# every per-env function, callees before callers (the order only matters for reading)
RULES = (_mix, _uniform, _popcount, _nth_bit, _uniform_bit, _n_sessions, _has_enterprise_session, _bline_choose,
         _meander_choose, _decoy_ports, _routable, _exploit, _red_execute, _restore, _try_decoy, _classify,
         _write_access, _draw_red_kind, _reset_env, _step_env)


def compile_rules(jit: Callable, namespace: dict | None = None, functions: tuple = RULES, suffix: str = "") -> dict:
    """``functions`` (every rule by default) decorated with ``jit`` (e.g. ``numba.njit(inline="always")``) and
    added to ``namespace`` (a fresh copy of this module's globals by default), which is also their globals: each
    calls the versions in ``namespace``. Returns ``namespace``. Compilation itself happens at the first call.
    ``suffix`` is added to each function's qualified name, which names its entry in numba's disk cache: the
    launchers of another attacker registry (``sim.attackers.fingerprint``) are other entries."""
    if namespace is None:
        namespace = dict(globals())
    for f in functions:
        fn = types.FunctionType(f.__code__, namespace, f.__name__, f.__defaults__)
        if suffix:
            fn.__qualname__ = f"{fn.__qualname__}_{suffix}"
        namespace[f.__name__] = jit(fn)
    return namespace
