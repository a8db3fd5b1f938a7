"""The rules of CAGE2 Scenario2 as plain tables: the single source of truth for every engine path.

Everything here is read from the official scenario (Scenario2.yaml and its host images) and from how CybORG 2.1
executes it; the section numbers refer to the CAGE2 dynamics specification the project was built from (SPEC §x).
The batched kernels in :mod:`workflow_rl.sim.native` only index these arrays, so a rule is changed in one place.

Hosts are in CybORG's order (alphabetical, also the YAML order), which is both the 52-dim observation order and
the order of hosts inside every blue action class.
"""
from __future__ import annotations

import numpy as np

# --------------------------------------------------------------------------------------------------- hosts (SPEC §1.1)
HOSTS = (
    "Defender", "Enterprise0", "Enterprise1", "Enterprise2", "Op_Host0", "Op_Host1", "Op_Host2",
    "Op_Server0", "User0", "User1", "User2", "User3", "User4",
)
N_HOSTS = len(HOSTS)
(DEFENDER, ENT0, ENT1, ENT2, OPH0, OPH1, OPH2, OPS0, USER0, USER1, USER2, USER3, USER4) = range(N_HOSTS)

# Unit type of each host (workflow vocabulary, in encoding order).
UNIT_TYPES = ("defender", "enterprise", "op_server", "op_host", "user")
HOST_UNIT_TYPE = np.array([0, 1, 1, 1, 3, 3, 3, 2, 4, 4, 4, 4, 4], dtype=np.int8)

# Subnets, in the order RedMeanderAgent visits known subnets (SPEC §4.6).
SUBNET_ENTERPRISE, SUBNET_OPERATIONAL, SUBNET_USER = 0, 1, 2
HOST_SUBNET = np.array([0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 2], dtype=np.int8)
IS_OPERATIONAL = HOST_SUBNET == SUBNET_OPERATIONAL
WINDOWS = np.array([h in (ENT1, ENT2, USER0, USER1, USER2) for h in range(N_HOSTS)])

# Confidentiality value in tenths of a reward point (Low 0.1, Medium 1, None 0); integer so rounding is exact.
CONF_TENTHS = np.array([1, 10, 10, 10, 1, 1, 1, 10, 0, 1, 1, 1, 1], dtype=np.int32)
IMPACT_PENALTY_TENTHS = 100   # OTService down on Op_Server0 (availability High = 10)
RESTORE_COST_TENTHS = 10      # Restore always costs 1

# --------------------------------------------------------------------------------------- ports (SPEC §1.2, images)
# Bit positions of the ports that matter. 53 and 68 only matter for counting scan events on the Defender.
P21, P22, P25, P80, P443, P139, P3389, P3390, P135, P445, P53, P68 = range(12)
PORT_NUMBERS = (21, 22, 25, 80, 443, 139, 3389, 3390, 135, 445, 53, 68)


def _mask(*bits: int) -> int:
    return int(sum(1 << b for b in bits))


# Listening ports of the real processes at reset, and the number of listening connections (one scan event each).
REAL_PORTS = np.array([
    _mask(P22, P53, P68),                                  # Defender: sshd 22, resolved 53 twice, networkd 68
    _mask(P22),                                            # Enterprise0 (Gateway image)
    _mask(P22, P135, P3389, P445, P139, P80, P443),        # Enterprise1 (Internal image)
    _mask(P22, P135, P3389, P445, P139, P80, P443),        # Enterprise2
    _mask(P22), _mask(P22), _mask(P22),                    # Op_Host0..2 (Gateway image)
    _mask(P22),                                            # Op_Server0 (+ OTService without a port)
    _mask(P22, P21), _mask(P22, P21),                      # User0, User1 (windows_user_host1)
    _mask(P445, P139, P135, P3389),                        # User2 (windows_user_host2)
    _mask(P80, P3389, P443, P25),                          # User3 (linux_user_host1: mysql on 3389)
    _mask(P22, P80, P3390, P443, P25),                     # User4 (linux_user_host2)
], dtype=np.int32)
REAL_CONNS = np.array([4, 1, 7, 7, 1, 1, 1, 1, 2, 2, 4, 4, 5], dtype=np.int32)

# ------------------------------------------------------------------------------------------ exploits (SPEC §4.3)
# Order: descending weight, so "top-weighted option" = lowest index present.
EXPLOITS = ("FTPDirectoryTraversal", "HarakaRCE", "SQLInjection", "HTTPSRFI", "HTTPRFI", "EternalBlue", "BlueKeep",
            "SSHBruteForce")
