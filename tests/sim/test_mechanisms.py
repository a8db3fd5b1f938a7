"""Mechanism tests of the native engine against the CAGE2 rules (SPEC section numbers in the docstrings)."""
import numpy as np
import pytest
from helpers import run_policy

from workflow_rl.policies import sleep
from workflow_rl.sim import native as N
from workflow_rl.sim import tables as T


def _fresh(n, red=T.RED_SLEEP, seed=3):
    s, b = N.allocate_state(n), N.allocate_buffers(n)
    N.seed_state(s, seed, red)
    N.reset_envs(s, b)
    return s, b


def _step(s, b, action, official_bugs=True, length=100):
    n = len(s.key)
    N.step(s, np.full(n, action, np.int64), b, length, official_bugs)


def _bline_about_to(s, state_before, target=T.USER2):
    """Make B_lineAgent's next action the one of state ``state_before + 1`` (its last action succeeded)."""
    s.red_kind[:] = T.RED_BLINE
    s.bl_state[:] = state_before
    s.last_success[:] = 1
    s.bl_target[:] = target


def _remember_ports(s, h, ports=None):
    s.red_scanned[:, h] = 1
    s.red_ports[:, h] = T.REAL_PORTS[h] if ports is None else ports


def _rate(x):
    return float(np.mean(x))


def _within(p_hat, p, n, z=5.0):
    return abs(p_hat - p) <= z * np.sqrt(p * (1 - p) / n) + 1e-12


def test_bline_first_impact_at_step_15_under_sleep():
    """§4.5: without blue, the earliest Impact is at step 15 (later only when an exploit choice fails)."""
    n = 2000
    s, b = _fresh(n, T.RED_BLINE)
    rewards = []
    for _ in range(20):
        _step(s, b, T.A_SLEEP)
        rewards.append(b.reward.copy())
    r = np.stack(rewards)  # (steps, envs)
    impacted = r <= -10
    first = np.where(impacted.any(0), impacted.argmax(0) + 1, 99)
    assert first.min() == 15
    assert np.mean(first == 15) > 0.5


def test_sleep_returns_are_the_leaderboard_values():
    """§10: Sleep blue scores about -1134 (B_line) and -972 (Meander) over 100 steps."""
    bl = run_policy(sleep, T.RED_BLINE, 4000)[100].mean()
    me = run_policy(sleep, T.RED_MEANDER, 4000)[100].mean()
    assert abs(bl - (-1134.0)) < 5
    assert abs(me - (-972.0)) < 10


def test_exploit_choice_frequencies_on_user2():
    """§4.3: with several options the top-weighted one is taken 75% of the time (User2: EternalBlue -> SYSTEM,
    else BlueKeep -> NetworkService, detected 95% of the time -> removable)."""
    n = 100_000
    s, b = _fresh(n)
    _bline_about_to(s, 1, T.USER2)
    _remember_ports(s, T.USER2)
    _step(s, b, T.A_SLEEP)
    assert (s.last_success == 1).all()
    assert _within(_rate(s.sess_priv[:, T.USER2] == 1), 0.75, n)
    assert _within(_rate(s.sess_rem[:, T.USER2] == 1), 0.25 * 0.95, n)
    assert _within(_rate(s.sess_user[:, T.USER2] == 1), 0.25 * 0.05, n)


def test_exploit_choice_user4_other_options_uniform():
    """§4.3: the 25% non-top share is spread uniformly over the other options (User4: Haraka top; SQL, HTTPS, HTTP,
    SSH each 6.25%). SSH success is the only one logging 11 events (Exploit + User, no PID)."""
    n = 100_000
    s, b = _fresh(n)
    _bline_about_to(s, 1, T.USER4)
    _remember_ports(s, T.USER4)
    _step(s, b, T.A_SLEEP)
    priv = s.sess_priv[:, T.USER4] == 1
    assert _within(_rate(priv), 0.75 + 0.0625, n)        # Haraka or SQLInjection: root
    web = (s.sess_rem[:, T.USER4] + s.sess_user[:, T.USER4]) == 1
    assert _within(_rate(web), 0.0625 * 3, n)            # HTTPS, HTTP (www-data) or SSH (pi)
    assert (s.red_file[:, T.USER4][priv] == 1).all()


