"""The planner and the one acting API (planning/planner.py), on tiny settings."""
import dataclasses
import math

import numpy as np
import pytest
import torch

from workflow_rl.sim import attackers
from workflow_rl.envs.native_env import NativeVectorEnv
from workflow_rl.rl import pretrained
from workflow_rl.rl.actor import Actor
from workflow_rl.rl.memory import policy_input
from workflow_rl.rl.planning.planner import PlanConfig, Planner, make_act, play_true_state
from workflow_rl.rl.ppo import WORKFLOW_DIM
from workflow_rl.sim import tables as T
from workflow_rl.workflow import Workflow
from helpers import assert_one_error_line, run_main   # tests/ is on the path (conftest.py)
from helpers import REPO

TINY = PlanConfig(particles=16, top_k=3, horizon=4, rollouts=4)


@pytest.fixture(scope="module")
def cage2():
    return pretrained.load("pretrained:universal")


def _act(cage2, plan=None, **kw):
    """``make_act`` of the loaded agent and workflow ``cage2``."""
    agent, wf = cage2
    return make_act(agent, plan, workflow=wf, **kw)


def _actions(act, red=T.RED_MEANDER, n=1, steps=25, seed=8, batched=False):
    env = NativeVectorEnv(n, red, 100, seed=seed)
    obs, _ = env.reset(seed=seed)
    out, ret = [], np.zeros(n)
    for t in range(steps):
        a = act(torch.as_tensor(obs), t).numpy() if batched else np.array([act(obs[0], t)])
        out.append(a.copy())
        obs, r, _, _, _ = env.step(a)
        ret += r
    return np.stack(out, 1), ret


@pytest.mark.parametrize("kw,match", [({"particles": 0}, "--plan-particles"), ({"top_k": 146}, "--plan-top-k"),
                                      ({"top_k": 0}, "--plan-top-k"), ({"horizon": -1}, "--plan-horizon"),
                                      ({"rollouts": 0}, "--plan-rollouts"),
                                      ({"fix_candidates": -1}, "--plan-fix-candidates"),
                                      ({"max_violation": 1.5}, "--plan-max-violation"),
                                      ({"particles": "8"}, "--plan-particles"), ({"red_agent": "x"}, "red agent"),
                                      ({"min_fit": -0.1}, "--plan-min-fit"), ({"min_fit": 1.5}, "--plan-min-fit"),
                                      ({"fallback_prior": "nobody"}, "--plan-fallback-prior: unknown red agent")])
def test_bad_settings_are_one_value_error_naming_the_flag(kw, match):
    with pytest.raises(ValueError, match=match):
        PlanConfig(**kw).validate()


def test_planning_is_deterministic_with_a_seed(cage2):
    runs = [_actions(make_act("pretrained:universal", TINY, seed=s))[0] for s in (3, 3)]
    assert np.array_equal(*runs)


def test_no_search_is_the_greedy_policy(cage2):
    greedy = _actions(_act(cage2))[0]
    for cfg in (PlanConfig(particles=4, top_k=1, fix_candidates=0), PlanConfig(particles=4, horizon=0)):
        assert np.array_equal(_actions(_act(cage2, cfg))[0], greedy)


def test_a_batch_acts_as_its_envs_one_by_one(cage2):
    batch, _ = _actions(_act(cage2, TINY, seed=2), n=3, steps=12, batched=True)
    first, _ = _actions(_act(cage2, TINY, seed=2), n=1, steps=12, batched=True)
    assert np.array_equal(batch[:1], first)          # env 0 of a batch is what a one-env harness gets
    assert batch.shape == (3, 12) and ((batch >= 0) & (batch < T.N_ACTIONS)).all()


