"""Every command that plays an agent computes on the run's device (issue Q), checked without a GPU.

On an H200, ``evaluate pretrained:universal --device cuda`` and ``search --init-checkpoint pretrained:universal
--device cuda`` stopped at their first step with "Expected all tensors to be on the same device": the agent was
built on the CPU while the CUDA engine's observations were on the GPU. A CPU-only suite cannot see that with the
CPU as the only device, so these tests give the run a second device: torch's lazy-tensor device (``"lazy"``, its
TorchScript backend, in the CPU wheel). Like CUDA it is not the CPU and refuses to mix its tensors with CPU ones;
unlike CUDA it computes, on the CPU, real numbers. The run device is ``"lazy"``, and the native CPU engine's output
is handed to the run on it (as the CUDA engine's is on the GPU): an agent loaded anywhere else, an input not moved
to the agent, a sampling generator on the wrong device, or a planner fed a device batch fails here as on the GPU.
And since an acting function moves its inputs to wherever its agent is (so a misplaced agent would run, only
slowly, with a copy per step), each test also checks where the network ran: on the run device, except the
planner's, which plans on a CPU copy by design. The numbers must equal the CPU run's.
"""
from __future__ import annotations

import inspect
import json

import gymnasium as gym
import numpy as np
import pytest
import torch

from tests.helpers import run_main
from workflow_rl.rl.ppo import Agent

FAKE = "lazy"
"""The stand-in for ``cuda``: a device that is not the CPU but computes on it."""
AGENT = "pretrained:universal"
"""A shipped agent with the decoy memory and the decoy mask (the inputs that must follow the agent), trained across
workflows (so both evaluations: one workflow, and a list)."""
TINY_PLAN = ["--plan-particles", "8", "--plan-rollouts", "2", "--plan-horizon", "2", "--plan-top-k", "2"]


class _OnRunDevice(gym.vector.VectorWrapper):
    """The native CPU engine seen through the plain vector-env API, so the evaluation hands its output to the run
    on the run's device (``rl.envstep.TorchStepper``), as the CUDA engine's output is on the GPU."""


class FakeGPU:
    """The run device, and the devices the agents' network ran on since the last :meth:`took` (``Agent.logits``:
    every acting function's and the planner's way into the network)."""

    device = FAKE

    def __init__(self):
        self.ran_on: set[str] = set()

    def took(self) -> set[str]:
        ran, self.ran_on = self.ran_on, set()
        return ran


@pytest.fixture
def fake_gpu(monkeypatch):
    """Make ``--device lazy`` a usable run device for the native engine, its episodes played by the CPU kernel;
    record where the network runs."""
    ts_backend = pytest.importorskip("torch._lazy.ts_backend", reason="torch built without the lazy-tensor backend")
    if not getattr(fake_gpu, "ready", False):
        ts_backend.init()
        fake_gpu.ready = True
    from workflow_rl.envs import factory
    from workflow_rl import devices
    from workflow_rl.rl import evaluate, viewer

    check_available, check_engine, make_env = (devices.check_device_available, devices.check_engine_device,
                                               factory.make_vector_env)
    monkeypatch.setattr(devices, "check_device_available", lambda d: d if d == FAKE else check_available(d))
    monkeypatch.setattr(devices, "check_engine_device",
                        lambda e, d: None if (e, d) == ("native", FAKE) else check_engine(e, d))

    def on_run_device(n, red="B_lineAgent", engine="native", episode_length=100, seed=None, device="cpu", **kw):
        if device != FAKE:
            return make_env(n, red, engine, episode_length, seed, device, **kw)
        return _OnRunDevice(make_env(n, red, engine, episode_length, seed, "cpu", **kw))

    for module in (evaluate, viewer):
        monkeypatch.setattr(module, "make_vector_env", on_run_device)
    gpu = FakeGPU()
    logits = Agent.logits

    def recorded(self, x):
        gpu.ran_on.add(self.device.type)
        return logits(self, x)

    monkeypatch.setattr(Agent, "logits", recorded)
    return gpu


def _means(out_dir) -> list:
    return [(r["mode"], r["red_agent"], r["length"], round(r["mean"], 9))
            for r in json.loads((out_dir / "evaluation.json").read_text())["results"]]


def test_evaluate_greedy_sampled_and_planned_on_the_run_device(fake_gpu, tmp_path, capsys):
    """The issue's ``evaluate ... --device cuda``, every mode, with the CPU's numbers: greedy (the agent on the run
    device), sampled (the CPU generator's draws moved to the logits: ``ppo.choose_actions``) and planned (on a CPU
    copy of the agent, its actions handed back on the run device; the note says so)."""
    args = ["evaluate", AGENT, "--workflow", "critical_first", "--red-agents", "B_lineAgent", "--lengths", "5",
            "--episodes", "2", "--mode", "both", "--plan", *TINY_PLAN]   # 5 steps: 3 of the opening, 2 of the agent
    rc, out, err = run_main([*args, "--device", fake_gpu.device, "--out", str(tmp_path / "dev")], capsys)
    assert rc == 0, err
    assert fake_gpu.took() == {FAKE, "cpu"}   # greedy and sampled on the run device, planned on the CPU
    assert "note: --plan keeps its belief and root choice on a CPU copy of the agent" in out
    rc, out, err = run_main([*args, "--out", str(tmp_path / "cpu")], capsys)
    assert rc == 0, err
    assert "note:" not in out
    dev, cpu = _means(tmp_path / "dev"), _means(tmp_path / "cpu")
    assert {m for m, *_ in dev} == {"greedy", "sampled", "planned"} and dev == cpu