N_EXPLOITS = len(EXPLOITS)
X_FTP, X_HARAKA, X_SQL, X_HTTPS, X_HTTP, X_ETERNAL, X_BLUEKEEP, X_SSH = range(N_EXPLOITS)
EXPLOIT_WEIGHT = np.array([7, 6, 5, 4, 3, 2, 1, 0.1])
EXPLOIT_PORT = np.array([P21, P25, P3390, P443, P80, P139, P3389, P22], dtype=np.int32)

# Outcome of an exploit against the host's *real* processes (SPEC §1.2):
OUT_NONE, OUT_PRIV, OUT_USER, OUT_SSH_USER, OUT_SSH_FAIL = range(5)
# OUT_NONE: no real process of the required type on the port (silent failure unless a decoy answers).
# OUT_PRIV / OUT_USER: non-SSH success with a root/SYSTEM or a user-level session.
# OUT_SSH_USER: SSHBruteForce success (user-level, no PID event, never removable).
# OUT_SSH_FAIL: sshd listens but no brute-forceable account (the Defender).
EXPLOIT_OUTCOME = np.zeros((N_HOSTS, N_EXPLOITS), dtype=np.int8)
for _h in (USER0, USER1):
    EXPLOIT_OUTCOME[_h, X_FTP] = OUT_PRIV
for _h in (USER3, USER4):
    EXPLOIT_OUTCOME[_h, X_HARAKA] = OUT_PRIV
EXPLOIT_OUTCOME[USER4, X_SQL] = OUT_PRIV
for _h in (USER3, USER4, ENT1, ENT2):
    EXPLOIT_OUTCOME[_h, X_HTTPS] = OUT_USER
    EXPLOIT_OUTCOME[_h, X_HTTP] = OUT_USER
EXPLOIT_OUTCOME[USER2, X_ETERNAL] = OUT_PRIV            # Ent1/2 smss.exe has no smb type: silent failure
EXPLOIT_OUTCOME[USER2, X_BLUEKEEP] = OUT_USER           # NetworkService
EXPLOIT_OUTCOME[ENT1, X_BLUEKEEP] = OUT_PRIV            # SYSTEM
EXPLOIT_OUTCOME[ENT2, X_BLUEKEEP] = OUT_PRIV            # (User3's 3389 is mysql: silent failure)
EXPLOIT_OUTCOME[DEFENDER, X_SSH] = OUT_SSH_FAIL
for _h in (ENT0, ENT1, ENT2, OPH0, OPH1, OPH2, OPS0, USER0, USER1, USER4):
    EXPLOIT_OUTCOME[_h, X_SSH] = OUT_SSH_USER

# ------------------------------------------------------------------------------------------ decoys (SPEC §2, §3.4)
DECOYS = ("Apache", "Femitter", "HarakaSMPT", "Smss", "SSHD", "Svchost", "Tomcat", "Vsftpd")
N_DECOYS = len(DECOYS)
D_APACHE, D_FEMITTER, D_HARAKA, D_SMSS, D_SSHD, D_SVCHOST, D_TOMCAT, D_VSFTPD = range(N_DECOYS)
OS_ANY, OS_WINDOWS, OS_LINUX = 0, 1, 2
DECOY_OS = np.array([OS_ANY, OS_WINDOWS, OS_LINUX, OS_WINDOWS, OS_ANY, OS_WINDOWS, OS_ANY, OS_LINUX], dtype=np.int8)
# Port a decoy must find free, and the port it opens. Official Vsftpd checks 21 but opens 80 (an official bug:
# it can be stacked, and traps HTTPRFI); with the bug fixed it opens 21 like CybORG++.
DECOY_CHECK_PORT = np.array([P80, P21, P25, P139, P22, P3389, P443, P21], dtype=np.int32)
DECOY_OPEN_PORT_OFFICIAL = np.array([P80, P21, P25, P139, P22, P3389, P443, P80], dtype=np.int32)
DECOY_OPEN_PORT_FIXED = np.array([P80, P21, P25, P139, P22, P3389, P443, P21], dtype=np.int32)
# The exploit each decoy traps (a decoy process of the exploit's type on the exploit's port), or -1.
DECOY_TRAPS_OFFICIAL = np.array([X_HTTP, X_FTP, X_HARAKA, X_ETERNAL, X_SSH, X_BLUEKEEP, X_HTTPS, X_HTTP],
                                dtype=np.int32)
# Fixed Vsftpd sits on 21 with a webserver type: FTP finds no femitter there and fails silently.
DECOY_TRAPS_FIXED = np.array([X_HTTP, X_FTP, X_HARAKA, X_ETERNAL, X_SSH, X_BLUEKEEP, X_HTTPS, -1], dtype=np.int32)

