"""Fixtures for the search tests."""
import pytest

from workflow_rl.search.records import Record


@pytest.fixture
def make_record():
    """A finished-workflow record with placeholder values for everything a test does not set."""
    def make(workflow: str, **kw) -> Record:
        base = dict(iteration=1, workflow=workflow, reason="test", observed_reward=0.0, observed_ci95=0.0,
                    episodes_trained=0, status="compliant", wall_time=0.0, started_at=0.0, finished_at=0.0,
                    run_dir="workflows/x", checkpoint=f"{workflow}.pt")
        return Record(**{**base, **kw})

    return make
