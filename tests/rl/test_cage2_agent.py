"""``workflow_rl.rl.cage2.BlueAgent``: CybORG's agent interface, no global state touched, and on real CybORG, run by
CybORG's own evaluation loop, the same returns as ``evaluate --engine cyborg`` on the same episodes."""
import os
import random

import numpy as np
import pytest
import torch

from workflow_rl.rl.cage2 import BlueAgent
from workflow_rl.envs.native_env import NativeEnv
from workflow_rl.rl.planning.planner import PlanConfig, make_act

TINY = PlanConfig(particles=16, top_k=2, horizon=2, rollouts=2)


def _episode(agent, env, seed, steps):
    obs, _ = env.reset(seed=seed)
    actions, ret = [], 0.0
    for _ in range(steps):
        a = agent.get_action(obs, None)
        actions.append(a)
        obs, r, *_ = env.step(a)
        ret += r
    agent.end_episode()
    return actions, ret


def test_the_agent_plays_what_make_act_plays_and_end_episode_starts_a_new_one():
    """Greedy BlueAgent == make_act's act with the step counted for it, episode after episode (memory reset)."""
    agent, env = BlueAgent(), NativeEnv("B_lineAgent", 30)
    for seed in (1, 2):
        mine, _ = _episode(agent, env, seed, 30)
        act = make_act("pretrained:universal")
        obs, _ = env.reset(seed=seed)
        ref = []
        for t in range(30):
            ref.append(int(act(obs, t)))
            obs, *_ = env.step(ref[-1])
        assert mine == ref
        assert agent.t == 0


def test_the_agent_accepts_csle_cyborgs_reset_pair_and_counts_steps():
    obs = np.zeros(52, np.float32)
    other = BlueAgent()
    plain = [other.get_action(obs, None) for _ in range(2)]
    agent = BlueAgent()
    assert [agent.get_action((obs, {}), None) for _ in range(2)] == plain   # the pair reads as its observation
    assert agent.t == 2
    agent.set_initial_values(None, obs)   # a no-op
    with pytest.raises(ValueError, match="ChallengeWrapper"):
        agent.get_action({"User0": {}})
    with pytest.raises(ValueError, match="145 blue actions"):
        agent.get_action(obs, 54)
    with pytest.raises(NotImplementedError, match="workflow-rl train"):
        agent.train(None)


def test_a_planned_agent_plays_and_a_told_length_is_enforced():
    agent = BlueAgent(plan=TINY, seed=3, episode_length=5)
    actions, _ = _episode(agent, NativeEnv("RedMeanderAgent", 5), 4, 5)
    assert len(actions) == 5 and all(0 <= a < 145 for a in actions)
    obs = np.zeros(52, np.float32)
    for _ in range(5):
        agent.get_action(obs)
    with pytest.raises(RuntimeError, match="end_episode"):
        agent.get_action(obs)


def test_importing_and_constructing_changes_no_global_state():
    threads, py_state, torch_state = torch.get_num_threads(), random.getstate(), torch.get_rng_state()
    env = dict(os.environ)
    agent = BlueAgent("pretrained:universal", plan=True, workflow="D,OS,E,OH,U")
    agent.get_action(np.zeros(52, np.float32))
    assert torch.get_num_threads() == threads and random.getstate() == py_state
    assert torch.equal(torch.get_rng_state(), torch_state) and dict(os.environ) == env


@pytest.mark.parametrize("kwargs, error, match", [
    ({"name": "pretrained:nope"}, ValueError, "no pretrained agent"),
    ({"name": 3}, TypeError, "shipped agent's name"),
    ({"workflow": "X,Y"}, ValueError, "unknown unit type"),
    ({"workflow": 5}, TypeError, "Workflow or its text"),
    ({"plan": "yes"}, TypeError, "PlanConfig"),
    ({"seed": -1}, ValueError, "seed must be in"),
])
def test_bad_arguments_are_refused_at_construction(kwargs, error, match):
    with pytest.raises(error, match=match):
        BlueAgent(**kwargs)


def test_workflow_none_is_unconstrained_and_a_text_workflow_is_followed():
    assert BlueAgent(workflow="none").workflow is None
    assert str(BlueAgent(workflow="D,OS,E,OH,U").workflow) == "D,OS,E,OH,U"


