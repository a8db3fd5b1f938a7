"""Ray-distributed search on this machine: two workflows train at once, and the budget still holds exactly."""
import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'workflow-rl[ray]'); the Ray search "
                                        "cannot be exercised")

from workflow_rl.search.ray_executor import RayExecutor  # noqa: E402
from workflow_rl.search.search import SearchConfig, WorkflowSearch  # noqa: E402


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()


@pytest.mark.slow   # a Ray cluster and a search on it: 8-14 s
def test_two_workflows_train_concurrently_within_budget(local_ray, tmp_path):
    cfg = SearchConfig(n_envs=16, max_episodes=4, total_episodes=320, eval_episodes=16, seed=3, n_init=2,
                       update_every_steps=100, post_gate_episodes=0)   # two caps fit the budget: overlap
    search = WorkflowSearch(cfg, tmp_path, progress=False)
    summary = search.run(RayExecutor(workers=2))
    its = search.state.iterations
    assert summary["episodes_used"] == 320 == sum(r.episodes_trained for r in its)
    assert len({r.workflow for r in its}) == len(its)
    first, second = sorted(its, key=lambda r: r.iteration)[:2]
    # the two initial-design workflows were in flight at the same time
    assert first.started_at < second.finished_at and second.started_at < first.finished_at
    for r in its:
        assert (tmp_path / r.checkpoint).is_file()
    assert (tmp_path / "best_policy.pt").is_file() and (tmp_path / "report.md").is_file()
    # later picks inherit from finished workflows only, and pending picks were hallucinated, not repeated
    assert len(its) >= 5
    assert any("pending hallucinated" in r.reason for r in its)
