"""Attackers are declared once, in ``sim.attackers``: a toy attacker registered here (its rules in its own module,
``toy_attacker.py``, and one entry) plays through ``make_vector_env``, mixtures, the planner's belief and
``evaluate``, and the built-in attackers play as before beside it. The docs/extending.md recipe, tested."""
import json

import numpy as np
import pytest

import toy_attacker
from helpers import run_main
from workflow_rl import RED_AGENTS, make_vector_env, parse_red_agent
from workflow_rl.envs.names import DEFAULT_MIX, red_weights
from workflow_rl.sim import attackers
from workflow_rl.sim import native as N
from workflow_rl.sim import tables as T

pytestmark = pytest.mark.slow   # the toy registry's kernels compile once per clone (about 40 s), then load
BUILT_IN = attackers.n_kinds()   # CAGE2's three and the family (sim/family.py), before the toy
BUILT_IN_FINGERPRINT = attackers.fingerprint()


def _returns(red: str, n: int = 32, steps: int = 60, seed: int = 5, action: int = 0):
    env = make_vector_env(n, red, seed=seed)
    env.reset(seed=seed)
    total, kinds, red_kinds = np.zeros(n), set(), set()
    for _ in range(steps):
        _, r, _, _, info = env.step(np.full(n, action, np.int64))
        total += r
        kinds |= set(np.unique(info["red_action"][:, 0]).tolist())
        red_kinds |= set(np.unique(env.state.red_kind).tolist())
    env.close()
    return total, kinds, red_kinds


@pytest.fixture(scope="module")
def toy():
    before = _returns("bline")[0]
    entry = toy_attacker.register()
    yield entry
    attackers.unregister(entry.name)
    # the built-in registry again, and B_line plays exactly as it did before the toy existed
    assert attackers.fingerprint() == BUILT_IN_FINGERPRINT and attackers.n_kinds() == BUILT_IN
    assert np.array_equal(_returns("bline")[0], before)


def test_the_built_in_registry_is_what_every_layer_names():
    assert attackers.names()[:3] == ("B_lineAgent", "RedMeanderAgent", "SleepAgent")
    assert [attackers.kind_of(n) for n in attackers.names()[:3]] == [T.RED_BLINE, T.RED_MEANDER, T.RED_SLEEP]
    assert attackers.cage2() == ("B_lineAgent", "RedMeanderAgent", "SleepAgent")
    assert DEFAULT_MIX == {"B_lineAgent": 0.5, "RedMeanderAgent": 0.5}
    assert parse_red_agent("b_line") == "B_lineAgent" and parse_red_agent("MEANDER") == "RedMeanderAgent"


def test_a_registered_attacker_is_named_everywhere(toy):
    assert toy.kind == BUILT_IN and attackers.n_kinds() == BUILT_IN + 1
    assert "ToyRandomWalk" in RED_AGENTS and RED_AGENTS[-1] == "ToyRandomWalk"   # the live view of the registry
    assert parse_red_agent("TOY") == "ToyRandomWalk"
    assert red_weights("toy:1,bline:3") == {"B_lineAgent": 0.75, "ToyRandomWalk": 0.25}
    assert N.allocate_state(2).red_cdf.shape == (2, BUILT_IN + 1)
    assert N.state_values(100)["red_kind"] == (0, BUILT_IN)
    assert attackers.fingerprint() not in ("", None, BUILT_IN_FINGERPRINT)


def test_a_registered_attacker_plays_its_own_rules_on_the_native_engine(toy):
    total, kinds, red_kinds = _returns("toy")
    assert red_kinds == {toy.kind}
    # it scans subnets and hosts, exploits and escalates: its rules run, not a sleeping default
    assert {T.R_DRS, T.R_DNS, T.R_EXPLOIT, T.R_ESCALATE} <= kinds, kinds
    assert total.mean() < 0 and not np.array_equal(total, _returns("sleep")[0])
    assert np.array_equal(total, _returns("toy")[0])   # a seed defines its episodes
    # in a mixture each env episode draws the toy or B_line
    assert _returns("toy:0.5,bline:0.5")[2] == {toy.kind, T.RED_BLINE}