# ------------------------------------------------------------------------------------------ blue actions (SPEC §2)
N_ACTIONS = 145
A_SLEEP, A_MONITOR = 0, 1
A_ANALYSE, A_REMOVE, A_DECOY, A_RESTORE = 2, 15, 28, 132   # + host (decoys: 28 + 13*k + host)

# ------------------------------------------------------------------------------------------ red actions (SPEC §4.2)
R_SLEEP, R_DRS, R_DNS, R_EXPLOIT, R_ESCALATE, R_IMPACT = range(6)
RED_ACTIONS = ("Sleep", "DiscoverRemoteSystems", "DiscoverNetworkServices", "ExploitRemoteService",
               "PrivilegeEscalate", "Impact")
"""CybORG's class name of each red action kind R_* (``info["red_action"]``'s first column indexes it)."""
SUBNETS = ("Enterprise", "Operational", "User")   # SUBNET_* order; DiscoverRemoteSystems targets a subnet


def red_action_name(kind: int, target: int, success: int = 1) -> str:
    """Red's action as CybORG names it, e.g. ``ExploitRemoteService User2`` or ``DiscoverRemoteSystems User``,
    with `` (failed)`` when it did not succeed (the three columns of ``info["red_action"]``)."""
    kind, target = int(kind), int(target)
    where = "" if target < 0 else " " + (SUBNETS[target] if kind == R_DRS else HOSTS[target])
    return f"{RED_ACTIONS[kind]}{where}{'' if success else ' (failed)'}"

# B_lineAgent (SPEC §4.5): failure jumps, and the Enterprise host revealed by escalating each user host.
BLINE_JUMPS = np.array([0, 1, 2, 2, 2, 2, 5, 5, 5, 5, 9, 9, 9, 12, 13], dtype=np.int8)
BLINE_ENTERPRISE_OF_USER = np.array([-1] * 9 + [ENT1, ENT1, ENT0, ENT0], dtype=np.int8)

# What a successful escalation reveals to red (SPEC §1.4): an IP (host index, -1 none) and a subnet (-1 none).
REVEAL_IP = np.array([-1, -1, -1, OPS0, -1, -1, -1, -1, -1, ENT1, ENT1, ENT0, ENT0], dtype=np.int8)
REVEAL_SUBNET = np.array([-1, 0, 0, 0, -1, -1, -1, 1, -1, -1, -1, -1, -1], dtype=np.int8)
SUBNET_HOSTS_MASK = np.array([
    _mask(DEFENDER, ENT0, ENT1, ENT2), _mask(OPH0, OPH1, OPH2, OPS0), _mask(USER0, USER1, USER2, USER3, USER4),
], dtype=np.int32)
OP_HOSTS_MASK = _mask(OPH0, OPH1, OPH2, OPS0)           # hostnames containing "Op"
ENT_HOSTS_MASK = _mask(ENT0, ENT1, ENT2)                 # hostnames containing "Ent"

# True red access levels reported in info (SPEC §8).
ACCESS_NONE, ACCESS_USER, ACCESS_PRIVILEGED = 0, 1, 2

# The built-in red agents' kinds (SimState.red_kind); every attacker, these included, is declared in sim.attackers.
RED_SLEEP, RED_BLINE, RED_MEANDER = 0, 1, 2


def blue_action_name(action: int) -> str:
    """CybORG's name of blue action ``action`` (0..144), e.g. ``Restore Enterprise1`` or ``DecoyApache User2``."""
    a = int(action)
    if a == A_SLEEP:
        return "Sleep"
    if a == A_MONITOR:
        return "Monitor"
    if a >= A_RESTORE:
        return f"Restore {HOSTS[a - A_RESTORE]}"
    if a >= A_DECOY:
        return f"Decoy{DECOYS[(a - A_DECOY) // N_HOSTS]} {HOSTS[(a - A_DECOY) % N_HOSTS]}"
    if a >= A_REMOVE:
        return f"Remove {HOSTS[a - A_REMOVE]}"
    return f"Analyse {HOSTS[a - A_ANALYSE]}"


def blue_action_host(action: int) -> int:
    """The host blue's action ``action`` acts on, -1 for Sleep and Monitor."""
    a = int(action)
    if a < A_ANALYSE:
        return -1
    if a >= A_RESTORE:
        return a - A_RESTORE
    if a >= A_DECOY:
        return (a - A_DECOY) % N_HOSTS
    return (a - A_ANALYSE) % N_HOSTS
