"""The planner's rollouts on the CUDA engine (``PlanConfig.device='cuda'``) choose as on the CPU.

Without a GPU the CUDA kernel runs under numba's CUDA simulator (set before ``numba.cuda`` is first imported), so
the check runs in a subprocess; torch has no GPU there, so the policy stays on the CPU and only the engine is the
CUDA build: the returns are equal bit for bit. On a machine with a GPU the same check runs there, the policy on the
GPU too, whose float rounding may differ in the last bits: the same decisions, returns equal to 1e-4.
"""
import os
import subprocess
import sys

import pytest
import torch

from helpers import REPO

_SAME_CHOICES = """
import warnings
warnings.filterwarnings("ignore", "overflow encountered", RuntimeWarning)   # uint64 hashing in plain Python wraps
import sys
import numpy as np
import torch
from workflow_rl import make_vector_env
from workflow_rl.rl import pretrained
from workflow_rl.rl.planning.belief import ParticleBelief
from workflow_rl.rl.planning.planner import PlanConfig, Planner

simulated = sys.argv[1] == "1"
if simulated:
    from workflow_rl.sim import cuda as C
    assert "simulator" in type(C.kernel()).__module__, type(C.kernel())
agent, _ = pretrained.load("pretrained:universal")
# on a GPU the policy (and the critic) compute there, in cuBLAS's order of additions: returns equal to rounding
tiny = dict(particles=32, top_k=3, fix_candidates=2, horizon=5, rollouts=3, value_scale=0.1 if simulated else 0.0)
same = np.array_equal if simulated else (lambda a, b: np.allclose(a, b, rtol=0, atol=1e-4))
plans = {d: PlanConfig(**tiny, device=d) for d in ("cpu", "cuda")}
planners = {d: Planner(agent, None, plan, seed=7) for d, plan in plans.items()}
assert planners["cuda"].rollout_actor.device.type == ("cpu" if simulated else "cuda")
actor = planners["cpu"].actor
searched = 0
for red in ("B_lineAgent", "RedMeanderAgent"):
    env = make_vector_env(1, red, episode_length=8, seed=11)
    obs, _ = env.reset(seed=11)
    belief, mem, last = ParticleBelief(plans["cpu"].belief(), 5), actor.reset(1), None
    for t in range(8):
        o = torch.as_tensor(np.asarray(obs[:1]), dtype=torch.float32)
        if t:
            belief.update(last, o[0].numpy())
        x = actor.inputs(o, mem)
        d = {k: p.choose(belief.state, belief.access, belief.weights, x, mem, stream=(t,)) for k, p in planners.items()}
        assert np.array_equal(d["cpu"].candidates, d["cuda"].candidates), (t, d)
        assert same(d["cpu"].returns, d["cuda"].returns), (t, d["cpu"].returns, d["cuda"].returns)
        assert d["cpu"].action == d["cuda"].action, (t, d)
        searched += int(np.ptp(d["cpu"].returns) > 0)
        last = d["cpu"].action
        actor.took(mem, torch.tensor([last]))
        obs, *_ = env.step(np.array([last]))
assert searched >= 4, searched   # the candidates' returns differed: the rollouts compared something
print("same choices", searched)
"""


def _run(simulated: bool) -> subprocess.CompletedProcess:
    env = {**os.environ, **({"NUMBA_ENABLE_CUDASIM": "1"} if simulated else {})}
    return subprocess.run([sys.executable, "-c", _SAME_CHOICES, "1" if simulated else "0"], capture_output=True,
                          text=True, cwd=REPO, env=env, timeout=900)


@pytest.mark.slow
def test_cuda_rollouts_choose_as_cpu_rollouts_under_the_simulator():
    r = _run(simulated=True)
    assert r.returncode == 0 and "same choices" in r.stdout, r.stderr[-3000:]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU on this machine")
def test_cuda_rollouts_choose_as_cpu_rollouts_on_the_gpu():
    r = _run(simulated=False)
    assert r.returncode == 0 and "same choices" in r.stdout, r.stderr[-3000:]


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_plan_device_cuda_without_a_gpu_is_one_error_line(capsys):
    from helpers import assert_one_error_line, run_main

    rc, _, err = run_main(["evaluate", "sleep", "--plan", "--plan-device", "cuda", "--episodes", "1"], capsys)
    assert_one_error_line(rc, err, "--plan-device cuda: no CUDA GPU here")