def test_the_belief_covers_a_registered_attacker(toy):
    from workflow_rl.rl.planning.belief import BeliefConfig, ParticleBelief

    belief = ParticleBelief(BeliefConfig(particles=256, red_agent="toy:0.5,bline:0.5"), seed=1)
    prior = belief.red_posterior()
    assert prior.shape == (BUILT_IN + 1,) and prior[T.RED_MEANDER] == prior[T.RED_SLEEP] == 0
    assert 0.3 < prior[toy.kind] < 0.7
    env = make_vector_env(1, "toy", seed=9)
    env.reset(seed=9)
    for _ in range(12):
        obs, *_ = env.step(np.zeros(1, np.int64))
        belief.update(0, obs[0])
    assert belief.red_posterior()[toy.kind] > prior[toy.kind], belief.red_posterior()


def test_evaluate_plays_a_registered_attacker(toy, tmp_path, capsys):
    out = tmp_path / "eval"
    rc, _, err = run_main(["evaluate", "restore_compromised", "--red-agents", "toy", "bline", "--lengths", "30",
                           "--episodes", "16", "--out", str(out)], capsys)
    assert rc == 0, err
    cells = json.loads((out / "evaluation.json").read_text())["results"]
    assert [c["red_agent"] for c in cells] == ["ToyRandomWalk", "B_lineAgent"]
    assert cells[0]["mean"] != cells[1]["mean"]


def test_an_attacker_without_a_cyborg_twin_is_refused_on_real_cyborg(toy, tmp_path, capsys):
    """Before anything plays (the native cells first would be lost): one error line naming the fix."""
    from workflow_rl.envs.cyborg import cyborg_red_class

    with pytest.raises(ValueError, match="no CybORG twin"):
        cyborg_red_class("ToyRandomWalk", None)
    with pytest.raises(ValueError, match="no CybORG twin"):
        make_vector_env(2, "toy:0.5,bline:0.5", engine="cyborg")
    out = tmp_path / "eval"
    rc, _, err = run_main(["evaluate", "sleep", "--engine", "native", "cyborg", "--red-agents", "bline", "toy",
                           "--lengths", "5", "--episodes", "2", "--out", str(out)], capsys)
    assert rc == 2 and err.startswith("error:") and "no CybORG twin" in err and "--engine native" in err, err
    assert len(err.strip().splitlines()) == 1 and not out.exists()


def test_a_bad_registration_is_refused_naming_the_fix():
    with pytest.raises(ValueError, match="taken"):
        attackers.register(attackers.Attacker("Meander2", toy_attacker.toy_choose, aliases=("meander",)))
    with pytest.raises(ValueError, match="taken"):
        attackers.register(attackers.Attacker("Mix", toy_attacker.toy_choose))
    with pytest.raises(ValueError, match="plain Python function"):
        attackers.register(attackers.Attacker("Jitted", print))
    with pytest.raises(ValueError, match="identifier"):
        attackers.register(attackers.Attacker("a:b", toy_attacker.toy_choose))
    with pytest.raises(ValueError, match="built in"):
        attackers.unregister("B_lineAgent")
    assert attackers.n_kinds() == BUILT_IN or "ToyRandomWalk" in attackers.names()


def test_the_cuda_kernel_plays_a_registered_attacker_as_the_cpu_kernel_does():
    """Under numba's CUDA simulator (a subprocess: see tests/sim/test_cuda_engine.py) the CUDA build of a registry
    holding the toy equals the CPU build, every output and state field after every step, envs cycling through
    every attacker (the family and the toy included)."""
    pytest.importorskip("workflow_rl.sim.cuda", reason="numba-cuda is not installed (pip install -e '.[dev]')")
    from test_cuda_engine import _simulated

    code = """
import sys, warnings
warnings.filterwarnings("ignore", "overflow encountered", RuntimeWarning)
sys.path.insert(0, "tests/sim")
import toy_attacker
toy_attacker.register()
from workflow_rl.policies import POLICIES
from workflow_rl.sim import cuda as C
print(C.lockstep_mismatch(8, 45, True, list(POLICIES.values())[:2], seed=4, episode_length=40, threads_per_block=8))
"""
    r = _simulated(code)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip() == "None", r.stdout
