"""The attacker family's CybORG twins: red agent classes on csle-cyborg's red action API (the ``cyborg`` extra).

Each attacker of :mod:`workflow_rl.sim.family` plays on real CybORG as one of these classes
(``Attacker.cyborg_class``; this module is imported only when CybORG plays one). Why the twins call the native
rules rather than restate them: the fidelity suite holds the native engine to CybORG for each attacker, which only
means something if both engines' red agents make the same decisions from the same knowledge. So a twin keeps, in a
one-env :class:`~workflow_rl.sim.native.SimState`, exactly what the rules read -- red's known IPs, subnets and
OTService, the success of its last action, its own memory -- rebuilt from what CybORG gives a red agent (its
observation and action space), calls the family's rule function uncompiled, and turns the (action kind, target)
into a csle-cyborg action. Its random draws come from CybORG's ``random`` (a fresh key per episode), so a seeded
CybORG episode is reproducible and the odds are the native engine's.

What a twin must name that CybORG does not say outright is which host an IP is: a sweep
(DiscoverRemoteSystems) lists its subnet's IPs in the order of the scenario's ``Subnets`` hosts (CybORG builds the
list so; B_lineAgent relies on it too), an escalation shows revealed hosts by hostname, an exploit shows its
target's. A twin that meets an IP it cannot name, or whose rules choose an action CybORG would refuse as invalid,
raises: a silent difference would only show as a failed fidelity cell.

DelayedB_line needs none of this: it is csle-cyborg's own B_lineAgent after its sleep.
"""
from __future__ import annotations

import functools
import random

import numpy as np

from workflow_rl.envs.cyborg import _import_csle_cyborg, scenario_dict
from workflow_rl.sim import family, native
from workflow_rl.sim import tables as T

_import_csle_cyborg()   # csle-cyborg's undeclared stable_baselines3, before its modules below

from csle_cyborg.agents.simple_agents.b_line import B_lineAgent  # noqa: E402
from csle_cyborg.agents.simple_agents.base_agent import BaseAgent  # noqa: E402
from csle_cyborg.shared.actions.abstract_actions.discover_network_services import (  # noqa: E402
    DiscoverNetworkServices)
from csle_cyborg.shared.actions.abstract_actions.discover_remote_systems import DiscoverRemoteSystems  # noqa: E402
from csle_cyborg.shared.actions.abstract_actions.exploit_remote_service import ExploitRemoteService  # noqa: E402
from csle_cyborg.shared.actions.abstract_actions.impact import Impact  # noqa: E402
from csle_cyborg.shared.actions.abstract_actions.privilege_escalate import PrivilegeEscalate  # noqa: E402
from csle_cyborg.shared.actions.action import Sleep  # noqa: E402
from csle_cyborg.shared.enums import TrinaryEnum  # noqa: E402

_SESSION = 0   # every red action runs from the RedPhish session on User0 (SPEC §1.3), as B_line's do


@functools.lru_cache(maxsize=1)
def sweep_order() -> dict[str, tuple[str, ...]]:
    """Per subnet name, its hosts in the order a sweep of it lists their IPs: the scenario's ``Subnets`` lists."""
    return {name: tuple(sub["Hosts"]) for name, sub in scenario_dict()["Subnets"].items()}


def _hosts(mask: int) -> str:
    return ", ".join(h for k, h in enumerate(T.HOSTS) if mask >> k & 1) or "none"


class DelayedB_line(B_lineAgent):
    """``sim.family.delayed_bline_choose`` on CybORG: Sleep for a uniform 0..MAX_DELAY steps, drawn per episode,
    then csle-cyborg's B_lineAgent, given the opening observation it would have started from (a Sleep's
    observation holds no User0, which B_line's first action reads)."""

    def __init__(self):
        super().__init__()
        self._new_delay()

    def _new_delay(self):
        self.delay = random.randint(0, family.MAX_DELAY)
        self.steps = 0
        self.opening = None

    def get_action(self, observation, action_space):
        if self.steps == 0:
            self.opening = observation
        self.steps += 1
        if self.steps <= self.delay:
            return Sleep()
        return super().get_action(self.opening if self.steps == self.delay + 1 else observation, action_space)

    def end_episode(self):
        super().end_episode()
        self._new_delay()


