"""The prepared GPU run must not rot between the sessions that have a GPU: dry-run every stage on the CPU."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow   # every stage end to end: training and two searches (minutes on a 2-core CPU)
def test_gpu_check_dry_run_completes_every_stage(tmp_path):
    pytest.importorskip("workflow_rl.sim.cuda", reason="the equality stage needs numba-cuda (its CUDA simulator)")
    args = ["--device", "cpu", "--engine-sizes", "4096", "--equality-envs", "12", "--equality-steps", "30",
            "--train-envs", "64", "--search-episodes", "400", "--search-batches", "2", "--batch-slots", "2",
            "--search-timeout", "240", "--budget", "1200", "--out", str(tmp_path)]
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), *args], capture_output=True,
                       text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads((tmp_path / "gpu.json").read_text())
    assert res["numba_cuda_import"] == "ok" and res["numpy"]
    assert res["equality"]["equal"] is True, res["equality"]       # the CUDA kernel, simulated, == the CPU kernel
    assert res["engine"]["rows"][0]["n_envs"] == 4096 and res["engine"]["rows"][0]["env_steps_per_s"] > 0
    for stage in (res["batched_training"], res["search"][0], res["training"]):
        assert "wall_s" in stage, stage          # neither failed nor timed out
    assert "| batched (BatchedTrainer) | 2 |" in res["batched_training"]["table"]
    assert len(res["training"]["sps_per_update"]) == 3