@pytest.mark.parametrize("red,falls", [(T.RED_MEANDER, True), (T.RED_BLINE, False)])
def test_a_rejected_model_plays_the_greedy_action_for_the_rest_of_the_episode(cage2, red, falls):
    """Under a prior of B_line alone, against Meander the belief's fit falls below ``min_fit`` within a few steps:
    from that step on the planned act plays the policy's own greedy action (the network's choice from the very
    memory the planned act keeps, mirrored here) and no longer follows its belief; against B_line it plans on."""
    agent, wf = cage2
    plan = dataclasses.replace(TINY, particles=256, red_agent="B_lineAgent", fallback_prior="")   # 16 lose B_line
    act = _act(cage2, plan, seed=3)
    shadow = Actor.of(agent, wf)
    env = NativeVectorEnv(1, red, 100, seed=8)
    obs, _ = env.reset(seed=8)
    mem, fell = shadow.reset(1), None
    for t in range(25):
        a = act(obs[0], t)
        greedy = int(shadow.greedy(shadow.inputs(torch.as_tensor(obs), mem))[0])
        shadow.took(mem, torch.tensor([a]))
        fell = act.fallbacks()[0] if fell is None else fell
        if fell is not None:
            assert a == greedy and act.fallbacks() == [fell], t   # for the rest of the episode
        obs, *_ = env.step(np.array([a]))
    (b,) = act.beliefs()
    if falls:
        assert fell is not None and fell <= 5 and len(b.actions) == fell   # not followed after the rejection
    else:
        assert fell is None and len(b.actions) == 24
    act(obs[0], 0)   # a new episode trusts its model again
    assert act.fallbacks() == [None]


def test_a_rejected_model_is_re_seeded_under_the_fallback_prior_and_planning_goes_on(cage2):
    """Under a prior of B_line alone with the fallback prior holding Meander too, a Meander episode's rejection
    widens the belief once (at the step it is rejected) and planning goes on on it: no fall back to greedy."""
    plan = dataclasses.replace(TINY, particles=256, red_agent="B_lineAgent",
                               fallback_prior="B_lineAgent:1,RedMeanderAgent:1")
    act = _act(cage2, plan, seed=3)
    env = NativeVectorEnv(1, T.RED_MEANDER, 100, seed=8)
    obs, _ = env.reset(seed=8)
    for t in range(25):
        obs, *_ = env.step(np.array([act(obs[0], t)]))
    (b,) = act.beliefs()
    (widened,) = act.widenings()
    assert widened is not None and widened <= 5 and act.fallbacks() == [None]
    assert len(b.actions) == 24 and b.red_posterior()[T.RED_MEANDER] > 0.99


def test_the_planner_prefers_what_its_rollouts_score_higher(cage2):
    """With red holding a privileged session on a host and the policy's candidates scored on that state, the
    chosen action is the candidate with the best mean return."""
    agent, wf = cage2
    planner = Planner(agent, wf, PlanConfig(particles=1, top_k=5, horizon=6, rollouts=8, min_gain=0.0), seed=0)
    env = NativeVectorEnv(1, T.RED_BLINE, 100, seed=1)
    obs, _ = env.reset(seed=1)
    mem = agent.memory.blank(1)
    for t in range(12):
        agent.memory.saw(mem, torch.as_tensor(obs))
        x = policy_input(torch.as_tensor(obs), torch.zeros(1, WORKFLOW_DIM), mem)
        d = planner.choose(env.sim_state(), env.buffers.access.copy(), np.ones(1), x, mem)
        assert d.action == d.candidates[int(np.argmax(d.returns))]
        assert d.candidates[0] == int(agent.logits(x).argmax())
        agent.memory.took(mem, torch.tensor([d.action]))
        obs, *_ = env.step(np.array([d.action]))


def test_rollouts_stop_at_the_episode_end(cage2, monkeypatch):
    """Told the episode's length L, the decision at step t rolls out min(horizon, L - t) steps, never past L; the
    steps of the agent's fixed opening (the shipped agent's: 3) are played, not planned: no rollout."""
    from workflow_rl.rl.planning import planner as planner_module

    counts, real_step = [], planner_module.sim.step

    def counting_step(state, actions, *a, **k):
        counts[-1] += len(actions) == TINY.top_k * TINY.rollouts   # a rollout's batch, not the belief's (16)
        return real_step(state, actions, *a, **k)

    monkeypatch.setattr(planner_module.sim, "step", counting_step)
    opening = len(cage2[0].opening)
    length = opening + 6
    act = _act(cage2, dataclasses.replace(TINY, fix_candidates=0), seed=1, episode_length=length)
    env = NativeVectorEnv(1, T.RED_MEANDER, 100, seed=8)
    obs, _ = env.reset(seed=8)
    for t in range(length):
        counts.append(0)
        a = act(obs[0], t)
        obs, *_ = env.step(np.array([a]))
    assert opening == 3 and counts == [0] * opening + [4, 4, 4, 3, 2, 1]   # horizon 4, then the steps left
    with pytest.raises(ValueError, match=f"t counts 0..{length - 1}"):
        act(obs[0], length)


