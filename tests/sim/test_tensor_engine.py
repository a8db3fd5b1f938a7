"""The torch tensor path (the GPU engine) is bit-identical to the compiled CPU kernel."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from workflow_rl import make_vector_env  # noqa: E402
from workflow_rl.policies import POLICIES  # noqa: E402
from workflow_rl.sim import native as N  # noqa: E402
from workflow_rl.sim import tables as T  # noqa: E402
from workflow_rl.sim import tensor as TT  # noqa: E402


def _assert_same_run(a, b, steps: int) -> None:
    """Two vector envs given the same random actions return identical observations, rewards, ends and access."""
    a.reset(), b.reset()
    rng = np.random.default_rng(0)
    for _ in range(steps):
        act = rng.integers(0, 145, a.num_envs)
        oa, ra, _, ta, ia = a.step(act)
        ob, rb, _, tb, ib = b.step(act)
        assert np.array_equal(oa, ob) and np.array_equal(ra, rb) and np.array_equal(ta, tb)
        assert np.array_equal(ia["red_access"], ib["red_access"])


@pytest.mark.parametrize("official_bugs", [True, False])
def test_tensor_step_equals_kernel_on_mixed_policies(official_bugs):
    """Every state field, observation, reward and access agree after each of 230 steps (two episodes and a
    truncation), for all red agents and a mix of random and scripted defenders."""
    n = 1800
    s, b = N.allocate_state(n), N.allocate_buffers(n)
    N.seed_state(s, 17, np.array([T.RED_BLINE, T.RED_MEANDER, T.RED_SLEEP])[np.arange(n) % 3])
    N.reset_envs(s, b)
    ts = TT.to_tensors(s)
    rng = np.random.default_rng(1)
    policies = list(POLICIES.values())
    obs = b.obs.copy()
    for t in range(230):
        acts = np.stack([p(t % 100, obs, rng) for p in policies])          # (6, n)
        a = acts[np.arange(n) % 6, np.arange(n)].astype(np.int64)
        N.step(s, a, b, 100, official_bugs)
        o, r, tr, acc, fo, fa = TT.step(ts, torch.from_numpy(a), 100, official_bugs)
        assert np.array_equal(o.numpy(), b.obs) and np.array_equal(r.numpy(), b.reward)
        assert np.array_equal(tr.numpy(), b.truncated) and np.array_equal(acc.numpy(), b.access)
        if b.truncated.any():
            assert np.array_equal(fo.numpy()[b.truncated], b.final_obs[b.truncated])
        s2 = TT.to_numpy(ts)
        for name, x, y in zip(N.SimState._fields, s, s2):
            assert np.array_equal(x, y), f"step {t}: state field {name} differs"
        obs = b.obs.copy()


def test_uniform_draws_match():
    keys = N.env_keys(3, 64)
    ts = torch.from_numpy(keys.view(np.int64).copy())
    ep = torch.arange(64, dtype=torch.int64)
    t = torch.full((64,), 7, dtype=torch.int32)
    got = TT.uniform(ts, ep, t, 2).numpy()
    want = np.array([N._uniform(keys[i], np.int64(i), np.int32(7), 2) for i in range(64)])
    assert np.array_equal(got, want)
    assert ((got >= 0) & (got < 1)).all()


def test_torch_backend_vector_env_matches_numba_backend():
    _assert_same_run(make_vector_env(64, "meander", seed=2), make_vector_env(64, "meander", seed=2, backend="torch"),
                     steps=120)


def test_unavailable_gpu_is_a_clear_error():
    if torch.cuda.is_available():
        pytest.skip("a CUDA GPU is present: the error path cannot be exercised")
    with pytest.raises(ValueError, match="no CUDA GPU"):
        make_vector_env(4, device="cuda")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU on this machine")
def test_cuda_tensor_path_equals_cpu_kernel():
    _assert_same_run(make_vector_env(4096, "bline", seed=4), make_vector_env(4096, "bline", seed=4, device="cuda"),
                     steps=150)
