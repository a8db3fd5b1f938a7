"""The attacker family (workflow_rl/sim/family.py) on the native engine: each attacker shows its signature, the
behaviour it is in the family for, and the CUDA kernel plays the family as the CPU kernel does."""
import numpy as np
import pytest

from workflow_rl.policies import POLICIES
from workflow_rl.sim import attackers, family
from workflow_rl.sim import native as N
from workflow_rl.sim import tables as T

FAMILY = ("DelayedB_line", "RandomRed", "EnterpriseRaider", "RestoreChaser", "UserHopper", "ImpactRush")


def _play(red, blue, n=512, steps=100, seed=2, length=100):
    """Red's actions (kind, target, success: (steps, n, 3)) and what it knew before each step, against ``blue``
    (a function ``(t, obs, state) -> actions``)."""
    s, b = N.allocate_state(n), N.allocate_buffers(n)
    N.seed_state(s, seed, attackers.kind_of(red))
    N.reset_envs(s, b)
    acts, known = [], []
    for t in range(steps):
        known.append((s.m_known_ips.copy(), s.m_known_subnets.copy(), s.fam_hosts.copy(), t % length == 0))
        N.step(s, np.asarray(blue(t, b.obs, s), np.int64), b, length)
        acts.append(b.red_action.copy())
    return np.stack(acts), known


def _policy(name):
    rng = np.random.default_rng(0)
    return lambda t, obs, s: POLICIES[name](t, obs, rng)


def _sleep(t, obs, s):
    return np.zeros(len(obs), np.int64)


def test_the_family_is_built_in_after_cage2s_attackers_and_every_member_has_a_twin():
    assert attackers.names() == ("B_lineAgent", "RedMeanderAgent", "SleepAgent") + FAMILY
    assert [attackers.kind_of(n) for n in FAMILY] == list(range(3, 9))
    for name in FAMILY:
        a = attackers.get(name)
        assert a.cyborg_class == f"workflow_rl.envs.cyborg_red:{name}" and not a.cage2 and a.choose.__doc__
    assert attackers.cage2(attacking=True) == ("B_lineAgent", "RedMeanderAgent")   # the default mixture is CAGE2's


def test_delayed_bline_sleeps_a_uniform_0_to_20_steps_then_plays_b_line():
    n = 4096
    acts, _ = _play("DelayedB_line", _sleep, n=n, steps=80)
    bline, _ = _play("B_lineAgent", _sleep, n=n, steps=80)
    active = acts[:, :, 0] != T.R_SLEEP
    d = active.argmax(0)                       # the first step it acts: it sleeps until then, never after
    assert all(active[d[j]:, j].all() for j in range(n))
    counts = np.bincount(d)
    assert len(counts) == family.MAX_DELAY + 1 and counts.min() > n / 21 * 0.7 and counts.max() < n / 21 * 1.3
    # from its first action on it is B_line: its opening, and its first Impact as long after it as B_line's
    assert (acts[d, np.arange(n), 0] == T.R_DRS).all() and (acts[d, np.arange(n), 1] == T.SUBNET_USER).all()
    impact, first = (a[:, :, 0] == T.R_IMPACT for a in (acts, bline))
    assert impact.any(0).all() and first.any(0).all()
    assert abs((impact.argmax(0) - d).mean() - first.argmax(0).mean()) < 0.3


def test_random_red_takes_only_valid_actions_each_kind_a_fifth_of_the_time():
    acts, known = _play("RandomRed", _policy("random"), n=1024, steps=100)
    kinds = acts[:, :, 0]
    for t, (ips, subnets, hosts, first) in enumerate(known):
        if first:   # the episode's first step: red knows User0 and the User subnet only
            ips, subnets, hosts = (np.full_like(x, 1 << k) for x, k in ((ips, T.USER0), (subnets, T.SUBNET_USER),
                                                                          (hosts, T.USER0)))
        elif t:   # and the hostname of the host its previous action exploited, if that succeeded
            prev = acts[t - 1]
            hosts = hosts | np.where((prev[:, 0] == T.R_EXPLOIT) & (prev[:, 2] == 1), 1 << prev[:, 1].astype(int), 0)
        k, tgt = kinds[t], acts[t, :, 1].astype(np.int64)
        mask = np.where(k == T.R_DRS, subnets, np.where((k == T.R_DNS) | (k == T.R_EXPLOIT), ips, hosts))
        assert ((mask.astype(np.int64) >> tgt) & 1).all(), t
    share = np.bincount(kinds.ravel(), minlength=6)[1:] / kinds.size
    assert (kinds != T.R_SLEEP).all() and np.allclose(share, 0.2, atol=0.01), share