def test_a_length_beyond_the_horizon_changes_nothing(cage2):
    """While the episode has at least ``horizon`` steps left, the planner told its length chooses bit for bit
    what the planner that is not told chooses (same seed); only the last horizon - 1 steps may differ."""
    unknown = _actions(_act(cage2, TINY, seed=5), steps=30)[0]
    assert np.array_equal(_actions(_act(cage2, TINY, seed=5, episode_length=100), steps=30)[0], unknown)
    short = _actions(_act(cage2, TINY, seed=5, episode_length=30), steps=30)[0]
    assert np.array_equal(short[:, :27], unknown[:, :27])   # t <= 26: 30 - t >= horizon 4


@pytest.mark.parametrize("length", [0, -3, 2.5, "100"])
def test_a_bad_episode_length_is_one_value_error(cage2, length):
    with pytest.raises(ValueError, match="episode_length must be"):
        _act(cage2, TINY, episode_length=length)


def test_evaluate_cells_plays_each_length_with_its_own_acting_function(cage2):
    """{length: act} plays each length's own episodes from the same seeds: for a policy that ignores the length
    (greedy), the cells of the one shared 100-step run."""
    from workflow_rl.rl.evaluate import evaluate_cells

    shared = evaluate_cells(_act(cage2), ["meander"], [5, 9], 6, batch=4)
    per_length = evaluate_cells({L: _act(cage2) for L in (5, 9)}, ["meander"], [5, 9], 6, batch=4)
    assert [(r.mean, r.std) for r in per_length] == [(r.mean, r.std) for r in shared]
    with pytest.raises(ValueError, match=r"no acting function for the episode length\(s\) \[9\]"):
        evaluate_cells({5: _act(cage2)}, ["meander"], [5, 9], 2)


def test_fix_candidates_are_the_fixes_the_belief_points_at():
    from workflow_rl.rl.planning.planner import fix_candidates

    access = np.zeros((4, T.N_HOSTS), np.int8)
    access[:, T.USER0] = 2                     # red's foothold: never a candidate
    access[:3, T.ENT1] = 1                     # user session, probability 3/4
    access[:2, T.OPS0] = 2                     # privileged, 1/2
    access[:1, T.USER2] = 1                    # 1/4: below a half
    got = fix_candidates(access, np.ones(4), 5)
    assert got == [T.A_REMOVE + T.ENT1, T.A_RESTORE + T.OPS0]
    assert fix_candidates(access, np.ones(4), 1) == [T.A_REMOVE + T.ENT1]


def test_analyse_candidates_are_the_hosts_the_belief_is_most_split_on():
    from workflow_rl.rl.planning.planner import analyse_candidates

    access = np.zeros((10, T.N_HOSTS), np.int8)
    access[:, T.USER0] = 2                     # red's foothold: never a candidate
    access[:5, T.ENT1] = 1                     # any access 1/2: most split
    access[:3, T.OPS0] = 2                     # 3/10
    access[:9, T.USER2] = 1                    # 9/10: above 0.8, sure enough
    access[:1, T.USER3] = 1                    # 1/10: below 0.2
    assert analyse_candidates(access, np.ones(10), 5) == [T.A_ANALYSE + T.ENT1, T.A_ANALYSE + T.OPS0]
    assert analyse_candidates(access, np.ones(10), 1) == [T.A_ANALYSE + T.ENT1]
    weights = np.ones(10)
    weights[:5] = 0.01                         # the particles holding ENT1 all but ruled out
    assert T.A_ANALYSE + T.ENT1 not in analyse_candidates(access, weights, 5)