class _FamilyTwin(BaseAgent):
    """A family attacker on CybORG: ``rules`` (a function of ``sim.family``) played on knowledge rebuilt from
    CybORG's red observations and action space."""

    rules = None

    def __init__(self):
        self.s = native.allocate_state(1)
        self.end_episode()

    def train(self, results):
        pass

    def set_initial_values(self, action_space, observation):
        pass

    def end_episode(self):
        s = self.s
        for a in s:
            a[:] = 0
        s.key[0] = random.getrandbits(64)   # the episode's draws: a fresh key from CybORG's random
        self.host_of_ip = {}                # IPv4Address -> hostname
        self.name_of_cidr = {}              # IPv4Network -> subnet name
        self.last = (T.R_SLEEP, -1)

    # ------------------------------------------------------------------------------------------ what red learns
    def _learn(self, observation: dict) -> None:
        kind, target = self.last
        swept = sweep_order()[T.SUBNETS[target]] if kind == T.R_DRS else ()
        listed = 0
        for key, info in observation.items():
            if key == "success" or not isinstance(info, dict):
                continue
            host = key if key in T.HOSTS else info.get("System info", {}).get("Hostname")
            for iface in info.get("Interface", []):
                ip, cidr = iface.get("IP Address"), iface.get("Subnet")
                if host is None and swept and listed < len(swept) and ip is not None:
                    host = swept[listed]   # a sweep's result, in its subnet's host order
                    listed += 1
                if host is not None and ip is not None:
                    self.host_of_ip[ip] = host
                if host is not None and cidr is not None:
                    self.name_of_cidr[cidr] = T.SUBNETS[T.HOST_SUBNET[T.HOSTS.index(host)]]
            for proc in info.get("Processes", []):
                if proc.get("Service Name") == "OTService":
                    self.s.ot_known[0] = 1   # red's session learnt OTService (an escalation of Op_Server0)

    def _ip(self, h: int):
        for ip, host in self.host_of_ip.items():
            if host == T.HOSTS[h]:
                return ip
        raise RuntimeError(f"{type(self).__name__}: the rules chose {T.HOSTS[h]}, whose IP red does not know")

    def _cidr(self, k: int):
        for cidr, name in self.name_of_cidr.items():
            if name == T.SUBNETS[k]:
                return cidr
        raise RuntimeError(f"{type(self).__name__}: the rules chose the {T.SUBNETS[k]} subnet, which red does not "
                           "know")

    def _knowledge(self, observation: dict, action_space: dict) -> None:
        """Write into the state what the rules read of red's knowledge."""
        s = self.s
        kind, target = self.last
        s.last_success[0] = observation.get("success") == TrinaryEnum.TRUE
        if kind == T.R_DNS:
            scanned = observation.get(str(self._ip(target)), {})
            s.last_dns_empty[0] = not scanned.get("Processes")   # no route: CybORG's scan found nothing
        ips = 0
        for ip, known in action_space.get("ip_address", {}).items():
            if known:
                if ip not in self.host_of_ip:
                    raise RuntimeError(f"{type(self).__name__}: red knows the IP {ip} but not which host it is")
                ips |= 1 << T.HOSTS.index(self.host_of_ip[ip])
        subnets = 0
        for cidr, known in action_space.get("subnet", {}).items():
            if known:
                if cidr not in self.name_of_cidr:
                    raise RuntimeError(f"{type(self).__name__}: red knows the subnet {cidr} but not which it is")
                subnets |= 1 << T.SUBNETS.index(self.name_of_cidr[cidr])
        s.m_known_ips[0] = ips
        s.m_known_subnets[0] = subnets

    # ------------------------------------------------------------------------------------------------- acting
    def get_action(self, observation, action_space):
        self._learn(observation)
        self._knowledge(observation, action_space)
        with np.errstate(over="ignore"):   # the counter-based RNG's uint64 hashing wraps by design
            kind, target = type(self).rules(self.s, 0)
        kind, target = int(kind), int(target)
        names = sum(1 << T.HOSTS.index(h) for h, known in action_space.get("hostname", {}).items() if known)
        if names != int(self.s.fam_hosts[0]):   # the rules' record of the hostnames red learnt must be CybORG's
            raise RuntimeError(f"{type(self).__name__}: red's action space knows the hostnames {_hosts(names)}, its "
                               f"rules {_hosts(int(self.s.fam_hosts[0]))}")
        self.s.t[0] += 1
        self.last = (kind, target)
        return self._action(kind, target, action_space)

    def _action(self, kind: int, target: int, action_space: dict):
        if kind == T.R_SLEEP:
            return Sleep()
        if kind == T.R_DRS:
            param, value = "subnet", self._cidr(target)
            action = DiscoverRemoteSystems(session=_SESSION, agent="Red", subnet=value)
        elif kind in (T.R_DNS, T.R_EXPLOIT):
            param, value = "ip_address", self._ip(target)
            cls = DiscoverNetworkServices if kind == T.R_DNS else ExploitRemoteService
            action = cls(session=_SESSION, agent="Red", ip_address=value)
        else:
            param, value = "hostname", T.HOSTS[target]
            cls = PrivilegeEscalate if kind == T.R_ESCALATE else Impact
            action = cls(session=_SESSION, agent="Red", hostname=value)
        if not action_space.get(param, {}).get(value):
            raise RuntimeError(f"{type(self).__name__}: the rules chose {T.red_action_name(kind, target)}, which "
                               f"CybORG refuses ({param} {value} is not in red's action space)")
        return action


class RandomRed(_FamilyTwin):
    rules = staticmethod(family.random_red_choose)


class EnterpriseRaider(_FamilyTwin):
    rules = staticmethod(family.enterprise_raider_choose)


class RestoreChaser(_FamilyTwin):
    rules = staticmethod(family.restore_chaser_choose)


class UserHopper(_FamilyTwin):
    rules = staticmethod(family.user_hopper_choose)


class ImpactRush(_FamilyTwin):
    rules = staticmethod(family.impact_rush_choose)


__all__ = ["DelayedB_line", "RandomRed", "EnterpriseRaider", "RestoreChaser", "UserHopper", "ImpactRush",
           "sweep_order"]
