"""--anneal-lr: Adam's step size decays linearly to 0 over the episode budget (issue I's recipe flag)."""
import pytest

from workflow_rl.rl.config import TrainConfig
from workflow_rl.rl.ppo import PPOConfig
from workflow_rl.rl.schedule import learning_rate


def test_constant_unless_annealed():
    cfg = TrainConfig(ppo=PPOConfig(learning_rate=1e-3))
    assert learning_rate(cfg, 0.0) == learning_rate(cfg, 0.7) == 1e-3


@pytest.mark.parametrize("spent,expected", [(0.0, 1e-3), (0.25, 7.5e-4), (1.0, 0.0), (1.5, 0.0)])
def test_linear_in_the_fraction_spent(spent, expected):
    cfg = TrainConfig(anneal_lr=True, ppo=PPOConfig(learning_rate=1e-3))
    assert learning_rate(cfg, spent) == pytest.approx(expected)


def test_the_trainer_steps_with_the_annealed_rate(tmp_path):
    from workflow_rl.rl.trainer import Trainer

    cfg = TrainConfig(workflow=None, red_agent="mix", n_envs=4, episode_length=20, update_every_steps=20,
                      num_episodes=16, max_episodes=10, anneal_lr=True, ppo=PPOConfig(learning_rate=1e-3))
    t = Trainer(cfg, tmp_path, progress=False)
    seen = []
    update = t.batch.update

    def record(steps, active):
        out = update(steps, active)
        seen.append(t.batch.opt.lr(0))
        return out

    t.batch.update = record
    t.run()
    assert seen == pytest.approx([1e-3, 7.5e-4, 5e-4, 2.5e-4])


def test_each_run_of_a_batch_follows_its_own_schedule(tmp_path):
    """Two seeds with different budgets in one batch: each member's step size is its own run's (a search's workflows
    are at different stages), and Adam steps each member with its own."""
    import numpy as np

    from workflow_rl.rl.trainer import BatchedTrainer

    base = TrainConfig(n_envs=4, episode_length=20, update_every_steps=20, anneal_lr=True,
                       ppo=PPOConfig(learning_rate=1e-3))
    bt = BatchedTrainer(base, 2)
    for k, budget in enumerate((8, 16)):
        bt.start(k, TrainConfig.from_flat({**base.flat(), "workflow": "D,E,OS,OH,U", "num_episodes": budget}),
                 tmp_path / str(k))
    bt.update(20, np.array([4, 4]))           # each spent 4 episodes: 1/2 and 1/4 of its budget
    bt.update(20, np.array([4, 4]))
    assert (bt.opt.lr(0), bt.opt.lr(1)) == pytest.approx((5e-4, 7.5e-4))
    assert bt.opt.member_state(bt.agents, 1)["param_groups"][0]["lr"] == pytest.approx(7.5e-4)
