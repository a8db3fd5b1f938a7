"""The attacker family: six red agents beyond CAGE2's two, each demanding a defence B_line and Meander do not.

Why a family: a defender trained and tested against B_line and Meander alone can learn *them* -- the step at which
B_line starts, the route it always takes, that it never looks back -- rather than how to defend. The CAGE2
winner's agent, which scores -36 against B_line over 100 steps, collapses to -819 against a B_line that first
waits a random 0-20 steps. Each attacker here breaks one such assumption:

================  ==================================================================================================
DelayedB_line     B_line after sleeping a random 0-20 steps: defend from what is seen, not from the clock
RandomRed         a uniformly random valid action each step: do not spend restores on noise
EnterpriseRaider  takes and holds the three Enterprise hosts, never Op_Server0: guard the Enterprise, not only
                  the server
RestoreChaser     B_line's route, then holds every host of it, checks them and re-exploits a restored one at once:
                  a Restore alone buys a step or two, decoys and removal are needed
UserHopper        B_line's route, but a user host or Enterprise gateway that blocks it (a decoy, a Restore) is
                  abandoned for another user host, and so perhaps the other gateway: defend every route
ImpactRush        B_line's route without its backtracking, straight for Impact: after losing Op_Server0 it retakes
                  it and impacts at once (Impact needs only a session once OTService is known)
================  ==================================================================================================

Each is written once: its rules below (declared as built-in attackers in :mod:`workflow_rl.sim.attackers`,
compiled into the CPU and CUDA kernels like B_line's), and its CybORG twin in :mod:`workflow_rl.envs.cyborg_red`,
which rebuilds this memory and red's knowledge from CybORG's red observations and action space and then calls the
very same function, uncompiled, translating its (action, target) into csle-cyborg's red actions. So the two engines
make the same decisions from the same knowledge, with the same odds; the fidelity suite holds the native engine to
real CybORG for each (tests/data/cyborg_returns_family.csv).

What red knows is what CybORG's red agent can know: the IPs and subnets of its action space (``m_known_ips``,
``m_known_subnets``, kept by the engine for every red agent), the hostnames it has learnt (User0's from the start,
then each host it exploits: ``fam_hosts``), whether it has learnt OTService (``ot_known``) and the result of its own
previous action (``last_success``; ``last_dns_empty`` for a scan that found no route). What it believes it holds
(``fam_sess``, ``fam_root``) is its own bookkeeping of those results, so a Restore behind its back goes unnoticed
until an action on that host fails.

The planners (EnterpriseRaider, RestoreChaser, UserHopper, ImpactRush) climb a list of hosts, each the same way
(:func:`_work_on`): sweep its subnet if its IP is unknown, scan it if its ports are not fresh, exploit it, escalate
it. A failed exploit makes red rescan that host first (a decoy may have been placed since); a scan that finds no
route to the Operational subnet tells red it has lost its Enterprise footholds.
"""
from __future__ import annotations

import numpy as np

from workflow_rl.sim import tables as T
from workflow_rl.sim.rules import _bline_choose, _uniform, _uniform_bit

# draw slots of the counter-based RNG (sim.rules uses 0..6): one attacker plays an episode, so they are shared
_SLOT_PICK, _SLOT_AIM = 7, 8

MAX_DELAY = 20
"""DelayedB_line sleeps a uniform 0..MAX_DELAY steps (the issue's motivating example)."""
HOLD_TICKS = 6
"""The longest hold cycle (RestoreChaser: Impact, check, Impact, check, Impact, check): ``fam_tick``'s bound."""
ATTACKS = np.array([T.R_DRS, T.R_DNS, T.R_EXPLOIT, T.R_ESCALATE, T.R_IMPACT], np.int32)
"""The red action kinds RandomRed draws from (not Sleep): one uniformly, then one of its valid targets."""

