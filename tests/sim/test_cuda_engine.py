"""The CUDA engine is the CPU kernel's rules compiled for the GPU, and gives the same results bit for bit.

Without a GPU the CUDA kernel runs under numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``, which must be set
before ``numba.cuda`` is first imported): each check runs in a subprocess, so the simulator never replaces the real
``numba.cuda`` in this process (nor the other way round on a machine with a GPU).
"""
import os
import subprocess
import sys

import numpy as np
import pytest

from workflow_rl import make_vector_env
from workflow_rl.sim import native as N
from workflow_rl.sim import rules
from helpers import REPO

ROOT = REPO

_LOCKSTEP = """
import sys, warnings
warnings.filterwarnings("ignore", "overflow encountered", RuntimeWarning)  # uint64 hashing in plain Python wraps
from workflow_rl.policies import POLICIES
from workflow_rl.sim import cuda as C
assert "simulator" in type(C.kernel()).__module__, type(C.kernel())
print(C.lockstep_mismatch(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "True", list(POLICIES.values()),
                          seed=3, episode_length=int(sys.argv[4]), threads_per_block=8,
                          layout=sys.argv[5] if len(sys.argv) > 5 else "C"))
"""


def _simulated(code: str, *args) -> subprocess.CompletedProcess:
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1"}
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=600)


@pytest.mark.parametrize("official_bugs", [True, False])
def test_cudasim_kernel_equals_cpu_kernel_every_output_and_state_field(official_bugs):
    """21 envs (B_line, Meander and Sleep red agents x the six scripted and random defenders) for 130 steps with
    60-step episodes (two truncations and autoresets): obs, reward, truncated, access, final_obs, final_access and
    every state field agree after every step."""
    pytest.importorskip("workflow_rl.sim.cuda", reason="numba-cuda is not installed (pip install -e '.[dev]')")
    r = _simulated(_LOCKSTEP, 21, 130, official_bugs, 60)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip() == "None", r.stdout


def test_cudasim_kernel_in_host_major_layout_equals_cpu_kernel():
    """The GPU arrays in Fortran (host-major) order: the same kernel source, indexed the same way, gives the same
    outputs and state as the CPU kernel's C-order arrays (to_device/to_host convert; every field compared)."""
    pytest.importorskip("workflow_rl.sim.cuda", reason="numba-cuda is not installed (pip install -e '.[dev]')")
    r = _simulated(_LOCKSTEP, 21, 70, True, 60, "F")
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip() == "None", r.stdout


def test_cudasim_host_major_layout_really_is_fortran_order():
    pytest.importorskip("workflow_rl.sim.cuda", reason="numba-cuda is not installed (pip install -e '.[dev]')")
    code = """
from workflow_rl.sim import cuda as C, native as N
s = N.allocate_state(5)
d = C.to_device(s, layout="F")
two = [(a, b) for a, b in zip(s, d) if a.ndim == 2]
assert two and all(b.strides == (a.itemsize, a.itemsize * a.shape[0]) for a, b in two), [b.strides for a, b in two]
back = C.to_host(d)
assert all(x.flags.c_contiguous for x in back)
try:
    C.to_device(s, layout="K")
except ValueError as e:
    print("refused:", e)
"""
    r = _simulated(code)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "refused: gpu_layout must be one of C, F" in r.stdout


def test_cudasim_kernel_equals_cpu_kernel_with_a_red_mixture():
    """Every env draws its red agent per episode from a mixture (sleep/B_line/Meander 0.2/0.4/0.4), inside the
    kernel at each autoreset: the CUDA kernel draws the same agents (state field red_kind) and gives the same
    outputs as the CPU kernel, and the agents drawn do change between episodes."""
    pytest.importorskip("workflow_rl.sim.cuda", reason="numba-cuda is not installed (pip install -e '.[dev]')")
    mixed = _LOCKSTEP.replace("print(", """import numpy as np
from workflow_rl.sim import native as N
_seed = N.seed_state
from workflow_rl.sim import attackers
odds = np.zeros(attackers.n_kinds())
odds[:3] = 0.2, 0.4, 0.4
N.seed_state = lambda s, seed, red: _seed(s, seed, odds)
_reset = N.reset_envs
kinds = []
def reset_and_record(s, b, *a):
    _reset(s, b, *a)
    kinds.append(s.red_kind.copy())
N.reset_envs = reset_and_record
_step = N.step
def step_and_record(s, a, b, length, bugs):
    _step(s, a, b, length, bugs)
    if b.truncated.any():
        kinds.append(s.red_kind.copy())
N.step = step_and_record
print(""", 1) + "print(len(kinds), int(sum((k != kinds[0]).sum() for k in kinds)), len(np.unique(np.concatenate(kinds))))\n"
    r = _simulated(mixed, 21, 130, True, 60)
    assert r.returncode == 0, r.stderr[-3000:]
    first, counts = r.stdout.strip().splitlines()
    assert first == "None", r.stdout
    n_resets, changed, n_kinds = map(int, counts.split())
    assert n_resets == 3 and changed > 0 and n_kinds == 3, counts


