"""The attacker family's CybORG twins (workflow_rl/envs/cyborg_red.py) on real CybORG: each plays episodes against
a random defender without its checks firing (every IP and subnet red knows is named, every hostname red learnt is
the one its rules recorded, every action it takes is valid in CybORG's red action space), names the hosts as
CybORG does, and shows its signature; DelayedB_line sleeps its delay and then opens as B_line does."""
import numpy as np
import pytest

from workflow_rl.envs.cyborg import CybORGEnv
from workflow_rl.policies import random_action
from workflow_rl.sim import attackers, family
from workflow_rl.sim import tables as T

pytestmark = pytest.mark.cyborg
FAMILY = attackers.family()


def _episode(env, seed, steps=60, blue=random_action, at_reset=lambda: None):
    """Red's actions (kind, target, success) of one episode; ``at_reset`` is called right after the reset."""
    obs, _ = env.reset(seed=seed)
    at_reset()
    rng = np.random.default_rng(seed)
    acts = []
    for t in range(steps):
        obs, _, _, _, info = env.step(int(blue(t, obs[None], rng)[0]))
        acts.append(info["red_action"])
    return np.array(acts)


def _red(env):
    return env._cyborg.environment_controller.agent_interfaces["Red"].agent


@pytest.mark.parametrize("red", FAMILY[1:])
def test_a_twin_plays_with_every_check_holding_and_names_hosts_as_cyborg_does(red):
    env = CybORGEnv(red, episode_length=60, seed=3)
    for seed in (1, 2):
        acts = _episode(env, seed)
        assert (acts[:, 0] != T.R_SLEEP).all()   # the family's planners and RandomRed always act
        truth = env._cyborg.environment_controller.hostname_ip_map
        named = _red(env).host_of_ip
        assert named and all(truth[host] == ip for ip, host in named.items())
    env.close()


def test_the_raider_twin_takes_the_enterprise_and_stays_out_of_the_operational_subnet():
    env = CybORGEnv("EnterpriseRaider", episode_length=60, seed=3)
    acts = _episode(env, 4, blue=lambda t, obs, rng: np.zeros(1, np.int64))
    env.close()
    ops = [h for h in range(T.N_HOSTS) if T.HOST_SUBNET[h] == T.SUBNET_OPERATIONAL]
    assert not any(k != T.R_DRS and tgt in ops for k, tgt, _ in acts)
    assert {tuple(a[:2]) for a in acts[40:]} == {(T.R_ESCALATE, h) for h in (T.ENT0, T.ENT1, T.ENT2)}


def test_delayed_bline_twin_sleeps_its_delay_then_opens_as_b_line():
    env = CybORGEnv("DelayedB_line", episode_length=40, seed=3)
    delays = []
    for seed in range(6):
        acts = _episode(env, seed, steps=40, at_reset=lambda: delays.append(_red(env).delay))
        d = delays[-1]
        assert 0 <= d <= family.MAX_DELAY
        assert (acts[:d, 0] == T.R_SLEEP).all() and (acts[d:, 0] != T.R_SLEEP).all()
        assert tuple(acts[d, :2]) == (T.R_DRS, T.SUBNET_USER) and acts[d + 1, 0] == T.R_DNS
    env.close()
    assert len(set(delays)) > 1


def test_cyborg_reference_writes_a_reference_file_and_resumes_by_cell(tmp_path, monkeypatch):
    """The function the family's reference was played with: rows of the reference format, seeds as
    ``episode_seeds`` says, and a rerun replays no cell the file already holds."""
    from helpers import load_reference

    from workflow_rl import parity

    out = tmp_path / "ref.csv"
    parity.cyborg_reference(["delayed"], ["sleep"], 2, 7, out, progress=None)
    ref = load_reference(out)
    assert set(ref) == {("DelayedB_line", "sleep", L) for L in (30, 50, 100)}
    assert len(ref["DelayedB_line", "sleep", 30]) == 2
    seeds = sorted({int(r.split(",")[3]) for r in out.read_text().splitlines()[1:]})
    assert seeds == parity.episode_seeds(7, 2, 1) == [7, 100_010]
    monkeypatch.setattr(parity, "running_returns", lambda *a, **k: pytest.fail("replayed a finished cell"))
    parity.cyborg_reference(["DelayedB_line"], ["sleep"], 2, 7, out, progress=None)
    assert load_reference(out).keys() == ref.keys()


def test_evaluate_plays_the_family_on_real_cyborg(tmp_path, capsys):
    import json

    from helpers import run_main

    rc, _, err = run_main(["evaluate", "restore_compromised", "--engine", "cyborg", "--red-agents", "rush",
                           "random_red", "--lengths", "10", "--episodes", "2", "--cyborg-episodes", "2", "--out",
                           str(tmp_path)], capsys)
    assert rc == 0, err
    cells = json.loads((tmp_path / "evaluation.json").read_text())["results"]
    assert [(c["engine"], c["red_agent"]) for c in cells] == [("cyborg", "ImpactRush"), ("cyborg", "RandomRed")]
