"""A toy attacker written the way docs/extending.md tells a user to write one: its rules in its own module, one
registry entry. It walks at random: each step it picks a host it knows (or, one step in five, a subnet it knows
but has not scanned) and does the next thing that host allows: scan it, exploit it, escalate on it."""
import numpy as np

from workflow_rl.sim import attackers
from workflow_rl.sim import tables as T
from workflow_rl.sim.rules import _n_sessions, _nth_bit, _uniform, _uniform_bit

NAME = "ToyRandomWalk"
_SLOT_WALK = 0   # the red-target draw slot (sim.rules._SLOT_RED_TARGET): red draws it once a step at most
SUBNET_SHARE = 0.2


def _next_move(s, i, h):
    """What the walk does on host ``h``: escalate where red has a session, exploit where it knows the ports,
    else scan. A helper, to check that an attacker's helpers are compiled with it."""
    if _n_sessions(s, i, h) > 0 and s.sess_priv[i, h] == 0:
        return T.R_ESCALATE
    if s.red_scanned[i, h] and _n_sessions(s, i, h) == 0:
        return T.R_EXPLOIT
    return T.R_DNS


def toy_choose(s, i):
    u = _uniform(s.key[i], s.episode[i], s.t[i], _SLOT_WALK)
    fresh = s.m_known_subnets[i] & ~s.m_scanned_subnets[i]
    if fresh and u < SUBNET_SHARE:
        k = _nth_bit(fresh, 0)
        s.m_scanned_subnets[i] |= np.int8(1) << k
        return T.R_DRS, k
    h = _uniform_bit(s.m_known_ips[i], u)
    return _next_move(s, i, h), h


TOY = attackers.Attacker(NAME, toy_choose, aliases=("toy",), helpers=(_next_move,), short="Toy")


def register():
    """Register the toy (once) and return its entry."""
    if NAME in attackers.names():
        return attackers.get(NAME)
    return attackers.register(TOY)