def test_cudasim_lockstep_catches_a_difference():
    """The comparison can fail: a CUDA kernel stepped with the other bug setting diverges from the CPU kernel."""
    pytest.importorskip("workflow_rl.sim.cuda", reason="numba-cuda is not installed (pip install -e '.[dev]')")
    flipped = _LOCKSTEP.replace("print(", """_step = C.step
C.step = lambda s, a, b, length, bugs, **k: _step(s, a, b, length, not bugs, **k)
print(""", 1)
    r = _simulated(flipped, 21, 130, True, 60)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.startswith("step "), r.stdout


def test_cpu_kernel_is_compiled_from_the_shared_rules():
    """Every rule the CPU kernel runs is the code object written in sim/rules.py (the CUDA build uses the same)."""
    for f in rules.RULES:
        assert N.kernels().rules[f.__name__].py_func.__code__ is f.__code__, f.__name__


def test_rewards_are_tenths_rounded_once():
    """The reward table holds -r/10 correctly rounded to float32 for every reachable penalty r, up to a Restore on
    top of every host's confidentiality and the Impact penalty."""
    r = np.arange(len(rules.REWARD_OF_TENTHS))
    assert rules.REWARD_OF_TENTHS.dtype == np.float32
    assert np.array_equal(rules.REWARD_OF_TENTHS, (-r / 10).astype(np.float32))
    assert rules.REWARD_OF_TENTHS[-1] == np.float32(-15.8)


@pytest.mark.slow
def test_cuda_kernel_compiles_to_ptx():
    """Where NVIDIA's NVVM and NVRTC libraries are installed (``pip install 'numba-cuda[cu13]'``), the real CUDA
    kernel (not the simulator) types and compiles for sm_90, no GPU needed."""
    pytest.importorskip("workflow_rl.sim.cuda", reason="numba-cuda is not installed")
    code = """
import numba, numpy as np
from numba import cuda
try:
    from cuda.pathfinder import load_nvidia_dynamic_lib
    for lib in ("nvvm", "nvrtc"):
        load_nvidia_dynamic_lib(lib)
except Exception as e:
    print("no NVVM:", type(e).__name__); raise SystemExit
from workflow_rl.sim import cuda as C, native as N, rules
s, b = N.allocate_state(2), N.allocate_buffers(2)
ports, trapped = rules.kernel_tables(True)
sig = tuple(numba.typeof(x) for x in (s, np.zeros(2, np.int64))) + (numba.int32, numba.boolean) + tuple(
    numba.typeof(x) for x in (ports, trapped, b))
ptx, _ = cuda.compile_ptx(C.kernel().py_func, sig, device=False, cc=(9, 0))
print("ptx", len(ptx))
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    if r.stdout.startswith("no NVVM"):
        pytest.skip(r.stdout.strip())
    assert r.stdout.startswith("ptx") and int(r.stdout.split()[1]) > 10_000


torch = pytest.importorskip("torch")


def test_cuda_without_a_gpu_is_a_clear_error():
    if torch.cuda.is_available():
        pytest.skip("a CUDA GPU is present: the error path cannot be exercised")
    with pytest.raises(ValueError, match="no CUDA GPU"):
        make_vector_env(4, device="cuda")


@pytest.mark.parametrize("kwargs,match", [
    (dict(device="mps"), "device='cpu' or 'cuda'"),
    (dict(backend="torch"), "removed"),
    (dict(compile=True), "drop compile"),
    (dict(gpu_layout="F"), "use it with device='cuda'"),
])
def test_removed_or_unsupported_native_options(kwargs, match):
    """(gpu_layout on the CPU engine: refused, not silently ignored.)"""
    with pytest.raises(ValueError, match=match):
        make_vector_env(4, **kwargs)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU on this machine")
@pytest.mark.parametrize("layout", ["C", "F"])
def test_cuda_env_equals_cpu_env_and_snapshots_round_trip(layout):
    from workflow_rl.rl.envstep import TorchStepper

    n = 4096
    a, b = make_vector_env(n, "bline", seed=4), make_vector_env(n, "bline", seed=4, device="cuda", gpu_layout=layout)
    a.reset(), b.reset()
    rng = np.random.default_rng(0)
    for _ in range(150):
        act = rng.integers(0, 145, n)
        oa, ra, _, ta, ia = a.step(act)
        ob, rb, _, tb, ib = b.step(act)
        assert np.array_equal(oa, ob) and np.array_equal(ra, rb) and np.array_equal(ta, tb)
        assert np.array_equal(ia["red_access"], ib["red_access"])
    stepper = TorchStepper(b, "cuda")
    saved = stepper.get_state()
    out = stepper.step(torch.zeros(n, dtype=torch.int64, device="cuda"))
    assert out.obs.is_cuda and out.reward.dtype == torch.float32
    first = out.obs.clone()
    assert stepper.set_state(saved)
    assert torch.equal(stepper.step(torch.zeros(n, dtype=torch.int64, device="cuda")).obs, first)
