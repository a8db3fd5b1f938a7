"""The replay recordings (``rl.viewer``) say what the engine did: the same access, rewards and compliance as
stepping the env directly and as ``evaluate``, red's actions as the engine reports them, and a page that carries
them inline."""
import json

import gymnasium as gym
import numpy as np
import pytest

from workflow_rl.envs import make_vector_env
from workflow_rl.rl import viewer
from workflow_rl.rl.evaluate import evaluate_cells, greedy_workflow_act, scripted_act
from workflow_rl.sim import tables as T
from workflow_rl.workflow import Workflow


def test_recording_matches_the_env_stepped_directly():
    """Access after every step, blue's actions and rewards equal what the env itself returns for the same
    episodes (the restore_compromised baseline acts, so blue's moves change what red holds)."""
    n, length, seed = 3, 40, 5
    eps = viewer.record_episodes(scripted_act("restore_compromised", 1), "RedMeanderAgent", n, length, seed=seed)
    env = make_vector_env(n, "RedMeanderAgent", episode_length=length, seed=seed)
    act = scripted_act("restore_compromised", 1)
    obs, info = env.reset(seed=seed)
    import torch

    for t in range(length):
        a = act(torch.as_tensor(obs), t).numpy()
        obs, r, _, trunc, info = env.step(a)
        access = np.where(trunc[:, None], info["final_info"]["red_access"], info["red_access"]) if trunc.any() \
            else info["red_access"]
        for i in range(n):
            s = eps[i]["steps"][t]
            assert s["access"] == access[i].tolist()
            assert s["blue"] == T.blue_action_name(a[i])
            assert s["reward"] == pytest.approx(float(r[i]), abs=1e-4)
            assert s["red"] == T.red_action_name(*info["red_action"][i])
    assert any(s["blue"].startswith("Restore") for e in eps for s in e["steps"])
    for e in eps:
        assert e["summary"]["return"] == pytest.approx(sum(s["reward"] for s in e["steps"]), abs=1e-3)


def test_bline_red_actions_follow_its_script():
    """Against a sleeping blue, B_line's first 15 actions are its fixed chain, ending in Impact on Op_Server0,
    and the summary says when it first held each host privileged."""
    ep = viewer.record_episodes(scripted_act("sleep"), "B_lineAgent", 1, 20, seed=3)[0]
    kinds = [s["red_kind"] for s in ep["steps"][:15]]
    assert kinds == ["DiscoverRemoteSystems", "DiscoverNetworkServices", "ExploitRemoteService", "PrivilegeEscalate",
                     "DiscoverNetworkServices", "ExploitRemoteService", "PrivilegeEscalate", "DiscoverRemoteSystems",
                     "DiscoverNetworkServices", "ExploitRemoteService", "PrivilegeEscalate",
                     "DiscoverNetworkServices", "ExploitRemoteService", "PrivilegeEscalate", "Impact"]
    assert ep["steps"][0]["red"] == "DiscoverRemoteSystems User"
    assert ep["steps"][14]["red"] == "Impact Op_Server0" and ep["steps"][14]["red_host"] == T.OPS0
    held = {h["host"]: h for h in ep["summary"]["held"]}
    assert held["Op_Server0"]["first_privileged"] == 14          # escalated at step 14, held to the end
    assert held["Op_Server0"]["privileged_steps"] == 20 - 13


def test_compliance_equals_evaluate():
    """Returns and pooled compliance of the recorded episodes are evaluate's for the same episodes (same seed,
    same envs): one rule, not a second copy."""
    wf = Workflow.parse("critical_first")
    act = greedy_workflow_act(wf)
    n, length, seed = 8, 60, 11
    eps = viewer.record_episodes(act, "B_lineAgent", n, length, seed=seed, workflow=wf)
    cell = evaluate_cells(act, ["B_lineAgent"], [length], n, seed=seed, workflow=wf)[0]
    assert np.mean([e["summary"]["return"] for e in eps]) == pytest.approx(cell.mean, abs=1e-3)
    c = sum(e["summary"]["compliant"] for e in eps)
    v = sum(e["summary"]["violations"] for e in eps)
    assert c + v == cell.fixes > 0
    assert c / (c + v) == pytest.approx(cell.compliance)
    steps = [s for e in eps for s in e["steps"]]
    assert {s["fix"] for s in steps} >= {"compliant", None}
    fixed = [s for s in steps if s["fix"] in ("compliant", "violation")]
    assert all(s["target"] in T.UNIT_TYPES for s in fixed)
    # a compliant fix is on a host of the target type
    for s in fixed:
        host_type = T.UNIT_TYPES[T.HOST_UNIT_TYPE[s["blue_host"]]]
        assert (host_type == s["target"]) == (s["fix"] == "compliant")


def test_page_is_self_contained():
    eps = viewer.record_episodes(scripted_act("sleep"), "B_lineAgent", 2, 5, seed=0)
    eps[0]["steps"][0]["blue"] = "</script><b>"   # a closing tag inside the data must not end the script element
    page = viewer.html(eps, {"agent": "sleep"})
    assert "http://" not in page.replace("http://www.w3.org/2000/svg", "") and "https://" not in page
    assert "<script src" not in page and "<link" not in page
    start = page.index('<script id="data" type="application/json">') + len('<script id="data" type="application/json">')
    data = json.loads(page[start:page.index("</script>", start)])
    assert data["episodes"][0]["steps"][0]["blue"] == "</script><b>"
    assert [h["name"] for h in data["layout"]["hosts"]] == list(T.HOSTS)


def test_single_env_renders_ansi():
    env = gym.make("workflow_rl/CAGE2-v0", render_mode="ansi", episode_length=3)
    env.reset(seed=0)
    assert "User0:P" in env.render()
    for _ in range(3):
        _, _, _, truncated, info = env.step(0)
    text = env.render()
    assert truncated and "t=3" in text and T.red_action_name(*info["red_action"]) in text
    from gymnasium.utils.env_checker import check_env

    from workflow_rl.envs.native_env import NativeEnv

    check_env(gym.make("workflow_rl/CAGE2-v0", render_mode="ansi").unwrapped)   # gymnasium's checks, render too
    with pytest.raises(ValueError, match="render_mode"):
        NativeEnv(render_mode="rgb_array")


@pytest.mark.cyborg
def test_cyborg_reports_red_actions_like_native():
    """Real CybORG's red actions, read from CybORG, name what the native engine's kernel reports: against a
    sleeping blue, B_line's successful actions are the same chain on both engines (an exploit that fails is retried,
    on either engine), kind by kind and subnet by subnet, ending in Impact on Op_Server0."""
    eps = {e: viewer.record_episodes(scripted_act("sleep"), "B_lineAgent", 1, 20, engine=e, seed=2)[0]
           for e in ("native", "cyborg")}
    chain = {e: [(s["red_kind"], int(T.HOST_SUBNET[s["red_host"]]) if s["red_host"] >= 0 else -1)
                 for s in ep["steps"] if s["red_ok"]][:15] for e, ep in eps.items()}
    assert chain["native"] == chain["cyborg"]
    assert chain["cyborg"][0] == ("DiscoverRemoteSystems", -1) and eps["cyborg"]["steps"][0]["red"].endswith("User")
    assert chain["cyborg"][14] == ("Impact", T.SUBNET_OPERATIONAL)
    assert eps["cyborg"]["steps"][-1]["red"] == "Impact Op_Server0"