def test_evaluate_across_workflows_on_the_run_device(fake_gpu, tmp_path, capsys):
    """``evaluate ... --workflow LIST --device cuda``: each env's workflow encoding goes to the agent's device."""
    args = ["evaluate", AGENT, "--workflow", "critical_first;D,E,OS,OH,U", "--red-agents", "B_lineAgent",
            "--lengths", "3", "--episodes", "2", "--mode", "both"]
    rows = {}
    for device in (FAKE, "cpu"):
        rc, _, err = run_main([*args, "--device", device, "--out", str(tmp_path / device)], capsys)
        assert rc == 0, err
        assert fake_gpu.took() == {device}
        rows[device] = (tmp_path / device / "workflows.csv").read_text()
    assert rows[FAKE] == rows["cpu"] and rows["cpu"].count("\n") > 2


def test_replay_on_the_run_device(fake_gpu, tmp_path, capsys):
    """``replay --device cuda`` (sampled and planned): the page records the CPU run's episodes."""
    for mode in ("sampled", "planned"):
        lines = {}
        for device in (FAKE, "cpu"):
            rc, out, err = run_main(["replay", AGENT, "--workflow", "critical_first", "--episodes", "2", "--length",
                                     "5", "--mode", mode, *TINY_PLAN, "--device", device,
                                     "--out", str(tmp_path / f"{mode}-{device}.html")], capsys)
            assert rc == 0, err
            assert fake_gpu.took() == {device if mode == "sampled" else "cpu"}, mode
            lines[device] = [x for x in out.splitlines() if x.startswith("episode ")]
        assert len(lines["cpu"]) == 2 and lines[FAKE] == lines["cpu"], mode


def test_the_search_screen_on_the_run_device(fake_gpu, tmp_path, monkeypatch):
    """The issue's ``search --init-checkpoint pretrained:universal --device cuda``: its screen (computed here, at
    settings no shipped screen has) evaluates the agent on the search's device."""
    import dataclasses as dc

    from workflow_rl.search import universal as U
    from workflow_rl.search.config import SearchConfig

    monkeypatch.setenv("WORKFLOW_RL_NO_CACHE", "1")
    cfg = SearchConfig(init_checkpoint=AGENT, eval_episodes=1, eval_length=2)
    dev = dc.replace(cfg, train=dc.replace(cfg.train, device=FAKE))
    got, source = U.screen(dev, tmp_path)
    assert source == "computed" and fake_gpu.took() == {FAKE}
    assert got == U.screen(cfg, tmp_path)[0]


def test_an_agent_acts_on_its_own_device_whatever_feeds_it(fake_gpu):
    """The reverse placement (an agent on the GPU, a CPU engine, as a user's own loop may have it): the acting
    function moves observations, workflow encoding and memory to the agent and hands actions back on the CPU."""
    from workflow_rl.rl.evaluate import evaluate_cells
    from workflow_rl.rl.planning.planner import make_act
    from workflow_rl.rl.pretrained import load_agent
    from workflow_rl.workflow import Workflow

    wf = Workflow.parse("critical_first")
    means = []
    for device in (FAKE, "cpu"):
        agent, _ = load_agent(AGENT, device)
        act = make_act(agent, workflow=wf, greedy=False, generator=torch.Generator().manual_seed(1))
        means.append([r.mean for r in evaluate_cells(act, ["B_lineAgent"], [3], 2, workflow=wf)])
        assert fake_gpu.took() == {device}
    assert np.isfinite(means[0]).all() and means[0] == means[1]


def test_loading_an_agent_names_its_device():
    """No silent default: an agent built where the run does not compute is the bug these tests catch."""
    from workflow_rl.rl.checkpoint import agent_from_checkpoint
    from workflow_rl.rl.pretrained import load_agent

    for fn in (agent_from_checkpoint, load_agent):
        assert inspect.signature(fn).parameters["device"].default is inspect.Parameter.empty, fn.__name__


def test_a_ctrl_c_landing_inside_a_print_still_stops_cleanly(monkeypatch):
    """The first Ctrl-C only asks the run to stop (``interrupt.GracefulInterrupt``); its handler runs wherever the
    main thread was, possibly inside a write to stdout (a fast CUDA run printing a row per update into a full pipe),
    where ``print`` raises "reentrant call". That must not end the run with a traceback and status 1 (as the H200
    run of ``test_train_on_cuda_interrupted_resumes`` ended): the request is kept and the line still goes out."""
    import os
    import signal
    import sys

    from workflow_rl.interrupt import GracefulInterrupt

    read, write = os.pipe()

    class Busy:
        """stdout in the middle of a write: every print raises as CPython's buffered writer does then."""

        def write(self, text):
            raise RuntimeError("reentrant call inside <_io.BufferedWriter name='<stdout>'>")

        def flush(self):
            pass

        def fileno(self):
            return write

    monkeypatch.setattr(sys, "stdout", Busy())
    stop = GracefulInterrupt("this update")
    stop._handle(signal.SIGINT, None)
    os.close(write)
    with os.fdopen(read) as f:
        said = f.read()
    assert stop.requested and said.strip().startswith("interrupt: finishing this update")
    with pytest.raises(KeyboardInterrupt):   # a second Ctrl-C still aborts
        stop._handle(signal.SIGINT, None)