def test_detection_rate_and_what_blue_sees():
    """§4.4/§6: a non-SSH success is detected 95% of the time (Exploit, Compromised=User); undetected shows Scan."""
    n = 100_000
    s, b = _fresh(n)
    _bline_about_to(s, 4, T.USER1)        # state 5: exploit Enterprise1
    _remember_ports(s, T.ENT1, 1 << T.P443)  # only HTTPSRFI is possible
    _step(s, b, T.A_SLEEP)
    detected = s.sess_rem[:, T.ENT1] == 1
    assert ((s.sess_rem + s.sess_user)[:, T.ENT1] == 1).all()
    assert _within(_rate(detected), 0.95, n)
    view = b.obs.reshape(n, 13, 4)[:, T.ENT1]
    assert (view[detected] == [1, 1, 0, 1]).all()
    assert (view[~detected] == [1, 0, 0, 0]).all()


def test_decoy_placed_after_last_scan_is_ignored():
    """§3.4: red chooses from remembered ports, so a Femitter placed after the scan never traps FTP; after a rescan
    FTP becomes the top option and always hits the decoy."""
    n = 50_000
    femitter_user2 = T.A_DECOY + 13 * T.D_FEMITTER + T.USER2
    s, b = _fresh(n)
    _remember_ports(s, T.USER2)
    _step(s, b, femitter_user2)
    assert (s.decoys[:, T.USER2] == 1 << T.D_FEMITTER).all()
    _bline_about_to(s, 1, T.USER2)
    _step(s, b, T.A_SLEEP)
    assert _within(_rate(s.last_success == 1), 1.0, n)      # EternalBlue or BlueKeep: never the decoy

    s, b = _fresh(n)
    _step(s, b, femitter_user2)
    _remember_ports(s, T.USER2, T.REAL_PORTS[T.USER2] | 1 << T.P21)  # the scan saw the decoy
    _bline_about_to(s, 1, T.USER2)
    _step(s, b, T.A_SLEEP)
    failed = s.last_success == 0
    assert _within(_rate(failed), 0.75, n)                  # FTP chosen -> decoy -> failure
    view = b.obs.reshape(n, 13, 4)[:, T.USER2]
    assert (view[failed] == [1, 0, 0, 0]).all()             # a decoy hit shows as Scan


def test_remove_only_kills_detected_user_level_sessions():
    """§3.2: Remove kills removable sessions only; root/SYSTEM and SSH/undetected sessions survive."""
    s, b = _fresh(4)
    s.sess_priv[:, T.USER3] = 1
    s.sess_rem[:, T.USER3] = 2
    s.sess_user[:, T.USER3] = 1
    s.obs_comp[:, T.USER3] = 2
    _step(s, b, T.A_REMOVE + T.USER3)
    assert (s.sess_rem[:, T.USER3] == 0).all()
    assert (s.sess_priv[:, T.USER3] == 1).all() and (s.sess_user[:, T.USER3] == 1).all()
    assert (b.obs.reshape(4, 13, 4)[:, T.USER3, 2:] == [1, 0]).all()  # Compromised -> Unknown
    assert np.allclose(b.reward, -0.1)                                  # still privileged on User3


def test_restore_clears_host_costs_one_and_keeps_user0_foothold():
    s, b = _fresh(3)
    s.sess_priv[:, T.ENT1] = 1
    s.red_file[:, T.ENT1] = 1
    s.decoys[:, T.ENT1] = 1 << T.D_FEMITTER
    _step(s, b, T.A_RESTORE + T.ENT1)
    assert (s.sess_priv[:, T.ENT1] == 0).all() and (s.red_file[:, T.ENT1] == 0).all()
    assert (s.decoys[:, T.ENT1] == 0).all()
    assert np.allclose(b.reward, -1.0)
    _step(s, b, T.A_RESTORE + T.USER0)
    assert (b.access[:, T.USER0] == T.ACCESS_PRIVILEGED).all()


def test_escalate_loses_to_remove_in_the_same_step():
    """§3.6: blue acts first, so Remove kills the removable session before red's escalate, which then fails."""
    s, b = _fresh(8)
    _bline_about_to(s, 2, T.USER3)     # next: escalate User3
    s.sess_rem[:, T.USER3] = 1
    _step(s, b, T.A_REMOVE + T.USER3)
    assert (s.last_success == 0).all() and (s.sess_priv[:, T.USER3] == 0).all()


