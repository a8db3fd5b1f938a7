"""Every command that takes ``--device`` runs on CUDA with every kind of agent (issue Q): a shipped agent, a
checkpoint file, a baseline; greedy, sampled, across workflows, planned; evaluate, replay, search, train. GPU only
(skipped without one; ``benchmarks/device/device_q_tests.sh`` runs them on the device machine). The CPU suite's stand-in
for these is ``tests/test_devices.py`` (a second device that computes on the CPU). Tiny sizes: each checks that the
command runs on the GPU end to end and says what it should, not the agent's quality."""
from __future__ import annotations

import json

import pytest
import torch

from tests.helpers import run_main

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU on this machine")

AGENT = "pretrained:universal"
WORKFLOW = ["--workflow", "critical_first"]
TINY = ["--red-agents", "B_lineAgent", "--lengths", "5", "--episodes", "8"]
TINY_PLAN = ["--plan-particles", "16", "--plan-rollouts", "2", "--plan-horizon", "3"]
UNIVERSAL_NET = ["--hidden", "256", "256", "--decoy-memory", "--mask-decoys"]


def _results(out_dir) -> dict:
    return {(r["mode"], r["red_agent"], r["length"]): r["mean"]
            for r in json.loads((out_dir / "evaluation.json").read_text())["results"]}


def test_evaluate_a_shipped_agent_on_cuda_every_mode(tmp_path, capsys):
    """The issue's traceback ("mat1 is on cuda:0, different from other tensors on cpu"): greedy, sampled and
    planned on CUDA, with the CPU run's numbers (the same episodes, the sampled mode's same CPU draws)."""
    args = ["evaluate", AGENT, *WORKFLOW, *TINY, "--mode", "both", "--plan", *TINY_PLAN]
    rc, out, err = run_main([*args, "--device", "cuda", "--out", str(tmp_path / "cuda")], capsys)
    assert rc == 0, err
    assert "note: --plan keeps its belief and root choice on a CPU copy of the agent" in out
    rc, _, err = run_main([*args, "--out", str(tmp_path / "cpu")], capsys)
    assert rc == 0, err
    cuda, cpu = _results(tmp_path / "cuda"), _results(tmp_path / "cpu")
    assert {m for m, *_ in cuda} == {"greedy", "sampled", "planned"}
    assert cuda == pytest.approx(cpu), "CUDA and CPU disagree beyond float rounding (a flipped near-tie?)"


def test_evaluate_every_workflow_on_cuda(tmp_path, capsys):
    """The issue's ``evaluate pretrained:universal --workflow all ... --device cuda``, tiny."""
    rc, _, err = run_main(["evaluate", AGENT, "--workflow", "all", "--red-agents", "B_lineAgent", "--lengths", "5",
                           "--episodes", "2", "--mode", "both", "--device", "cuda", "--out", str(tmp_path)], capsys)
    assert rc == 0, err
    assert len((tmp_path / "workflows.csv").read_text().splitlines()) == 1 + 120 * 2   # header, workflow x mode


@pytest.mark.parametrize("baseline", ["restore_compromised", "greedy_workflow"])
def test_evaluate_a_baseline_on_cuda(baseline, tmp_path, capsys):
    rc, out, err = run_main(["evaluate", baseline, *WORKFLOW, *TINY, "--device", "cuda"], capsys)
    assert rc == 0 and "native greedy: 1 cells" in out, err


def test_replay_on_cuda(tmp_path, capsys):
    for mode in ("greedy", "sampled", "planned"):
        out = tmp_path / f"{mode}.html"
        rc, text, err = run_main(["replay", AGENT, *WORKFLOW, "--episodes", "2", "--length", "5", "--mode", mode,
                                  *TINY_PLAN, "--device", "cuda", "--out", str(out)], capsys)
        assert rc == 0, err
        assert out.is_file() and text.count("episode ") >= 2, mode


def test_train_from_a_shipped_agent_on_cuda_and_evaluate_its_checkpoint(tmp_path, capsys):
    """``train --init-checkpoint`` on CUDA (the weights copied into the trainer's GPU network; its held-out
    evaluation on the GPU), then its checkpoint file evaluated on CUDA."""
    run = tmp_path / "run"
    rc, out, err = run_main(["train", "--init-checkpoint", AGENT, *UNIVERSAL_NET, *WORKFLOW, "--device", "cuda",
                             "--n-envs", "16", "--max-episodes", "1", "--min-episodes", "1", "--eval-episodes", "8",
                             "--eval-length", "5", "--no-progress", "--out", str(run)], capsys)
    assert rc == 0, err
    assert json.loads((run / "summary.json").read_text())["eval"]["episodes"] == 8
    rc, out, err = run_main(["evaluate", str(run / "checkpoints" / "latest.pt"), *TINY, "--mode", "sampled",
                             "--device", "cuda"], capsys)
    assert rc == 0 and "native sampled: 1 cells" in out, err


def test_search_from_a_shipped_universal_agent_on_cuda(tmp_path, capsys):
    """The issue's ``search --init-checkpoint pretrained:universal ... --device cuda``, at a tiny budget: the
    shipped screen is read (not recomputed on the GPU), then two workflows are fine-tuned and evaluated there."""
    rc, out, err = run_main(["search", "--total-episodes", "32", "--init-checkpoint", AGENT, *UNIVERSAL_NET,
                             "--n-envs", "16", "--max-episodes", "2", "--min-episodes", "1", "--post-gate-episodes",
                             "0", "--device", "cuda", "--no-progress", "--out", str(tmp_path / "search")], capsys)
    assert rc == 0, err
    assert "as shipped with it" in out and (tmp_path / "search" / "summary.json").is_file()


@pytest.mark.cyborg
def test_evaluate_on_real_cyborg_with_the_agent_on_cuda(capsys):
    """Real CybORG runs on the CPU whatever ``--device`` (``devices.engine_device``): the agent stays on the GPU
    and its acting function moves the observations to it, both engines in one command."""
    rc, out, err = run_main(["evaluate", AGENT, *WORKFLOW, "--engine", "native", "cyborg", "--red-agents",
                             "B_lineAgent", "--lengths", "3", "--episodes", "2", "--workers", "2", "--mode", "greedy",
                             "--device", "cuda"], capsys)
    assert rc == 0 and "cyborg greedy: 1 cells" in out, err