_ENT_MASK = T.ENT_HOSTS_MASK
_USER_HOSTS = (1 << T.USER1) | (1 << T.USER2) | (1 << T.USER3) | (1 << T.USER4)   # B_line's possible footholds
_ENT_OF_USER = T.BLINE_ENTERPRISE_OF_USER
_SUBNET_OF = T.HOST_SUBNET
_N_ATTACKS = len(ATTACKS)


# ------------------------------------------------------------------------------------------------ shared memory
def _fam_begin(s, i):
    """Red's memory at the start of its turn: fresh at an episode's first step, else updated from the result of
    its previous action (what CybORG's red observation tells it)."""
    if s.t[i] == 0:
        s.fam_kind[i] = T.R_SLEEP
        s.fam_tgt[i] = -1
        s.fam_hosts[i] = np.int32(1) << T.USER0
        s.fam_sess[i] = 0
        s.fam_root[i] = 0
        s.fam_fresh[i] = 0
        s.fam_user[i] = -1
        s.fam_tick[i] = 0
        s.fam_burnt[i] = 0
        return
    h = np.int32(s.fam_tgt[i])
    if h < 0:
        return
    k = s.fam_kind[i]
    ok = s.last_success[i]
    b = np.int32(1) << h
    if k == T.R_DNS:
        if s.last_dns_empty[i]:   # no route to the Operational subnet: no Enterprise foothold is left
            s.fam_sess[i] &= ~np.int32(_ENT_MASK)
            s.fam_root[i] &= ~np.int32(_ENT_MASK)
        else:
            s.fam_fresh[i] |= b
    elif k == T.R_EXPLOIT:
        if ok:
            s.fam_sess[i] |= b
            s.fam_hosts[i] |= b   # a successful exploit shows the host's name
        else:
            s.fam_fresh[i] &= ~b
    elif k == T.R_ESCALATE or k == T.R_IMPACT:
        if ok:
            if k == T.R_ESCALATE:
                s.fam_root[i] |= b
                s.fam_sess[i] |= b
        else:   # no session there any more: restored (or removed)
            s.fam_sess[i] &= ~b
            s.fam_root[i] &= ~b


def _act(s, i, kind, target):
    """Remember the action (its result is read back next turn) and return it."""
    s.fam_kind[i] = kind
    s.fam_tgt[i] = target
    return kind, target


def _work_on(s, i, h):
    """The next step towards holding host ``h`` privileged: sweep its subnet while its IP is unknown, scan it while
    its ports are not fresh, exploit it while red holds no session there, else escalate."""
    b = np.int32(1) << h
    kind = T.R_EXPLOIT
    target = np.int32(h)
    if not s.m_known_ips[i] & b:
        target = np.int32(_SUBNET_OF[h])
        kind = T.R_DRS
        if not s.m_known_subnets[i] >> target & 1:   # unreachable on the routes below: each host reveals the next
            kind = T.R_SLEEP
            target = -1
    elif s.fam_sess[i] & b:
        kind = T.R_ESCALATE
    elif not s.fam_fresh[i] & b:
        kind = T.R_DNS
    return _act(s, i, kind, target)


def _draw_user(s, i, avoid):
    """A user host of B_line's four drawn uniformly, not in ``avoid`` (all four if that leaves none)."""
    cand = _USER_HOSTS & ~avoid
    if cand == 0:
        cand = _USER_HOSTS
    return _uniform_bit(cand, _uniform(s.key[i], s.episode[i], s.t[i], _SLOT_AIM))


def _route_host(s, i):
    """The host to work on up B_line's route -- its user host (drawn at the first call), that host's Enterprise
    gateway, Enterprise2 (whose escalation reveals Op_Server0), Op_Server0: the first red does not believe it holds
    privileged; -1 when it holds them all."""
    if s.fam_user[i] < 0:
        s.fam_user[i] = _draw_user(s, i, 0)
    root = s.fam_root[i]
    h = np.int32(s.fam_user[i])
    if root >> h & 1:
        h = np.int32(_ENT_OF_USER[h])
        if root >> h & 1:
            h = np.int32(T.ENT2)
            if root >> h & 1:
                h = np.int32(T.OPS0)
                if root >> h & 1:
                    h = np.int32(-1)
    return h


