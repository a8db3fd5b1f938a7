"""Step-level parity with real CybORG: read CybORG's full state after a step, write it into many native copies,
step both engines with the same blue action, and ask how likely the native engine finds what CybORG did.

Red access, red's memory, blue's observation and the reward of a CybORG step must be an outcome the native rules can
produce from the same state; the native copies differ only in their random keys, so their outcomes sample the
native transition distribution.
"""
from __future__ import annotations

import numpy as np

from workflow_rl.sim import attackers
from workflow_rl.sim import native as N
from workflow_rl.sim import tables as T

_PRIVILEGED = ("root", "SYSTEM")
_HOST = {h: i for i, h in enumerate(T.HOSTS)}
_PORT_BIT = {p: i for i, p in enumerate(T.PORT_NUMBERS)}
_COMPROMISED = {"No": 0, "Unknown": 1, "User": 2, "Privileged": 3}
_DECOY = {"apache2": T.D_APACHE, "femitter": T.D_FEMITTER, "haraka": T.D_HARAKA, "Smss.exe": T.D_SMSS,
          "Sshd.exe": T.D_SSHD, "Svchost.exe": T.D_SVCHOST, "Tomcat.exe": T.D_TOMCAT, "vsftpd": T.D_VSFTPD}
"""Process name of each decoy (csle_cyborg/shared/actions/concrete_actions/decoy_*.py)."""
_SUBNET = {"Enterprise": T.SUBNET_ENTERPRISE, "Operational": T.SUBNET_OPERATIONAL, "User": T.SUBNET_USER}


def _blue_table(env):
    w = env._env
    while w is not None and not hasattr(w, "blue_info"):
        w = getattr(w, "env", None)
    return w


def read_state(env) -> dict:
    """The native state fields of a :class:`~workflow_rl.envs.cyborg.CybORGEnv` between two steps."""
    ctrl = env._cyborg.environment_controller
    st = ctrl.state
    red = st.sessions["Red"]
    foothold = red[0]
    velociraptor = next(s for s in st.sessions["Blue"].values() if hasattr(s, "sus_pids"))
    f = {k: np.zeros(T.N_HOSTS, np.int16) for k in ("priv", "rem", "user")}
    for ident, s in red.items():
        if ident == 0:
            continue
        h = _HOST[s.host]
        if s.username in _PRIVILEGED:
            f["priv"][h] += 1
        elif s.pid in velociraptor.sus_pids.get(s.host, []) and st.hosts[s.host].get_process(s.pid) is not None:
            f["rem"][h] += 1            # Remove would find and kill it (SPEC §3.2)
        else:
            f["user"][h] += 1
    f["decoys"], f["vsftpd"] = np.zeros(T.N_HOSTS, np.int16), np.zeros(T.N_HOSTS, np.int8)
    for h, name in enumerate(T.HOSTS):
        for p in st.hosts[name].processes:
            if p.decoy_type.value:   # DecoyType.NONE is 0; blue's decoys are the only ones in Scenario2
                k = _DECOY[p.name]
                f["decoys"][h] |= 1 << k
                f["vsftpd"][h] += k == T.D_VSFTPD
    f["file"] = np.array([any(x.density >= 0.9 for x in st.hosts[h].files) for h in T.HOSTS], np.int8)
    ports, scanned = np.zeros(T.N_HOSTS, np.int16), np.zeros(T.N_HOSTS, np.int8)
    for ip, plist in foothold.ports.items():
        h = _HOST[st.ip_addresses[ip]]
        scanned[h] = 1
        for p in plist:
            if p in _PORT_BIT:
                ports[h] |= 1 << _PORT_BIT[p]
    f["ports"], f["scanned"] = ports, scanned
    ops = st.hosts["Op_Server0"]
    f["ot_down"] = int(not any(p.name == "OTService" for p in ops.processes))
    f["ot_broken"] = int(ops.services["OTService"]["process"] is None)
    f["ot_known"] = int(foothold.ot_service is not None)
    table = _blue_table(env)
    f["comp"] = np.array([_COMPROMISED[table.blue_info[h][-1]] for h in T.HOSTS], np.int8)
    red_obs = ctrl.observation["Red"].data
    f["ok"] = int(red_obs["success"] == True)  # noqa: E712 - TrinaryEnum compares to bool only with ==
    last = ctrl.action.get("Red")
    f["dns_empty"] = int(type(last).__name__ == "DiscoverNetworkServices" and len(red_obs) == 1)
    agent = ctrl.agent_interfaces["Red"].agent
    f["memory"] = _bline_memory(agent, st) if hasattr(agent, "action_history") else _meander_memory(agent, ctrl, st)
    return f