def test_exploit_wins_over_restore_in_the_same_step():
    """§3.6: restore first, then the exploit succeeds."""
    s, b = _fresh(8)
    _bline_about_to(s, 1, T.USER2)
    _remember_ports(s, T.USER2)
    _step(s, b, T.A_RESTORE + T.USER2)
    assert (s.last_success == 1).all()
    assert (b.access[:, T.USER2] > 0).all()


def test_otservice_restore_bug_and_its_switch():
    """§3.3: after any Restore of Op_Server0 Impact never costs again (-281 vs B_line); fixing it brings it back."""
    def restore_opserver_once(t, obs, rng):
        return np.full(len(obs), T.A_RESTORE + T.OPS0 if t == 0 else T.A_SLEEP)

    official = run_policy(restore_opserver_once, T.RED_BLINE, 4000)[100].mean()
    fixed = run_policy(restore_opserver_once, T.RED_BLINE, 4000, official_bugs=False)[100].mean()
    assert abs(official - (-281.1)) < 5
    assert fixed < -1000


def test_vsftpd_stacks_officially_and_blocks_apache():
    """§2: official Vsftpd checks port 21 but opens 80: it stacks and then Apache (80) fails; fixed, it is once."""
    vs, apache = T.A_DECOY + 13 * T.D_VSFTPD + T.ENT0, T.A_DECOY + 13 * T.D_APACHE + T.ENT0
    s, b = _fresh(2)
    for a in (vs, vs, apache):
        _step(s, b, a)
    assert (s.vsftpd[:, T.ENT0] == 2).all()
    assert (s.decoys[:, T.ENT0] & (1 << T.D_APACHE) == 0).all()
    s, b = _fresh(2)
    for a in (vs, vs, apache):
        _step(s, b, a, official_bugs=False)
    assert (s.vsftpd[:, T.ENT0] == 1).all()
    assert (s.decoys[:, T.ENT0] & (1 << T.D_APACHE) != 0).all()   # 80 stays free when Vsftpd opens 21


@pytest.mark.parametrize("decoy,host,ok", [
    (T.D_APACHE, T.USER3, False), (T.D_APACHE, T.USER2, True), (T.D_FEMITTER, T.ENT1, True),
    (T.D_FEMITTER, T.ENT0, False), (T.D_SMSS, T.USER1, True), (T.D_SMSS, T.USER2, False),
    (T.D_SSHD, T.USER3, True), (T.D_SSHD, T.USER4, False), (T.D_SVCHOST, T.USER0, True),
    (T.D_HARAKA, T.OPS0, True), (T.D_HARAKA, T.USER3, False), (T.D_VSFTPD, T.USER4, True),
])
def test_decoy_placement_rules(decoy, host, ok):
    """§2 placement table: OS must match and the decoy's port must be free."""
    s, b = _fresh(1)
    _step(s, b, T.A_DECOY + 13 * decoy + host)
    assert bool(s.decoys[0, host] >> decoy & 1) == ok


def test_analyse_reveals_red_files_as_privileged_until_restore():
    """§3.1: Analyse marks a host Privileged whenever a red file exists, even after the session is removed."""
    s, b = _fresh(2)
    s.red_file[:, T.USER3] = 1
    _step(s, b, T.A_ANALYSE + T.USER3)
    assert (b.obs.reshape(2, 13, 4)[:, T.USER3, 2:] == [1, 1]).all()
    _step(s, b, T.A_SLEEP)
    assert (b.obs.reshape(2, 13, 4)[:, T.USER3, 2:] == [1, 1]).all()   # persistent
    _step(s, b, T.A_RESTORE + T.USER3)
    assert (b.obs.reshape(2, 13, 4)[:, T.USER3, 2:] == [0, 0]).all()


def test_rewards_are_exact_tenths():
    r = run_policy(sleep, T.RED_MEANDER, 500, checkpoints=(100,))[100]
    assert np.allclose(np.round(r * 10), r * 10, atol=1e-3)


def test_state_is_small():
    s = N.allocate_state(1000)
    assert N.state_bytes_per_env(s) <= 2048
