"""rl.behaviour: a defender's actions and the parts of its return, on the episodes an evaluation plays."""
import numpy as np
import pytest

from workflow_rl.rl import behaviour as B
from workflow_rl.rl.evaluate import evaluate_policy, scripted_act
from workflow_rl.sim import tables as T


@pytest.mark.parametrize("baseline", ["restore_compromised", "random"])
def test_a_profile_plays_the_evaluations_episodes_round_by_round(baseline):
    # 7 episodes in rounds of 3: three rounds, the last cut, as evaluate_cells plays them
    p = B.profile(scripted_act(baseline), "Meander", episodes=7, length=30, batch=3)
    e = evaluate_policy(scripted_act(baseline), "Meander", length=30, episodes=7, batch=3)
    assert p.episodes == 7
    np.testing.assert_array_equal(p.returns, e.played.returns)


def test_the_parts_sum_to_the_return_and_each_is_what_it_names():
    p = B.profile(scripted_act("restore_compromised"), "B_line", episodes=20, length=50)
    parts = p.parts()
    np.testing.assert_allclose(sum(parts.values()), p.returns, atol=1e-6)
    np.testing.assert_array_equal(parts["restore"], -p.actions[:, T.A_RESTORE:].sum(1))
    assert (parts["restore"] < 0).any() and (parts["access"] < 0).any()
    kinds = p.kinds()
    assert (kinds.sum(1) == 50).all()
    # restore_compromised restores a host once its observation flags red there: hardly ever a clean one (counted on
    # the access after blue's action instead, every one of its Restores would be clean)
    assert (p.clean_restores <= -parts["restore"]).all()
    assert p.clean_restores.sum() < -parts["restore"].sum() / 10
    np.testing.assert_array_equal(kinds[:, B.KINDS.index("Restore")], p.by_host("Restore").sum(1))


def test_a_sleeping_defender_loses_to_access_and_impact_only():
    p = B.profile(scripted_act("sleep"), "B_line", episodes=10, length=100)
    parts = p.parts()
    assert (p.kinds()[:, 0] == 100).all()
    assert (parts["restore"] == 0).all()
    # Impact: -10 a step with OTService down, whole tenths; B_line reaches it within 100 steps unopposed
    tenths = np.rint(parts["impact"] * 10).astype(int)
    assert (tenths % 100 == 0).all() and (tenths < 0).all()
    assert (p.held[:, T.OPS0] > 0).all()
    s = B.summary(p)
    assert s["episodes"] == 10 and s["kinds"]["Sleep"]["mean"] == 100
    assert s["red_held"]["Op_Server0"] == pytest.approx(p.held[:, T.OPS0].mean(), abs=1e-3)


def test_action_kinds_follow_the_action_table():
    assert [B.KINDS[B.action_kind(a)] for a in (0, 1, T.A_ANALYSE, T.A_REMOVE + 3, T.A_DECOY + 50, 144)] == \
        ["Sleep", "Monitor", "Analyse", "Remove", "Decoy", "Restore"]
    with pytest.raises(ValueError, match="kind must be one of"):
        B.profile(scripted_act("sleep"), "B_line", episodes=1, length=1).by_host("Sleep")


def test_repeated_decoys_count_each_placement_after_the_first():
    actions = np.zeros((2, T.N_ACTIONS), np.int32)
    actions[0, T.A_DECOY] = 3          # one decoy placed three times: two repeats
    actions[0, T.A_DECOY + 1] = 1      # another, once
    actions[1, T.A_RESTORE] = 4        # Restores are not decoys
    p = B.Profile("B_lineAgent", 10, 0, np.zeros(2), actions, np.zeros((2, T.N_HOSTS), np.int32), np.zeros(2))
    np.testing.assert_array_equal(p.repeated_decoys(), [2, 0])


def test_restoring_a_host_red_never_reaches_is_a_clean_restore_every_time():
    class RestoreOpHost:   # Op_Host2: B_line goes for Op_Server0 and never touches it
        def __call__(self, obs, t):
            import torch
            return torch.full((len(obs),), T.A_RESTORE + T.OPH2)
    p = B.profile(RestoreOpHost(), "B_line", episodes=4, length=20)
    np.testing.assert_array_equal(p.clean_restores, [20] * 4)
    np.testing.assert_array_equal(p.by_host("Restore")[:, T.OPH2], [20] * 4)


def test_returns_that_are_not_cage2_parts_are_refused_and_one_episode_has_a_zero_interval():
    actions = np.zeros((1, T.N_ACTIONS), np.int32)
    actions[0, 0] = 10
    held = np.zeros((1, T.N_HOSTS), np.int32)
    bad = B.Profile("B_lineAgent", 10, 0, np.array([-0.5]), actions, held, np.zeros(1, np.int32))
    with pytest.raises(ValueError, match="not Restores, access and Impact alone"):
        bad.parts()
    one = B.summary(B.profile(scripted_act("sleep"), "B_line", episodes=1, length=5))
    assert one["return"]["ci95"] == 0.0
