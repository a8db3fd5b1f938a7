"""An evaluation's parts (one red agent's share of one round) played one at a time, each by a fresh acting function
brought past the parts before it without playing them (``skip_part``), give what ``evaluate_cells`` gives: the
ground a distributed evaluation (``evaluate --ray``) stands on, checked here for every acting function that carries
something from episode to episode (a sampled agent's generator, the planner's episode counts) and those that carry
nothing."""
import numpy as np
import pytest
import torch

from workflow_rl.envs.factory import make_vector_env
from workflow_rl.rl.evaluate import (can_skip, evaluate_cells, gather_cells, greedy_workflow_act, play_part,
                                     round_parts, scripted_act, skip_part)
from workflow_rl.rl.interface import interface_act
from workflow_rl.workflow import Workflow

WF = Workflow.parse("D,OS,E,OH,U")
REDS, LENGTHS, EPISODES, N, SEED = ["B_lineAgent", "RedMeanderAgent"], [4, 10], 7, 3, 11


def _agent():
    """An untrained agent: near-uniform logits, so a sampled act's draws show in every episode."""
    from workflow_rl.rl.ppo import Agent

    torch.manual_seed(0)
    return Agent((32,))


def _makers():
    """Fresh acting functions of each kind, by name (called once per part: none is shared between parts)."""
    from workflow_rl.rl.planning.planner import PlanConfig, make_act

    agent = _agent()
    plan = PlanConfig(particles=32, rollouts=4, horizon=4, top_k=6, fix_candidates=2)   # choices the draws move
    return {
        "sampled": lambda: make_act(agent, greedy=False, generator=torch.Generator().manual_seed(5)),
        "greedy": lambda: make_act(agent),
        "random": lambda: scripted_act("random", 5),
        "greedy_workflow": lambda: greedy_workflow_act(WF),
        "planned": lambda: make_act(agent, plan, 5),
        "planned_told_length": lambda: {L: make_act(agent, plan, 5, episode_length=L) for L in LENGTHS},
    }


@pytest.mark.parametrize("kind", list(_makers()))
def test_parts_played_apart_after_skips_are_the_evaluation(kind):
    make = _makers()[kind]
    whole = evaluate_cells(make(), REDS, LENGTHS, EPISODES, seed=SEED, workflow=WF, batch=N)
    parts = round_parts(REDS, EPISODES, N)
    assert [(p.round, p.red_agent, p.take) for p in parts][-2:] == [(2, "B_lineAgent", 1), (2, "RedMeanderAgent", 1)]
    played = []
    for k, part in enumerate(parts):   # each part on its own: fresh envs, a fresh act skipped past the ones before
        act = make()
        assert can_skip(act)
        for _ in range(k):
            skip_part(act, N, LENGTHS)
        env = make_vector_env(N, part.red_agent, episode_length=max(LENGTHS), seed=SEED)
        try:
            played.append((part, play_part(env, act, SEED, part, LENGTHS, WF, "cpu")))
        finally:
            env.close()
    apart = gather_cells(REDS, LENGTHS, SEED, N, played, True)
    for a, b in zip(whole, apart):
        assert (a.red_agent, a.length, a.episodes) == (b.red_agent, b.length, b.episodes)
        for x, y in zip((a.played.returns, a.played.compliant, a.played.violating),
                        (b.played.returns, b.played.compliant, b.played.violating)):
            np.testing.assert_array_equal(x, y)
    if kind in ("sampled", "planned"):   # and the skips matter: without them the parts differ
        fresh = []
        for part in parts:
            env = make_vector_env(N, part.red_agent, episode_length=max(LENGTHS), seed=SEED)
            fresh.append((part, play_part(env, make(), SEED, part, LENGTHS, WF, "cpu")))
            env.close()
        unskipped = gather_cells(REDS, LENGTHS, SEED, N, fresh, True)
        assert any(not np.array_equal(a.played.returns, b.played.returns) for a, b in zip(whole, unskipped))


def test_an_agent_class_cannot_skip():
    assert not can_skip(interface_act(lambda: None))
    assert can_skip(scripted_act("sleep")) and can_skip({5: scripted_act("sleep")})
