"""The CAGE2 protocol's cells from one episode per red agent (running returns at each length), rounds, deadline."""
import time

import numpy as np
import pytest

from workflow_rl.rl.evaluate import evaluate_cells, evaluate_policy, greedy_workflow_act, scripted_act
from workflow_rl.workflow import Workflow

WF = Workflow.parse("critical_first")


def test_each_length_is_the_prefix_of_the_longest_episode_bit_for_bit():
    """On the native engine a cell's episodes are exactly the separate L-step episodes of the same seeds: the
    streams do not depend on the episode length, and the agent does not see it."""
    act = greedy_workflow_act(WF)
    cells = evaluate_cells(act, ["bline", "meander"], [30, 50, 100], 150, workflow=WF, batch=64)
    assert [(c.red_agent, c.length) for c in cells] == [(r, n) for r in ("B_lineAgent", "RedMeanderAgent")
                                                       for n in (30, 50, 100)]
    for c in cells:
        alone = evaluate_policy(act, c.red_agent, c.length, 150, workflow=WF, batch=64)
        assert (c.episodes, c.mean, c.std, c.compliance, c.fixes) == (
            alone.episodes, alone.mean, alone.std, alone.compliance, alone.fixes)
    assert cells[0].mean > cells[1].mean > cells[2].mean     # running returns only fall


def test_a_passed_deadline_stops_after_the_first_round():
    cells = evaluate_cells(scripted_act("sleep"), ["bline", "meander"], [10], 500, batch=40,
                           deadline=time.monotonic() - 1)
    assert [c.episodes for c in cells] == [40, 40]
    full = evaluate_cells(scripted_act("sleep"), ["bline", "meander"], [10], 100, batch=40)
    assert [c.episodes for c in full] == [100, 100]


@pytest.mark.cyborg
def test_on_real_cyborg_the_prefix_cells_equal_separate_runs():
    act = scripted_act("sleep")
    cells = evaluate_cells(act, ["bline"], [6, 12], 3, engine="cyborg", workers=2, vectorization="shared_memory")
    alone = evaluate_policy(act, "bline", 6, 3, engine="cyborg", vectorization="shared_memory", batch=2)
    assert cells[0].episodes == cells[1].episodes == 3
    assert np.isclose(cells[0].mean, alone.mean) and np.isclose(cells[0].std, alone.std)
    assert cells[1].mean < cells[0].mean
