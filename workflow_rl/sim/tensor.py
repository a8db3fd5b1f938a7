"""The native engine as batched torch tensor code: the path for GPUs (and any torch device).

Same rules (:mod:`workflow_rl.sim.tables`), same state layout (:class:`workflow_rl.sim.native.SimState`, with
tensors instead of arrays) and the same counter-based random draws as the numba kernel, so both paths produce
bit-identical trajectories; ``tests/test_tensor_engine.py`` checks this on long random runs. Every branch of the
step is evaluated for every env and merged with masks, which is what a GPU wants; on a CPU the numba kernel is
several times faster.

64-bit unsigned hashing is done in int64 (two's-complement multiply and xor give the same bits; logical right
shifts are emulated with a mask).
"""
from __future__ import annotations

import numpy as np
import torch

from workflow_rl.sim import native as N
from workflow_rl.sim import tables as T

_N = T.N_HOSTS
_I64 = torch.int64


def _s64(x: int) -> int:
    """An unsigned 64-bit constant as the int64 with the same bits."""
    x &= (1 << 64) - 1
    return x - (1 << 64) if x >= 1 << 63 else x


_M1, _M2, _M3 = _s64(0x9E3779B97F4A7C15), _s64(0xBF58476D1CE4E5B9), _s64(0x94D049BB133111EB)
_C_EP, _C_T, _C_SLOT = _s64(0xD6E8FEB86659FD93), _s64(0xA0761D6478BD642F), _s64(0xE7037ED1A0B428DB)


def _srl(z: torch.Tensor, k: int) -> torch.Tensor:
    """Logical right shift of int64 bits."""
    return (z >> k) & ((1 << (64 - k)) - 1)


def _mix(z: torch.Tensor) -> torch.Tensor:
    z = z + _M1
    z = (z ^ _srl(z, 30)) * _M2
    z = (z ^ _srl(z, 27)) * _M3
    return z ^ _srl(z, 31)


def uniform(key: torch.Tensor, episode: torch.Tensor, t: torch.Tensor, slot: int) -> torch.Tensor:
    """float64 U[0,1) draws, bit-identical to the numba kernel's ``_uniform``."""
    x = key ^ (episode * _C_EP) ^ (t.to(_I64) * _C_T) ^ _s64((slot + 1) * 0xE7037ED1A0B428DB)
    return _srl(_mix(_mix(x)), 11).to(torch.float64) * (1.0 / 9007199254740992.0)


class _Tables:
    """The rule tables as tensors on one device (built once per device)."""

    def __init__(self, device: torch.device, official_bugs: bool):
        def t(x, dtype=_I64):
            return torch.as_tensor(np.asarray(x), dtype=dtype, device=device)

        self.real_ports = t(T.REAL_PORTS)
        self.real_conns = t(T.REAL_CONNS)
        self.conf = t(T.CONF_TENTHS)
        self.outcome = t(T.EXPLOIT_OUTCOME)
        self.decoy_os = t(T.DECOY_OS)
        self.decoy_check = t(T.DECOY_CHECK_PORT)
        self.windows = t(T.WINDOWS, torch.bool)
        self.is_op = t(T.IS_OPERATIONAL, torch.bool)
        self.jumps = t(T.BLINE_JUMPS)
        self.ent_of_user = t(T.BLINE_ENTERPRISE_OF_USER)
        self.reveal_ip = t(T.REVEAL_IP)
        self.reveal_subnet = t(T.REVEAL_SUBNET)
        self.subnet_hosts = t(T.SUBNET_HOSTS_MASK)
        self.decoy_ports = t(N._DECOY_PORTS_OFFICIAL if official_bugs else N._DECOY_PORTS_FIXED)
        self.trapped_by = t(N._TRAPPED_BY_OFFICIAL if official_bugs else N._TRAPPED_BY_FIXED)
        self.hosts = torch.arange(_N, device=device)
        self.bits = (1 << torch.arange(16, device=device)).to(_I64)
        # B_line: action kind per state, and target (>=0 a host/subnet, -1 the user target, -2 its Enterprise host)
        self.bl_kind = t([T.R_DRS, T.R_DNS, T.R_EXPLOIT, T.R_ESCALATE, T.R_DNS, T.R_EXPLOIT, T.R_ESCALATE, T.R_DRS,
                          T.R_DNS, T.R_EXPLOIT, T.R_ESCALATE, T.R_DNS, T.R_EXPLOIT, T.R_ESCALATE, T.R_IMPACT])
        self.bl_tgt = t([T.SUBNET_USER, -1, -1, -1, -2, -2, -2, T.SUBNET_ENTERPRISE, T.ENT2, T.ENT2, T.ENT2,
                         T.OPS0, T.OPS0, T.OPS0, T.OPS0])


