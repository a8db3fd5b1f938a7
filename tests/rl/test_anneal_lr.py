"""--anneal-lr: Adam's step size decays linearly to 0 over the episode budget (issue I's recipe flag)."""
import pytest

from workflow_rl.rl.config import TrainConfig
from workflow_rl.rl.ppo import PPOConfig
from workflow_rl.rl.schedule import learning_rate


def test_constant_unless_annealed():
    cfg = TrainConfig(ppo=PPOConfig(learning_rate=1e-3))
    assert learning_rate(cfg, [0.0]) == learning_rate(cfg, [0.7]) == 1e-3


@pytest.mark.parametrize("spent,expected", [([0.0], 1e-3), ([0.25], 7.5e-4), ([1.0], 0.0), ([0.2, 0.6], 6e-4),
                                            ([1.5], 0.0)])
def test_linear_in_the_mean_fraction_spent(spent, expected):
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
        seen.append(t.batch.opt.lr)
        return out

    t.batch.update = record
    t.run()
    assert seen == pytest.approx([1e-3, 7.5e-4, 5e-4, 2.5e-4])