def test_enterprise_raider_takes_and_holds_the_enterprise_and_never_the_operational_subnet():
    acts, _ = _play("EnterpriseRaider", _sleep, n=1024, steps=100)
    ops = T.HOST_SUBNET == T.SUBNET_OPERATIONAL
    host_targets = acts[:, :, 0] != T.R_DRS
    assert not (host_targets & ops[np.maximum(acts[:, :, 1], 0)]).any()
    assert not (acts[:, :, 0] == T.R_IMPACT).any()
    assert not ((acts[:, :, 0] == T.R_DRS) & (acts[:, :, 1] == T.SUBNET_OPERATIONAL)).any()
    # by step 40 it holds every Enterprise host: its actions are the hold's checks, each succeeding
    hold = acts[40:]
    assert (hold[:, :, 0] == T.R_ESCALATE).all() and np.isin(hold[:, :, 1], [T.ENT0, T.ENT1, T.ENT2]).all()
    assert hold[:, :, 2].mean() > 0.99


def _restore_once(host, at):
    def blue(t, obs, s):
        return np.full(len(obs), T.A_RESTORE + host if t == at else T.A_SLEEP, np.int64)
    return blue


def test_restore_chaser_re_exploits_a_restored_host_as_soon_as_a_check_finds_it_lost():
    """Enterprise2 restored once at step 40 (the chaser holds its route by then): within a hold cycle its check of
    Enterprise2 fails and its next action is the exploit, no rescan (its ports are remembered), then the
    escalation; B_line, in the same episodes, never goes back to Enterprise2."""
    acts, _ = _play("RestoreChaser", _restore_once(T.ENT2, 40), n=512, steps=60)
    after = acts[41:]
    failed = (after[:, :, 0] == T.R_ESCALATE) & (after[:, :, 1] == T.ENT2) & (after[:, :, 2] == 0)
    assert failed.any(0).mean() > 0.95
    j = np.flatnonzero(failed.any(0))
    t = failed[:, j].argmax(0)
    assert (t < family.HOLD_TICKS).all()
    nxt, then = after[t + 1, j], after[t + 2, j]
    assert (nxt[:, 0] == T.R_EXPLOIT).all() and (nxt[:, 1] == T.ENT2).all()
    assert ((then[:, 0] == T.R_ESCALATE) & (then[:, 1] == T.ENT2)).mean() > 0.7   # the exploit may have failed
    bline, _ = _play("B_lineAgent", _restore_once(T.ENT2, 40), n=512, steps=60)
    assert not ((bline[41:, :, 1] == T.ENT2) & (bline[41:, :, 0] != T.R_DRS)).any()


def test_user_hopper_routes_through_other_user_hosts_where_b_line_retries_its_one():
    """Against restore_compromised (every exploited host restored next step) B_line exploits one user host all
    episode; the hopper gives a blocked host up for another, and so tries several."""
    def user_hosts(red):
        acts, _ = _play(red, _policy("restore_compromised"), n=512, steps=50)
        hit = (acts[:, :, 0] == T.R_EXPLOIT) & (acts[:, :, 1] >= T.USER1)
        return np.array([len(np.unique(acts[hit[:, j], j, 1])) for j in range(hit.shape[1])])

    assert (user_hosts("B_lineAgent") == 1).all()
    hopper = user_hosts("UserHopper")
    assert (hopper >= 2).mean() > 0.9 and hopper.max() == 4


def test_impact_rush_retakes_op_server0_and_impacts_without_escalating_again():
    """Op_Server0 restored once at step 30 (the rush impacts from step 15 or so): its Impact fails, it exploits
    Op_Server0 again and then impacts at once; B_line escalates in between."""
    def after_restore(red):
        acts, _ = _play(red, _restore_once(T.OPS0, 30), n=512, steps=40, length=100)
        seq = acts[30:, :, :2]   # from red's action of the step blue restores (blue acts first)
        ok = (seq[0, :, 0] == T.R_IMPACT) & (seq[1, :, 0] == T.R_EXPLOIT) & (seq[1, :, 1] == T.OPS0)
        return seq, ok

    seq, ok = after_restore("ImpactRush")
    assert ok.mean() > 0.9
    assert (seq[2, ok, 0] == T.R_IMPACT).mean() > 0.9
    seq, ok = after_restore("B_lineAgent")
    assert ok.mean() == 0   # B_line's failed Impact jumps to its escalation first
    assert (seq[0, :, 0] == T.R_IMPACT).mean() > 0.9 and (seq[1, :, 0] == T.R_ESCALATE).mean() > 0.9


