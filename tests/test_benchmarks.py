"""The prepared GPU run must not rot between the sessions that have a GPU: dry-run every stage on the CPU."""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_gpu_check_dry_run_completes_every_stage(tmp_path):
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), "--device", "cpu", "--max-log2",
                        "12", "--train-envs", "64", "--search-episodes", "400", "--search-batches", "2",
                        "--batch-slots", "2", "--skip-compile", "--out", str(tmp_path)],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads((tmp_path / "gpu.json").read_text())
    assert res["engine"][0]["n_envs"] == 4096 and res["engine"][0]["eager"] > 0
    for stage in (res["batched_training"], res["search"][0], res["training"]):
        assert "wall_s" in stage, stage          # neither failed nor timed out
    assert "| batched (BatchedTrainer) | 2 |" in res["batched_training"]["table"]
    assert len(res["training"]["sps_per_update"]) == 3