@pytest.mark.cyborg
@pytest.mark.parametrize("red", ["B_lineAgent", "RedMeanderAgent"])
def test_cyborgs_own_evaluation_loop_scores_what_evaluate_scores(red):
    """CybORG's evaluation loop (csle-cyborg's ``evaluation/evaluation.py``, written against csle-cyborg as it is:
    ``Main`` takes the parsed scenario, ``reset`` returns ``(obs, info)``, ``step`` five values) with one BlueAgent
    over the episodes, each episode seeded as ``evaluate --engine cyborg`` seeds env i of its first round
    (``EVAL_SEED + i``): the same returns."""
    from csle_cyborg import agents
    from csle_cyborg.agents.wrappers.challenge_wrapper import ChallengeWrapper
    from csle_cyborg.main import Main

    from workflow_rl.envs.cyborg import scenario_dict
    from workflow_rl.rl.evaluate import EVAL_SEED, evaluate_policy

    episodes, steps = 2, 30
    ours = evaluate_policy(make_act("pretrained:universal"), red, length=steps, episodes=episodes,
                           engine="cyborg", workers=episodes)
    agent = BlueAgent()
    saved = random.getstate()
    try:
        cyborg = Main(scenario_dict(), "sim", agents={"Red": getattr(agents, red)})
        wrapped = ChallengeWrapper(env=cyborg, agent_name="Blue")
        action_space = wrapped.get_action_space("Blue")
        totals = []
        for i in range(episodes):
            random.seed(EVAL_SEED + i)   # CybORG draws from Python's global random: the episode's seed
            observation = wrapped.reset()
            rewards = []
            for _ in range(steps):
                action = agent.get_action(observation, action_space)
                observation, rew, done, info, _ = wrapped.step(action)
                rewards.append(float(np.float32(rew)))
            agent.end_episode()
            totals.append(sum(rewards))
    finally:
        random.setstate(saved)
    np.testing.assert_allclose(totals, ours.played.returns, atol=1e-4)


@pytest.mark.cyborg
def test_evaluate_on_cyborg_writes_its_scores_in_cage2s_submission_format(tmp_path):
    """``evaluate --engine cyborg --out`` also writes ``cage2_submission.txt``: CAGE2's lines (length, then red agent
    in the challenge's order), each the mean and sample standard deviation of that cell's rows in episodes.csv;
    a native-only evaluation writes none (its scores are not CybORG's) and removes an earlier one it replaces."""
    import csv
    import re
    import statistics

    from workflow_rl.cli import main

    out = tmp_path / "ev"
    assert main(["evaluate", "sleep", "--engine", "cyborg", "--red-agents", "Meander", "B_line", "--lengths", "50",
                 "30", "--episodes", "3", "--workers", "1", "--out", str(out)]) == 0
    lines = (out / "cage2_submission.txt").read_text().splitlines()
    scores = [re.fullmatch(r"Average reward for red agent (\w+) and steps (\d+) is: (\S+) with a standard deviation "
                           r"of (\S+)", line) for line in lines if line.startswith("Average")]
    assert [(m[1], int(m[2])) for m in scores] == [("B_lineAgent", 30), ("RedMeanderAgent", 30),
                                                    ("B_lineAgent", 50), ("RedMeanderAgent", 50)]
    rows = list(csv.DictReader((out / "episodes.csv").open()))
    for m in scores:
        returns = [float(r["return"]) for r in rows if (r["red_agent"], r["length"]) == (m[1], m[2])]
        assert len(returns) == 3
        assert float(m[3]) == pytest.approx(statistics.mean(returns), abs=1e-6)
        assert float(m[4]) == pytest.approx(statistics.stdev(returns), abs=1e-6)
    assert "Technique: sleep, greedy" in lines[1] and "the first steps of the same 50-step episodes" in lines[2]
    # a native evaluation replacing it leaves no CybORG scores behind that are not its own
    assert main(["evaluate", "sleep", "--episodes", "3", "--out", str(out), "--overwrite"]) == 0
    assert not (out / "cage2_submission.txt").exists() and (out / "evaluation.json").exists()
