"""The torch-facing step interface: engine snapshots, including snapshots an older version wrote."""
import numpy as np
import torch

from workflow_rl import make_vector_env
from workflow_rl.rl.envstep import TorchStepper


def _run(stepper, actions):
    return [stepper.step(a).reward.clone() for a in actions]


def test_a_snapshot_without_a_newer_field_resumes_like_a_full_one():
    """A checkpoint written before a SimState field existed (here red_cdf, the red mixture) still resumes: the
    missing field keeps the value the run's own settings gave the engine, and the trajectory is the same."""
    actions = [torch.as_tensor(np.random.default_rng(t).integers(0, 145, 8)) for t in range(40)]
    a = TorchStepper(make_vector_env(8, "bline", seed=3))
    a.reset(seed=3)
    _run(a, actions[:10])
    full = a.get_state()
    old = {k: v for k, v in full.items() if k != "red_cdf"}
    b = TorchStepper(make_vector_env(8, "bline", seed=99))
    b.reset(seed=99)
    assert b.set_state(old)
    ref = _run(a, actions[10:])
    got = _run(b, actions[10:])
    assert all(torch.equal(x, y) for x, y in zip(ref, got))