def _bline_memory(agent, st) -> dict:
    hist = agent.action_history
    return {"bl_state": agent.action, "bl_s12": int(12 in hist),
            "bl_target": _HOST[st.ip_addresses[hist[1].ip_address]] if 1 in hist else -1}


def _meander_memory(agent, ctrl, st) -> dict:
    space = ctrl.agent_interfaces["Red"].action_space
    subnet = {cidr: _SUBNET[name] for name, cidr in st.subnet_name_to_cidr.items()}

    def hosts(ips):
        return sum(1 << _HOST[st.ip_addresses[ip]] for ip in set(ips))

    return {"m_known_ips": hosts(ip for ip, k in space.ip_address.items() if k),
            "m_known_subnets": sum(1 << subnet[c] for c, k in space.subnet.items() if k),
            "m_scanned_subnets": sum(1 << subnet[c] for c in agent.scanned_subnets),
            "m_scanned_ips": hosts(agent.scanned_ips), "m_exploited": hosts(agent.exploited_ips),
            "m_escalated": sum(1 << _HOST[h] for h in set(agent.escalated_hosts)),
            "m_mapped": sum(1 << _HOST[h] for h in agent.host_ip_map),
            "m_last_ip": _HOST[st.ip_addresses[agent.last_ip]] if agent.last_ip is not None else -1,
            "m_last_host": _HOST[agent.last_host] if agent.last_host is not None else -1}


def write_state(s: N.SimState, f: dict) -> None:
    """Every env of ``s`` set to the CybORG state ``f`` (keys untouched, so the copies draw differently)."""
    s.sess_priv[:], s.sess_rem[:], s.sess_user[:] = f["priv"], f["rem"], f["user"]
    s.red_file[:], s.decoys[:], s.vsftpd[:] = f["file"], f["decoys"], f["vsftpd"]
    s.ot_down[:], s.ot_broken[:], s.ot_known[:] = f["ot_down"], f["ot_broken"], f["ot_known"]
    s.red_ports[:], s.red_scanned[:], s.obs_comp[:] = f["ports"], f["scanned"], f["comp"]
    s.last_success[:], s.last_dns_empty[:] = f["ok"], f["dns_empty"]
    for name, value in f["memory"].items():
        getattr(s, name)[:] = value


def native_probabilities(env, policy, episodes: int, seed: int, copies: int = 4096):
    """For every step of ``episodes`` CybORG episodes of ``policy``: (episode, step, blue action, share of native
    copies whose access, red memory, observation and reward equal CybORG's)."""
    red_kind = attackers.kind_of(env.red_agent)
    s, b = N.allocate_state(copies), N.allocate_buffers(copies)
    out = []
    for e in range(episodes):
        obs, _ = env.reset(seed=seed + e)
        rng = np.random.default_rng([seed, e])
        for t in range(100):
            a = int(policy(t, obs[None], rng)[0])
            before = read_state(env)
            N.seed_state(s, seed * 1000 + 100 * e + t, red_kind)
            N.reset_envs(s, b)
            write_state(s, before)
            N.step(s, np.full(copies, a, np.int64), b, 10_000, True)
            obs, reward, _, _, info = env.step(a)
            after = read_state(env)["memory"] if env.red_agent == "B_lineAgent" else _meander_after(env)
            same = (b.access == info["red_access"]).all(1) & (b.obs == obs).all(1) & (b.reward == np.float32(reward))
            for name, value in after.items():
                same &= getattr(s, name) == value
            out.append((e, t, a, float(same.mean())))
    return out


def _meander_after(env) -> dict:
    """Meander's memory after a step, as far as the native engine has it then: CybORG books the step's own
    success at its next decision, the native engine at its next step too, so the fields compare directly."""
    ctrl = env._cyborg.environment_controller
    m = _meander_memory(ctrl.agent_interfaces["Red"].agent, ctrl, ctrl.state)
    return {k: m[k] for k in ("m_scanned_ips", "m_exploited", "m_escalated", "m_mapped", "m_scanned_subnets")}