# ------------------------------------------------------------------------------------------------- the attackers
def delayed_bline_choose(s, i):
    """DelayedB_line: sleeps a uniform 0..20 steps (drawn per episode), then plays B_lineAgent.

    Demands a defence that reads the observation rather than the clock: B_line's first exploit lands at step 2 and
    its first Impact at step 15, and a defender that has learnt those steps (the CAGE2 winner's agent fingerprints
    red from its opening) is defending a schedule. Why in the family: the issue's motivating example (-36 to -819)."""
    d = np.int32(_uniform(s.key[i], s.episode[i], 0, _SLOT_PICK) * (MAX_DELAY + 1))
    if s.t[i] < d:
        return T.R_SLEEP, -1
    return _bline_choose(s, i)


def random_red_choose(s, i):
    """RandomRed: each step one of the five attack actions uniformly, then one of its valid targets uniformly (a
    known subnet, a known IP, a known hostname: what CybORG's action space allows).

    Demands a defence that does not overreact: it scans and exploits all over the network (User0, the Defender and
    Op hosts included) but rarely climbs far, so a defender that restores every flagged host pays -1 a time for
    little. Why in the family: the attacker with no plan at all, the floor of every other's structure."""
    _fam_begin(s, i)
    k = np.int32(_uniform(s.key[i], s.episode[i], s.t[i], _SLOT_PICK) * _N_ATTACKS)
    if k >= _N_ATTACKS:
        k = _N_ATTACKS - 1
    kind = ATTACKS[k]
    mask = s.fam_hosts[i]
    if kind == T.R_DRS:
        mask = np.int32(s.m_known_subnets[i])
    elif kind == T.R_DNS or kind == T.R_EXPLOIT:
        mask = s.m_known_ips[i]
    return _act(s, i, kind, _uniform_bit(mask, _uniform(s.key[i], s.episode[i], s.t[i], _SLOT_AIM)))


def enterprise_raider_choose(s, i):
    """EnterpriseRaider: a user host (one of User1-4, uniformly), its Enterprise gateway, then the other two
    Enterprise hosts, each held privileged; then it holds them, checking one a step in turn (an escalation, which
    blue does not see) and retaking a lost one at once. It never enters the Operational subnet.

    Demands guarding the Enterprise hosts (three at -1 a step each) rather than Op_Server0: a defence that waits for
    red to approach the server, or that watches B_line's single gateway, leaves the Enterprise to it. Why in the
    family: an attacker after other targets than the server."""
    _fam_begin(s, i)
    if s.fam_user[i] < 0:
        s.fam_user[i] = _draw_user(s, i, 0)
    root = s.fam_root[i]
    h = np.int32(s.fam_user[i])
    if root >> h & 1 or root & _ENT_MASK:   # the user host only matters until an Enterprise host is held
        h = np.int32(_ENT_OF_USER[h])
        if root >> h & 1:
            h = np.int32(-1)
            for e in range(T.ENT0, T.ENT2 + 1):
                if h < 0 and not root >> e & 1:
                    h = np.int32(e)
    if h >= 0:
        return _work_on(s, i, h)
    tick = np.int32(s.fam_tick[i]) % 3
    s.fam_tick[i] = (tick + 1) % 3
    return _act(s, i, T.R_ESCALATE, T.ENT0 + tick)