@pytest.mark.parametrize("red", FAMILY)
def test_a_seed_defines_each_attackers_episodes(red):
    a, _ = _play(red, _policy("random"), n=64, steps=60, seed=4)
    b, _ = _play(red, _policy("random"), n=64, steps=60, seed=4)
    c, _ = _play(red, _policy("random"), n=64, steps=60, seed=5)
    assert np.array_equal(a, b) and not np.array_equal(a, c)


@pytest.mark.slow
def test_cudasim_kernel_equals_cpu_kernel_for_the_family():
    """Under numba's CUDA simulator (a subprocess, tests/sim/test_cuda_engine.py) the CUDA build plays the family
    as the CPU build does: 36 envs, every family attacker against every scripted defender, 110 steps of 50-step
    episodes (two autoresets), every output and state field equal after every step."""
    pytest.importorskip("workflow_rl.sim.cuda", reason="numba-cuda is not installed (pip install -e '.[dev]')")
    from test_cuda_engine import _simulated

    code = """
import sys, warnings
warnings.filterwarnings("ignore", "overflow encountered", RuntimeWarning)
import numpy as np
from workflow_rl.policies import POLICIES
from workflow_rl.sim import attackers, cuda as C, native as N
family = [attackers.kind_of(n) for n in sys.argv[1:]]
_seed = N.seed_state
N.seed_state = lambda s, seed, red: _seed(s, seed, np.repeat(np.array(family, np.int8), 6))  # env j: defender j % 6
print(C.lockstep_mismatch(36, 110, True, list(POLICIES.values()), seed=6, episode_length=50, threads_per_block=8))
"""
    r = _simulated(code, *FAMILY)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip() == "None", r.stdout


def test_red_agent_family_draws_the_six_with_equal_odds():
    from workflow_rl import make_vector_env, parse_red_agent
    from workflow_rl.envs.names import red_weights

    assert red_weights("Family") == {n: 1 / 6 for n in FAMILY}
    assert parse_red_agent("family") == ",".join(f"{n}:0.166667" for n in FAMILY)
    env = make_vector_env(600, "family", seed=1, episode_length=5)
    env.reset(seed=1)
    kinds = env.state.red_kind.copy()
    env.close()
    counts = np.bincount(kinds, minlength=9)
    assert (counts[:3] == 0).all() and (counts[3:] > 60).all(), counts


@pytest.mark.slow
def test_evaluate_and_train_take_the_family_by_name(tmp_path, capsys):
    import json

    from helpers import run_main

    rc, _, err = run_main(["evaluate", "restore_compromised", "--red-agents", "delayed", "EnterpriseRaider",
                           "--lengths", "30", "--episodes", "8", "--out", str(tmp_path / "eval")], capsys)
    assert rc == 0, err
    cells = json.loads((tmp_path / "eval" / "evaluation.json").read_text())["results"]
    assert [c["red_agent"] for c in cells] == ["DelayedB_line", "EnterpriseRaider"]
    rc, _, err = run_main(["train", "--red-agent", "hopper", "--n-envs", "4", "--max-episodes", "2",
                           "--min-episodes", "1", "--update-every-steps", "50", "--eval-episodes", "0",
                           "--no-progress", "--out", str(tmp_path / "run")], capsys)
    assert rc == 0, err
    assert json.loads((tmp_path / "run" / "config.json").read_text())["red_agent"] == "UserHopper"


def test_the_held_out_protocol_splits_the_attacking_built_ins_in_two():
    from workflow_rl.envs.names import red_weights

    attacking = {*attackers.cage2(attacking=True), *attackers.family()}
    train, held = set(attackers.training()), set(attackers.held_out())
    assert held == set(attackers.HELD_OUT) and held <= attacking
    assert not train & held and train | held == attacking
    assert set(red_weights("training")) == train and set(red_weights("held_out")) == held
    assert red_weights("HELD_OUT") == {n: 0.5 for n in attackers.HELD_OUT}
    with pytest.raises(ValueError, match="is taken"):
        attackers.register(attackers.Attacker("held_out", None))


def test_the_robust_recipe_never_trains_on_a_held_out_attacker_and_gives_cage2s_two_half():
    from workflow_rl.envs.names import red_weights
    from workflow_rl.rl.recipes import recipe

    for device in ("cpu", "cuda"):
        weights = red_weights(recipe("robust").for_device(device)["red_agent"])
        assert set(weights) == set(attackers.training())
        assert sum(weights[n] for n in attackers.cage2(attacking=True)) == pytest.approx(0.5)
    rest = {k: v for k, v in recipe("robust").settings.items() if k != "red_agent"}
    assert rest == {k: v for k, v in recipe("universal").settings.items() if k != "red_agent"}