def test_the_planner_scores_the_belief_s_fixes_beside_the_policy_s_choices(cage2):
    agent, wf = cage2
    planner = Planner(agent, wf, PlanConfig(particles=1, top_k=2, horizon=3, rollouts=2, fix_candidates=2), seed=0)
    env = NativeVectorEnv(1, T.RED_MEANDER, 100, seed=4)
    obs, info = env.reset(seed=4)
    mem, widened = agent.memory.blank(1), 0
    for t in range(25):
        agent.memory.saw(mem, torch.as_tensor(obs))
        x = policy_input(torch.as_tensor(obs), torch.zeros(1, WORKFLOW_DIM), mem)
        d = planner.choose(env.sim_state(), info["red_access"].copy(), np.ones(1), x, mem)
        assert len(d.candidates) == len(set(d.candidates.tolist())) <= 4
        widened += len(d.candidates) > 2
        agent.memory.took(mem, torch.tensor([d.action]))
        obs, _, _, _, info = env.step(np.array([d.action]))
    assert widened > 0   # red reached hosts the policy did not fix first: their fixes were scored too


def test_adaptive_rollouts_add_futures_only_to_undecided_candidates(cage2, monkeypatch):
    """``max_rollouts`` above ``rollouts``: after the first batch (every candidate x ``rollouts``), only the policy's
    choice and the still-undecided candidates get ``rollouts`` more each, never past ``max_rollouts`` per candidate;
    at or below ``rollouts`` it changes nothing (the same actions, bit for bit)."""
    from workflow_rl.rl.planning import planner as planner_module

    cfg = dataclasses.replace(TINY, horizon=10, fix_candidates=2)
    fixed = _actions(_act(cage2, cfg, seed=4), steps=30)[0]
    assert np.array_equal(_actions(_act(cage2, dataclasses.replace(cfg, max_rollouts=cfg.rollouts), seed=4),
                                   steps=30)[0], fixed)
    batches, real = [], planner_module.Planner.rollout

    def counting(self, state, first, *a, **k):
        batches[-1].append(np.unique(first, return_counts=True))
        return real(self, state, first, *a, **k)

    monkeypatch.setattr(planner_module.Planner, "rollout", counting)
    act = _act(cage2, dataclasses.replace(cfg, max_rollouts=4 * cfg.rollouts), seed=4)
    env = NativeVectorEnv(1, T.RED_MEANDER, 100, seed=8)
    obs, _ = env.reset(seed=8)
    extended = 0
    for t in range(30):
        batches.append([])
        obs, *_ = env.step(np.array([act(obs[0], t)]))
        if len(batches[-1]) > 1:
            extended += 1
            sizes = [len(c) for c, _ in batches[-1]]
            assert sizes[0] >= cfg.top_k and all(b <= a for a, b in zip(sizes, sizes[1:]))   # undecided shrink
            assert all((n == cfg.rollouts).all() for _, n in batches[-1])   # rollouts futures per row per batch
            assert len(batches[-1]) <= 4 and min(sizes[1:]) >= 2   # at most max_rollouts; the choice + >= 1
    assert extended > 0


@pytest.mark.slow   # 2 x 16 planned episodes of 100 steps
@pytest.mark.parametrize("red", [T.RED_BLINE, T.RED_MEANDER])
def test_planning_on_the_true_state_scores_at_least_the_default_policy(cage2, red):
    cfg = PlanConfig(particles=1, top_k=3, horizon=25, rollouts=8)
    greedy = _actions(_act(cage2), red, 16, 100, 77, batched=True)[1]
    planned = play_true_state(*cage2, cfg, red, episodes=16, steps=100, seed=77)
    diff = planned - greedy
    half = 1.96 * diff.std(ddof=1) / math.sqrt(len(diff))
    assert diff.mean() >= -half, (greedy.mean(), planned.mean(), half)


@pytest.mark.parametrize("flags,match", [(["--plan-particles", "0"], "--plan-particles must be"),
                                         (["--plan-top-k", "146"], "--plan-top-k must be"),
                                         (["--plan-horizon", "-1"], "--plan-horizon must be"),
                                         (["--plan-rollouts", "x"], "--plan-rollouts"),
                                         (["--plan-red-agent", "nobody"], "unknown red agent"),
                                         (["--plan-min-fit", "2"], "--plan-min-fit must be"),
                                         (["--lengths", "0"], "--lengths")])
def test_cli_bad_plan_settings_are_one_error_line(flags, match, capsys, tmp_path):
    rc, out, err = run_main(["evaluate", "pretrained:universal", "--workflow", "none", "--plan", *flags, "--out",
                             str(tmp_path / "o")], capsys)
    assert_one_error_line(rc, err, match)
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("args,match", [(["sleep", "--plan"], "--plan searches with an agent's own policy"),
                                       (["pretrained:universal", "--plan", "--workflow", "all"],
                                        "--plan evaluates one workflow at a time")])