def restore_chaser_choose(s, i):
    """RestoreChaser: B_line's route to Op_Server0, then it holds the whole route: Impact, check a host of the
    route (an escalation, which blue does not see), Impact, check the next, ... A failed check or Impact means the
    host was restored: it re-exploits that host at once (its ports are remembered) and escalates again.

    Demands more than Restore: against B_line a Restore of a host behind it is free, against this it is undone two
    steps later, so decoys (which make the re-exploit fail) or guarding the way in are needed. Why in the family:
    the attacker that re-exploits a host right after a Restore."""
    _fam_begin(s, i)
    h = _route_host(s, i)
    if h >= 0:
        return _work_on(s, i, h)
    tick = np.int32(s.fam_tick[i]) % HOLD_TICKS
    s.fam_tick[i] = (tick + 1) % HOLD_TICKS
    kind = T.R_IMPACT
    h = np.int32(T.OPS0)
    if tick % 2 == 1:   # a check: the route's user host, its gateway, Enterprise2 in turn
        kind = T.R_ESCALATE
        h = np.int32(T.ENT2)
        if tick == 1:
            h = np.int32(s.fam_user[i])
        elif tick == 3:
            h = np.int32(_ENT_OF_USER[s.fam_user[i]])
    return _act(s, i, kind, h)


def user_hopper_choose(s, i):
    """UserHopper: B_line's route and Impact, but when an exploit or escalation of its user host fails it gives
    that host up for another user host, and when one of its Enterprise gateway fails it gives up both user hosts
    behind that gateway, so it comes in through the other one (User1/2 reach Enterprise1, User3/4 Enterprise0).

    Demands defending every way in: a decoy or a Restore that stops B_line on its one user host or gateway (B_line
    retries there, or falls back to its user host) sends this one round it. Why in the family: the attacker that
    routes through other user hosts and gateways."""
    _fam_begin(s, i)
    u = np.int32(s.fam_user[i])
    h = np.int32(s.fam_tgt[i])
    k = s.fam_kind[i]
    if u >= 0 and h >= 0 and not s.last_success[i] and (k == T.R_EXPLOIT or k == T.R_ESCALATE):
        g = np.int32(_ENT_OF_USER[u])
        if h == u or (h == g and not s.fam_root[i] >> g & 1):
            gone = np.int32(1) << u
            if h == g:   # both user hosts behind this gateway
                for v in range(T.USER1, T.USER4 + 1):
                    if _ENT_OF_USER[v] == g:
                        gone |= np.int32(1) << v
            s.fam_burnt[i] |= gone
            if not _USER_HOSTS & ~s.fam_burnt[i]:
                s.fam_burnt[i] = gone   # every user host tried: start over, still avoiding the one that failed
            s.fam_user[i] = _draw_user(s, i, s.fam_burnt[i])
    h = _route_host(s, i)
    if h >= 0:
        return _work_on(s, i, h)
    return _act(s, i, T.R_IMPACT, T.OPS0)


def impact_rush_choose(s, i):
    """ImpactRush: B_line's route, straight for Impact: Impact whenever it holds a session on Op_Server0 and knows
    OTService, so after losing the server it retakes it and impacts at once, without escalating again; a failed
    exploit sends it to a rescan of that host, never back down the route as B_line's jumps do (only losing every
    Enterprise foothold does, which it learns from a scan of Op_Server0 that finds no route).

    Demands a defence of Op_Server0 itself that holds: with the official Restore bug one Restore of Op_Server0
    ends Impact's damage, but without it (``official_bugs=False``) the server must be kept, not merely cleaned.
    Why in the family: the attacker that goes straight for impact."""
    _fam_begin(s, i)
    if s.ot_known[i] and s.fam_sess[i] >> T.OPS0 & 1:
        return _act(s, i, T.R_IMPACT, T.OPS0)
    h = np.int32(T.OPS0)
    if not (s.ot_known[i] and s.fam_root[i] >> T.ENT2 & 1):   # knowing OTService, only a session is needed
        h = _route_host(s, i)
    if h >= 0:
        return _work_on(s, i, h)
    return _act(s, i, T.R_IMPACT, T.OPS0)


HELPERS = (_fam_begin, _act, _work_on, _draw_user, _route_host)
"""The plain functions the family's rules call (compiled with them: ``Attacker.helpers``)."""
