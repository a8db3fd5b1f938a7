"""``evaluate --ray`` on a local Ray cluster of two workers writes the files of the same evaluation played on one
machine: the same cells, the same episodes, the same per-episode returns (issue Z item 3)."""
import csv
import json

import pytest

from helpers import run_main

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'workflow-rl[ray]')")

pytestmark = pytest.mark.slow   # a local Ray start and its two actors (~20 s)


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()


def _episodes(folder):
    with open(folder / "episodes.csv", newline="") as f:
        return list(csv.DictReader(f))


def _cells(folder):
    return [{k: v for k, v in c.items() if k not in ("seconds", "wall_s")}
            for c in json.loads((folder / "evaluation.json").read_text())["results"]]


@pytest.mark.parametrize("agent", ["random", "pretrained:universal"])
def test_evaluate_on_ray_writes_what_one_machine_writes(local_ray, tmp_path, capsys, agent):
    """Two red agents, two modes, rounds smaller than the evaluation (so parts are dealt to both actors); the random
    baseline carries a generator from part to part (``rl.evaluate.skip_part``), the agent a sampled mode's."""
    args = ["evaluate", agent, "--workflow", "none", "--red-agents", "bline", "meander", "--lengths", "10", "20",
            "--episodes", "12", "--mode", "both", "--seed", "3"]
    rc, _, err = run_main(args + ["--out", str(tmp_path / "one")], capsys)
    assert rc == 0, err
    rc, _, err = run_main(args + ["--ray", "--workers", "2", "--out", str(tmp_path / "ray")], capsys)
    assert rc == 0, err
    one, on_ray = _episodes(tmp_path / "one"), _episodes(tmp_path / "ray")
    assert len(one) == len(on_ray) > 0
    assert one == on_ray
    assert _cells(tmp_path / "one") == _cells(tmp_path / "ray")