def test_cli_plan_needs_an_agent_and_one_workflow(args, match, capsys):
    rc, _, err = run_main(["evaluate", *args], capsys)
    assert_one_error_line(rc, err, match)


def test_cli_evaluates_a_planned_mode_beside_greedy(capsys, tmp_path):
    rc, out, err = run_main(["evaluate", "pretrained:universal", "--workflow", "none", "--mode", "greedy", "--plan",
                              "--plan-particles", "8",
                         "--plan-rollouts", "2", "--plan-horizon", "2", "--episodes", "2", "--lengths", "4", "3",
                         "--red-agents", "B_lineAgent", "--out", str(tmp_path)], capsys)
    assert rc == 0, err
    import json

    rows = json.loads((tmp_path / "evaluation.json").read_text())["results"]
    assert [(r["mode"], r["length"]) for r in rows] == [("greedy", 3), ("greedy", 4), ("planned", 3), ("planned", 4)]
    assert all(r["episodes"] == 2 for r in rows)


def test_evaluate_does_not_tell_the_planner_the_length_unless_asked():
    """CAGE2's own loop tells an agent nothing: ``evaluate``'s planned mode plays one acting function for every
    length (the same numbers as ``make_act`` without ``episode_length``); ``plan_told_length`` is the option that
    tells it, reported as its own mode."""
    from workflow_rl.rl.evaluate import evaluate_cells
    from workflow_rl.runs.evaluate import EvaluateConfig, evaluate

    plan = PlanConfig(particles=8, rollouts=2, horizon=2)
    cfg = EvaluateConfig("pretrained:universal", workflow="none", red_agents=("B_lineAgent",), lengths=(3, 5),
                         episodes=2, mode="greedy", plan=plan, episode_seed=11)
    rows = evaluate(cfg).report["results"]
    assert [(r["mode"], r["length"]) for r in rows] == [("greedy", 3), ("greedy", 5), ("planned", 3), ("planned", 5)]
    agent, _ = pretrained.load("pretrained:universal")
    direct = evaluate_cells(make_act(agent, plan, 0, None), ["B_lineAgent"], [3, 5], 2, seed=11)
    assert [r["mean"] for r in rows[2:]] == [c.mean for c in direct]
    told = evaluate(dataclasses.replace(cfg, plan_told_length=True)).report["results"]
    assert [r["mode"] for r in told[2:]] == ["planned_told_length"] * 2


def test_under_a_workflow_the_choice_keeps_to_the_compliance_rule():
    agent, _ = pretrained.load("pretrained:universal")
    wf = Workflow.parse("D,OS,E,OH,U")
    planner = Planner(agent, wf, PlanConfig(particles=1, top_k=8, horizon=3, rollouts=4, min_gain=0.0), seed=0)
    env = NativeVectorEnv(1, T.RED_MEANDER, 100, seed=4)
    obs, info = env.reset(seed=4)
    mem, seen = agent.memory.blank(1), 0
    enc = torch.as_tensor(wf.encode()).reshape(1, -1)
    for t in range(30):
        agent.memory.saw(mem, torch.as_tensor(obs))
        x = policy_input(torch.as_tensor(obs), enc, mem)
        d = planner.choose(env.sim_state(), info["red_access"].copy(), np.ones(1), x, mem)
        chosen = int(np.flatnonzero(d.candidates == d.action)[0])
        if (d.violation <= 0.05).any():
            assert d.violation[chosen] <= 0.05
        seen += int((d.violation > 0).any())
        agent.memory.took(mem, torch.tensor([d.action]))
        obs, _, _, _, info = env.step(np.array([d.action]))
    assert seen > 0   # some step had a violating candidate to refuse