_TABLES: dict[tuple, _Tables] = {}


def _tables(device: torch.device, official_bugs: bool) -> _Tables:
    k = (str(device), bool(official_bugs))
    if k not in _TABLES:
        _TABLES[k] = _Tables(device, official_bugs)
    return _TABLES[k]


# ------------------------------------------------------------------------------------------------------- helpers
def _popcount(x: torch.Tensor, tb: _Tables, width: int = 16) -> torch.Tensor:
    return ((x.unsqueeze(-1) & tb.bits[:width]) != 0).sum(-1)


def _uniform_bit(mask: torch.Tensor, u: torch.Tensor, tb: _Tables) -> torch.Tensor:
    """A set bit of each mask chosen with its draw u (matches the kernel's _uniform_bit); -1 where mask is 0."""
    bits = (mask.unsqueeze(-1) & tb.bits[:_N]) != 0
    c = bits.sum(-1)
    k = torch.minimum((u * c).to(_I64), (c - 1).clamp(min=0))
    rank = bits.cumsum(-1) - 1
    hit = bits & (rank == k.unsqueeze(-1))
    return torch.where(c > 0, hit.to(torch.int8).argmax(-1), torch.full_like(c, -1))


def _gather(x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    """x[i, h[i]] (h clamped to a valid host; callers mask the invalid ones)."""
    return x.gather(1, h.clamp(0, _N - 1).unsqueeze(1)).squeeze(1)


def _onehot(h: torch.Tensor, on: torch.Tensor, tb: _Tables) -> torch.Tensor:
    return (tb.hosts == h.unsqueeze(1)) & on.unsqueeze(1)


def _sessions(s, h, tb) -> torch.Tensor:
    n = _gather(s.sess_priv, h).to(_I64) + _gather(s.sess_rem, h) + _gather(s.sess_user, h)
    return n + (h == T.USER0).to(_I64)


def _has_ent_session(s) -> torch.Tensor:
    ent = slice(T.ENT0, T.ENT2 + 1)
    return ((s.sess_priv[:, ent].to(_I64) + s.sess_rem[:, ent] + s.sess_user[:, ent]).sum(1)) > 0


def _add_at(x: torch.Tensor, onehot: torch.Tensor, v) -> None:
    x.add_((onehot * v).to(x.dtype))


def _set_at(x: torch.Tensor, onehot: torch.Tensor, v) -> None:
    x.copy_(torch.where(onehot, torch.as_tensor(v, dtype=x.dtype, device=x.device), x))


def _setw(x: torch.Tensor, m: torch.Tensor, v) -> None:
    """x[m] = v for per-env tensors (v a scalar or a tensor)."""
    x.copy_(torch.where(m, torch.as_tensor(v, device=x.device).to(x.dtype), x))


# ----------------------------------------------------------------------------------------------------- red agents
def _bline_choose(s, on, tb):
    a = s.bl_state.to(_I64)
    ok = s.last_success != 0
    a = torch.where(ok, torch.clamp(a + 1, max=14), tb.jumps[a])
    first12 = (a == 12) & (s.bl_s12 == 0)
    restart = first12 & (s.last_dns_empty != 0)
    a = torch.where(restart, torch.ones_like(a), a)
    _setw(s.bl_s12, on & first12 & ~restart, 1)
    _setw(s.bl_state, on, a)
    tgt = s.bl_target.to(_I64)
    draw = T.USER1 + (uniform(s.key, s.episode, s.t, N._SLOT_BLINE) * 4).to(_I64)
    pick = on & (tgt < 0) & (a >= 1)
    tgt = torch.where(pick, draw, tgt)
    _setw(s.bl_target, pick, tgt)
    ent = torch.where(tgt >= 0, tb.ent_of_user[tgt.clamp(min=0)], torch.full_like(tgt, -1))
    code = tb.bl_tgt[a]
    target = torch.where(code == -1, tgt, torch.where(code == -2, ent, code))
    return tb.bl_kind[a], target


def _fire(rule: torch.Tensor, kind_value: int, choice: torch.Tensor, kind, target, marks):
    """Where ``rule`` fires: take action ``kind_value`` on ``choice`` and set its bit in ``marks``."""
    kind = torch.where(rule, kind_value, kind)
    target = torch.where(rule, choice, target)
    marks = torch.where(rule, marks | (1 << choice.clamp(min=0)), marks)
    return kind, target, marks


def _meander_choose(s, on, tb):
    ok = s.last_success != 0
    li = s.m_last_ip.to(_I64)
    has_li = on & (li >= 0)
    b = torch.where(li >= 0, 1 << li.clamp(min=0), torch.zeros_like(li))
    mapped = torch.where(has_li & ok, s.m_mapped | b, s.m_mapped.to(_I64))
    exploited = s.m_exploited.to(_I64)
    escalated = s.m_escalated.to(_I64)
    fail_ip = has_li & ~ok
    exploited = torch.where(fail_ip, exploited & ~b, exploited)
    op = escalated & T.OP_HOSTS_MASK
    ent = escalated & T.ENT_HOSTS_MASK
    forget = torch.where(op != 0, op, ent)
    forget = torch.where(fail_ip, forget, torch.zeros_like(forget))
    escalated = escalated & ~forget
    exploited = exploited & ~forget
    lh = s.m_last_host.to(_I64)
    has_lh = on & (lh >= 0)
    bh = torch.where(lh >= 0, 1 << lh.clamp(min=0), torch.zeros_like(lh))
    fail_h = has_lh & ~ok
    escalated = torch.where(fail_h, escalated & ~bh, escalated)
    exploited = torch.where(fail_h & ((mapped & bh) != 0), exploited & ~bh, exploited)
    last_ip = torch.where(has_li, torch.full_like(li, -1), li)
    last_host = torch.where(has_lh, torch.full_like(lh, -1), lh)

    u = uniform(s.key, s.episode, s.t, N._SLOT_RED_TARGET)
    kind = torch.full_like(li, T.R_SLEEP)
    target = torch.full_like(li, -1)
    scanned_sub = s.m_scanned_subnets.to(_I64)
    scanned_ips = s.m_scanned_ips.to(_I64)

    r1 = (escalated >> T.OPS0) & 1 != 0
    kind = torch.where(r1, T.R_IMPACT, kind)
    target = torch.where(r1, T.OPS0, target)
    last_host = torch.where(r1, T.OPS0, last_host)
    done = r1

    # rules 2-5: the first that has candidates fires; each marks its choice in its own memory
    sub = s.m_known_subnets.to(_I64) & ~scanned_sub
    r = ~done & (sub != 0)
    first_sub = torch.where((sub & 1) != 0, 0, torch.where((sub & 2) != 0, 1, 2))
    kind, target, scanned_sub = _fire(r, T.R_DRS, first_sub, kind, target, scanned_sub)
    done = done | r

    cand = s.m_known_ips.to(_I64) & ~scanned_ips
    r = ~done & (cand != 0)
    kind, target, scanned_ips = _fire(r, T.R_DNS, _uniform_bit(cand, u, tb), kind, target, scanned_ips)
    done = done | r

    cand = (mapped | (1 << T.USER0)) & ~escalated & ~(mapped & ~exploited)
    r = ~done & (cand != 0)
    h = _uniform_bit(cand, u, tb)
    kind, target, escalated = _fire(r, T.R_ESCALATE, h, kind, target, escalated)
    last_host = torch.where(r, h, last_host)
    done = done | r

    cand = s.m_known_ips.to(_I64) & ~exploited
    r = ~done & (cand != 0)
    h = _uniform_bit(cand, u, tb)
    kind, target, exploited = _fire(r, T.R_EXPLOIT, h, kind, target, exploited)
    last_ip = torch.where(r, h, last_ip)

    for field, value in ((s.m_mapped, mapped), (s.m_exploited, exploited), (s.m_escalated, escalated),
                         (s.m_last_ip, last_ip), (s.m_last_host, last_host), (s.m_scanned_subnets, scanned_sub),
                         (s.m_scanned_ips, scanned_ips)):
        _setw(field, on, value)
    return kind, target


# ------------------------------------------------------------------------------------------------------ red execute
def _red_execute(s, kind, h, tb):
    """Returns (success, n_events, n_distinct_ports, has_4444) per env; mutates s like the kernel."""
    zero = torch.zeros_like(h)
    ent_sess = _has_ent_session(s)
    hc = h.clamp(0, _N - 1)
    routable = ~tb.is_op[hc] | ent_sess
    ok = zero.clone()
    n_ev, n_p, f4 = zero.clone(), zero.clone(), zero.clone()

    # DiscoverRemoteSystems (h is a subnet)
    drs = kind == T.R_DRS
    drs_ok = drs & ((h != T.SUBNET_OPERATIONAL) | ent_sess)
    _setw(s.m_known_ips, drs_ok, s.m_known_ips.to(_I64) | tb.subnet_hosts[h.clamp(0, 2)])
    ok = torch.where(drs_ok, 1, ok)

    # DiscoverNetworkServices
    dns = kind == T.R_DNS
    _setw(s.last_dns_empty, dns, (~routable).to(torch.int8))
    dns_ok = dns & routable
    decoys_h = _gather(s.decoys, h).to(_I64)
    ports = tb.real_ports[hc] | tb.decoy_ports[decoys_h & 0xFF]
    oh = _onehot(h, dns_ok, tb)
    _set_at(s.red_ports, oh, 0)
    _add_at(s.red_ports, oh, ports.unsqueeze(1))
    _set_at(s.red_scanned, oh, 1)
    conns = tb.real_conns[hc] + _popcount(decoys_h & ~(1 << T.D_VSFTPD), tb, 8) + _gather(s.vsftpd, h)
    ok = torch.where(dns, 1, ok)
    n_ev = torch.where(dns_ok, conns, n_ev)
    n_p = torch.where(dns_ok, _popcount(ports, tb), n_p)

    # ExploitRemoteService
    exp = kind == T.R_EXPLOIT
    p = _gather(s.red_ports, h).to(_I64)
    go = exp & (_gather(s.red_scanned, h) != 0) & routable

    def has(port):
        return (p >> port) & 1 != 0

    opts = (has(T.P21).to(_I64) << T.X_FTP) | (has(T.P25).to(_I64) << T.X_HARAKA) \
        | ((has(T.P3390) & (has(T.P80) | has(T.P443))).to(_I64) << T.X_SQL) \
        | (has(T.P443).to(_I64) << T.X_HTTPS) | (has(T.P80).to(_I64) << T.X_HTTP) \
        | (has(T.P139).to(_I64) << T.X_ETERNAL) | (has(T.P3389).to(_I64) << T.X_BLUEKEEP) \
        | (has(T.P22).to(_I64) << T.X_SSH)
    go = go & (opts != 0)
    top = _uniform_bit(opts & -opts, torch.zeros_like(h, dtype=torch.float64), tb)  # lowest set bit
    top = top.clamp(min=0)
    several = opts != (1 << top)
    other = _uniform_bit(opts & ~(1 << top), uniform(s.key, s.episode, s.t, N._SLOT_EXPLOIT_OTHER), tb)
    take_other = several & (uniform(s.key, s.episode, s.t, N._SLOT_EXPLOIT_TOP) >= 0.75)
    e = torch.where(take_other, other, top).clamp(min=0)
    out = tb.outcome[hc, e]
    is_ssh = e == T.X_SSH
    ssh_ok = go & is_ssh & (out == T.OUT_SSH_USER)
    ssh_fail = go & is_ssh & ~ssh_ok & ((out == T.OUT_SSH_FAIL) | ((decoys_h & (1 << T.D_SSHD)) != 0))
    real = go & ~is_ssh & ((out == T.OUT_PRIV) | (out == T.OUT_USER))
    detected = uniform(s.key, s.episode, s.t, N._SLOT_DETECT) < 0.95
    trap = go & ~is_ssh & ~real & ((decoys_h & tb.trapped_by[e]) != 0)
    _add_at(s.sess_user, _onehot(h, ssh_ok | (real & (out == T.OUT_USER) & ~detected), tb), 1)
    _add_at(s.sess_rem, _onehot(h, real & (out == T.OUT_USER) & detected, tb), 1)
    _add_at(s.sess_priv, _onehot(h, real & (out == T.OUT_PRIV), tb), 1)
    _set_at(s.red_file, _onehot(h, real, tb), 1)
    ok = torch.where(ssh_ok | real, 1, ok)
    n_ev = torch.where(ssh_ok, 11, torch.where(ssh_fail, 10, n_ev))
    n_ev = torch.where(real, torch.where(detected, 2, 1), torch.where(trap, 2, n_ev))
    n_p = torch.where(ssh_ok | ssh_fail | trap, 1, n_p)
    n_p = torch.where(real, torch.where(detected, 2, 1), n_p)
    f4 = torch.where(real & detected, 1, f4)

    # PrivilegeEscalate
    esc = (kind == T.R_ESCALATE) & (_sessions(s, h, tb) > 0)
    priv_h = _gather(s.sess_priv, h)
    upgrade = esc & (priv_h == 0) & (h != T.USER0)
    rem_h = _gather(s.sess_rem, h).to(_I64)
    nu = rem_h + _gather(s.sess_user, h)
    u = uniform(s.key, s.episode, s.t, N._SLOT_ESCALATE)
    from_rem = (u * nu) < rem_h
    _add_at(s.sess_rem, _onehot(h, upgrade & from_rem, tb), -1)
    _add_at(s.sess_user, _onehot(h, upgrade & ~from_rem, tb), -1)
    _add_at(s.sess_priv, _onehot(h, upgrade, tb), 1)
    _set_at(s.red_file, _onehot(h, upgrade, tb), 1)
    rip = tb.reveal_ip[hc]
    _setw(s.m_known_ips, esc & (rip >= 0), s.m_known_ips.to(_I64) | (1 << rip.clamp(min=0)))
    rsub = tb.reveal_subnet[hc]
    _setw(s.m_known_subnets, esc & (rsub >= 0), s.m_known_subnets.to(_I64) | (1 << rsub.clamp(min=0)))
    _setw(s.ot_known, esc & (h == T.OPS0), 1)
    ok = torch.where(esc, 1, ok)

    # Impact
    imp = (kind == T.R_IMPACT) & (_sessions(s, torch.full_like(h, T.OPS0), tb) > 0) & (s.ot_known != 0)
    _setw(s.ot_down, imp & (s.ot_broken == 0), 1)
    ok = torch.where(imp, 1, ok)
    return ok, n_ev, n_p, f4


# ------------------------------------------------------------------------------------------------------------ step
def _classify(n, n_ports, f4, first_decoy):
    act = torch.where(first_decoy, N.ACT_NONE, N.ACT_SCAN)
    act = torch.where((n >= 3) & (n_ports == 1), N.ACT_EXPLOIT, act)
    act = torch.where(f4 != 0, N.ACT_EXPLOIT, act)
    return torch.where((n >= 3) & (n_ports >= 3), N.ACT_SCAN, act)


def _access(s) -> torch.Tensor:
    priv = (s.sess_priv > 0)
    priv[:, T.USER0] = True
    user = (s.sess_rem.to(_I64) + s.sess_user) > 0
    return torch.where(priv, T.ACCESS_PRIVILEGED, torch.where(user, T.ACCESS_USER, T.ACCESS_NONE)).to(torch.int8)


def reset_where(s, mask: torch.Tensor) -> None:
    """Start a new episode in the envs where ``mask`` holds (the kernel's _reset_env)."""
    m1 = mask
    m2 = mask.unsqueeze(1)
    _setw(s.episode, m1, s.episode + 1)
    for f in (s.t, s.ot_down, s.ot_broken, s.ot_known, s.last_success, s.last_dns_empty, s.bl_state, s.bl_s12,
              s.m_scanned_subnets, s.m_scanned_ips, s.m_exploited, s.m_escalated, s.m_mapped):
        _setw(f, m1, 0)
    for f in (s.bl_target, s.m_last_ip, s.m_last_host):
        _setw(f, m1, -1)
    _setw(s.m_known_ips, m1, 1 << T.USER0)
    _setw(s.m_known_subnets, m1, 1 << T.SUBNET_USER)
    for f in (s.sess_priv, s.sess_rem, s.sess_user, s.red_file, s.decoys, s.vsftpd, s.red_ports, s.red_scanned,
              s.obs_comp):
        _setw(f, m2, 0)


def step(s, actions: torch.Tensor, episode_length: int, official_bugs: bool = True):
    """One step of every env, in place on ``s`` (a SimState of tensors). Returns (obs, reward, truncated, access,
    final_obs, final_access) tensors; final_* hold the last observation/access of envs that were just truncated."""
    tb = _tables(actions.device, official_bugs)
    a = actions.to(_I64)
    n = a.shape[0]
    # red chooses
    rk = s.red_kind
    bk, bt = _bline_choose(s, rk == T.RED_BLINE, tb)
    mk, mt = _meander_choose(s, rk == T.RED_MEANDER, tb)
    r_kind = torch.where(rk == T.RED_BLINE, bk, torch.where(rk == T.RED_MEANDER, mk, T.R_SLEEP))
    r_tgt = torch.where(rk == T.RED_BLINE, bt, torch.where(rk == T.RED_MEANDER, mt, -1))

    # blue executes
    is_restore = a >= T.A_RESTORE
    is_decoy = (a >= T.A_DECOY) & ~is_restore
    is_remove = (a >= T.A_REMOVE) & (a < T.A_DECOY)
    is_analyse = (a >= T.A_ANALYSE) & (a < T.A_REMOVE)
    h_res = (a - T.A_RESTORE).clamp(0, _N - 1)
    oh = _onehot(h_res, is_restore, tb)
    for f in (s.sess_priv, s.sess_rem, s.sess_user, s.red_file, s.decoys, s.vsftpd, s.obs_comp):
        _set_at(f, oh, 0)
    res_ops = is_restore & (h_res == T.OPS0)
    _setw(s.ot_down, res_ops, 0)
    if official_bugs:
        _setw(s.ot_broken, res_ops, 1)
    k = ((a - T.A_DECOY) // _N).clamp(0, T.N_DECOYS - 1)
    h_dec = ((a - T.A_DECOY) % _N).clamp(0, _N - 1)
    os_ = tb.decoy_os[k]
    win = tb.windows[h_dec]
    os_ok = ~(((os_ == T.OS_WINDOWS) & ~win) | ((os_ == T.OS_LINUX) & win))
    used = tb.real_ports[h_dec] | tb.decoy_ports[_gather(s.decoys, h_dec).to(_I64) & 0xFF]
    placed = is_decoy & os_ok & (((used >> tb.decoy_check[k]) & 1) == 0)
    ohd = _onehot(h_dec, placed, tb)
    s.decoys.copy_(torch.where(ohd, s.decoys.to(_I64) | (1 << k).unsqueeze(1), s.decoys.to(_I64)).to(s.decoys.dtype))
    _add_at(s.vsftpd, _onehot(h_dec, placed & (k == T.D_VSFTPD), tb), 1)
    decoy_host = torch.where(placed, h_dec, -1)
    h_rem = (a - T.A_REMOVE).clamp(0, _N - 1)
    ohr = _onehot(h_rem, is_remove, tb)
    _set_at(s.sess_rem, ohr, 0)
    _set_at(s.obs_comp, ohr & (s.obs_comp != 0), 1)
    h_an = (a - T.A_ANALYSE).clamp(0, _N - 1)
    analyse_file = is_analyse & (_gather(s.red_file, h_an) != 0)

    # red executes
    ok, n_ev, n_p, f4 = _red_execute(s, r_kind, r_tgt, tb)
    s.last_success.copy_(ok.to(s.last_success.dtype))
    ev_host = torch.where(n_ev > 0, r_tgt, -1)

    # reward (tenths)
    r = torch.where(is_restore, T.RESTORE_COST_TENTHS, 0) + ((s.sess_priv > 0) * tb.conf).sum(1) \
        + (s.ot_down != 0) * T.IMPACT_PENALTY_TENTHS
    reward = -(r.to(torch.float32)) / 10.0

    # observation
    act = torch.zeros((n, _N), dtype=_I64, device=a.device)
    first_decoy = decoy_host >= 0
    same = first_decoy & (ev_host == decoy_host)
    n_d = 1 + torch.where(same, n_ev, 0)
    act_d = _classify(n_d, torch.where(same, n_p, 0), torch.where(same, f4, 0), torch.ones_like(first_decoy))
    act = torch.where(_onehot(decoy_host, first_decoy, tb), act_d.unsqueeze(1), act)
    ev_only = (ev_host >= 0) & ~same
    act_e = _classify(n_ev, n_p, f4, torch.zeros_like(first_decoy))
    act = torch.where(_onehot(ev_host, ev_only, tb), act_e.unsqueeze(1), act)
    _set_at(s.obs_comp, act == N.ACT_EXPLOIT, 2)
    _set_at(s.obs_comp, _onehot(h_an, analyse_file, tb), 3)
    c = s.obs_comp
    obs = torch.stack([act != N.ACT_NONE, act == N.ACT_EXPLOIT, (c == 1) | (c == 3), c >= 2], dim=2)
    obs = obs.reshape(n, 4 * _N).to(torch.float32)

    s.t.add_(1)
    truncated = s.t >= episode_length
    final_obs = obs
    final_access = _access(s)
    reset_where(s, truncated)
    obs = torch.where(truncated.unsqueeze(1), torch.zeros_like(obs), obs)
    return obs, reward, truncated, _access(s), final_obs, final_access


def to_tensors(state: N.SimState, device: str | torch.device = "cpu") -> N.SimState:
    """The same state as torch tensors on ``device`` (the key's uint64 bits become int64)."""
    fields = []
    for name, x in zip(N.SimState._fields, state):
        if name == "key":
            x = x.view(np.int64)
        fields.append(torch.tensor(np.ascontiguousarray(x), device=device))  # a copy, never shared
    return N.SimState(*fields)


def to_numpy(state: N.SimState) -> N.SimState:
    fields = []
    for name, x in zip(N.SimState._fields, state):
        arr = x.detach().cpu().numpy().copy()
        fields.append(arr.view(np.uint64) if name == "key" else arr)
    return N.SimState(*fields)
