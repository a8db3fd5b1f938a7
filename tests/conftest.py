import functools
import os
import sys
from pathlib import Path

import pytest

# the suite mirrors the package (tests/sim, tests/envs, tests/rl, tests/search, tests/runs, tests/cli; top level: the
# top-level modules and the repository); shared helpers live in tests/helpers.py
sys.path.insert(0, str(Path(__file__).parent))


@functools.lru_cache(maxsize=1)
def _cyborg_problem():
    try:
        from workflow_rl.envs.cyborg import install_scenario

        install_scenario()
        return None
    except Exception as e:  # noqa: BLE001 - any failure to provide CybORG is reported by the fixture below
        return f"real CybORG unavailable: {e}"


@pytest.fixture(autouse=True)
def _require_cyborg(request):
    """Real-CybORG tests need csle-cyborg and the scenario data. Without them they skip, saying why, unless
    WORKFLOW_RL_REQUIRE_CYBORG=1 (as in CI), where a missing engine fails them."""
    if request.node.get_closest_marker("cyborg") is None:
        return
    problem = _cyborg_problem()
    if problem is None:
        return
    if os.environ.get("WORKFLOW_RL_REQUIRE_CYBORG") == "1":
        pytest.fail(problem)
    pytest.skip(problem)


def pytest_collection_modifyitems(config, items):
    """Every real-CybORG test is slow (a CybORG episode costs ~0.1-1 s): `pytest -m "not slow"` leaves them out.
    Under pytest-xdist they run on either worker, beside each other: each checks only its own worker processes, and
    the ``/dev/shm`` check (tests/envs/test_cyborg.py) lets another process's entries come and go. ``make test``
    deals whole files to the workers (``--dist loadfile``): a file's module fixtures (an uninterrupted search the
    resume tests share, a registered toy attacker's kernels, which numba compiles for a minute on a fresh clone) are
    then built once, not once per worker. (``xdist_group`` never held: under pytest 9.2 and pytest-xdist 3.8
    ``--dist loadgroup`` groups nothing -- xdist tags a grouped test by setting ``item._nodeid``, which pytest 9's
    ``nodeid`` no longer reads.)"""
    for item in items:
        if item.get_closest_marker("cyborg") is not None:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True, scope="session")
def _private_screen_cache(tmp_path_factory):
    """Searches from a universal agent cache its screen under the user's cache folder (``search.screen_cache``):
    the suite's go to a folder of its own, never the user's (child processes inherit it)."""
    old = os.environ.get("WORKFLOW_RL_CACHE")
    os.environ["WORKFLOW_RL_CACHE"] = str(tmp_path_factory.mktemp("cache"))
    yield
    if old is None:
        os.environ.pop("WORKFLOW_RL_CACHE", None)
    else:
        os.environ["WORKFLOW_RL_CACHE"] = old


@pytest.fixture(autouse=True, scope="session")
def _threads_as_a_command_picks_them():
    """The suite computes with the threads a command picks for small work (``threads.configure``: one torch and one
    numba thread unless ``WORKFLOW_RL_THREADS`` or the libraries' own variables say otherwise), whatever test runs
    first: a library's default of a thread per core spin-waits on small operations whenever another process (a
    second test worker, another job) holds a core, and made the planner's tests several times slower."""
    from workflow_rl.threads import configure

    configure()


@pytest.fixture(autouse=True, scope="session")
def _one_blas_thread():
    """numpy's and scipy's BLAS (OpenBLAS) default to a thread per core too, and spin-wait the same way: beside a
    busy process a GP fit of a few hundred points (scikit-learn's Cholesky solves) took 25x longer
    (tests/search/test_replay.py's 120-workflow replay: 196 s, 7.9 s with one BLAS thread). The suite's BLAS runs on
    one thread, in this process and (``OPENBLAS_NUM_THREADS``) in the processes it starts, unless the user set that
    variable."""
    if "OPENBLAS_NUM_THREADS" in os.environ:
        yield
        return
    from threadpoolctl import threadpool_limits

    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    with threadpool_limits(1, user_api="blas"):
        yield
    os.environ.pop("OPENBLAS_NUM_THREADS", None)