@pytest.mark.cyborg
@pytest.mark.slow   # real CybORG: a few seconds per red agent
@pytest.mark.parametrize("red", ["B_lineAgent", "RedMeanderAgent"])
def test_a_cyborg_harness_drives_the_planned_agent_step_by_step(red):
    """Real CybORG calls ``act(obs, t)`` with its own observations; the belief, native-engine states, reproduces
    every one of them exactly (the engine is an exact model of CybORG's observation) and finds the red agent."""
    from workflow_rl.envs.cyborg import CybORGEnv

    env = CybORGEnv(red, episode_length=100, seed=3)
    act = make_act("pretrained:universal", PlanConfig(particles=64, top_k=2, horizon=3, rollouts=2), seed=1)
    obs, _ = env.reset(seed=3)
    for t in range(25):
        a = act(obs, t)
        assert isinstance(a, int) and 0 <= a < T.N_ACTIONS
        obs, *_ = env.step(a)
        if t:
            (b,) = act.beliefs()
            assert b.distance.min() == 0 and b.reseeds == 0, t
    assert b.red_posterior()[attackers.kind_of(red)] > 0.99
    env.close()


@pytest.mark.slow   # imports and compiles (~15 s)
def test_the_planning_benchmark_runs_and_writes_its_result(tmp_path):
    import json

    from helpers import run_in_process

    root = REPO
    studies = root / "benchmarks" / "studies"
    r = run_in_process(["compare", "--episodes", "2", "--particles", "8", "--horizon", "2", "--rollouts", "2", "--out",
                        str(tmp_path)], script=studies / "planning.py", cwd=root)
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads((tmp_path / "compare_B_lineAgent_2.json").read_text())
    assert [c["length"] for c in res["cells"]] == [30, 50, 100] and len(res["planned_returns"]) == 2
    assert res["length_known"] and sorted(res["cell_returns"]["planned"], key=int) == ["30", "50", "100"]

    def bench(*args):
        return run_in_process([*args, "--episodes", "2", "--out", str(tmp_path)], script=studies / "planning.py",
                              cwd=root)

    same = str(tmp_path / "compare_B_lineAgent_2.json")
    assert bench("gap", "--files", same, same).returncode == 0
    gap = json.loads((tmp_path / "gap_B_lineAgent_2.json").read_text())
    assert [c["difference"][0] for c in gap["cells"]] == [0.0, 0.0, 0.0]
    assert bench("budget").returncode == 0
    assert "particles 8, horizon 2, rollouts 2" in (tmp_path / "budget.md").read_text()
    assert (tmp_path / "budget.png").stat().st_size > 0


def test_the_belief_steps_the_engine_the_planner_rolls_out(cage2):
    """``official_bugs=False`` reaches the belief as well as the rollouts: its particles and the planner's futures
    are one model (``PlanConfig.belief`` used to drop the setting, so the belief kept CybORG's bugs)."""
    assert PlanConfig().belief().official_bugs and not PlanConfig().belief(official_bugs=False).official_bugs
    env = NativeVectorEnv(2, T.RED_BLINE, 100, seed=3)
    obs, _ = env.reset(seed=3)
    for bugs in (True, False):
        act = _act(cage2, TINY, seed=1, official_bugs=bugs)
        act(obs, 0)
        assert [b.config.official_bugs for b in act.beliefs()] == [bugs, bugs]


@pytest.mark.parametrize("kwargs, error, match", [
    ({"name": None}, TypeError, "name=None: use a shipped agent's name"),
    ({"workflow": 5}, TypeError, "Workflow or its text"),
    ({"workflow": "X,Y"}, ValueError, "unknown unit type"),
    ({"seed": -1}, ValueError, "seed must be in"),
    ({"seed": 1.5}, ValueError, "seed must be an integer"),
    ({"greedy": "no"}, ValueError, "greedy must be True or False"),
    ({"plan": "yes"}, TypeError, "PlanConfig"),
    ({"generator": 3}, TypeError, "torch.Generator"),
])
def test_make_act_checks_its_arguments_at_the_call(kwargs, error, match):
    """Wrong arguments are one error naming the argument at the call, not an AttributeError or a torch TypeError
    from inside (make_act(name=None) and a workflow given as a string were)."""
    with pytest.raises(error, match=match):
        make_act(**{"name": "pretrained:universal", **kwargs})


def test_make_act_takes_a_workflow_as_text_and_a_numpy_seed():
    agent, _ = pretrained.load("pretrained:universal")
    obs = np.zeros(52, np.float32)
    as_text = make_act(agent, workflow="D,OS,E,OH,U", seed=np.int64(3))
    as_object = make_act(agent, workflow=Workflow.parse("D,OS,E,OH,U"), seed=3)
    assert [as_text(obs, t) for t in range(5)] == [as_object(obs, t) for t in range(5)]
