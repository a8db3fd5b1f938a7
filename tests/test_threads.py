"""The thread policy (issue Q, item 2; ``workflow_rl.threads``): what it picks for the work and the cores, that
the override and the command line apply it, and that the acting API (a library call) does not. No timing: the
speed it buys is measured by benchmarks/studies/shared_machine.py."""
import numba
import pytest
import torch

from workflow_rl import resources, threads
from workflow_rl.threads import Threads, Work, pick


@pytest.fixture(autouse=True)
def restore_threads():
    """The pools are process-wide: leave them as found, and the environment without overrides."""
    from threadpoolctl import threadpool_limits

    before = torch.get_num_threads(), numba.get_num_threads()
    with threadpool_limits(None, user_api="blas"):   # restores BLAS's threads on leaving
        yield
    torch.set_num_threads(before[0])
    numba.set_num_threads(before[1])


@pytest.fixture
def two_cores(monkeypatch):
    """A machine (affinity) of two cores and no thread variables set."""
    for var in (threads.ENV_VAR, *threads.LIBRARY_VARS.values()):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(threads, "usable_cores", lambda: 2)
    monkeypatch.setattr(resources.os, "sched_getaffinity", lambda pid: {0, 1})


def test_small_work_gets_one_thread_of_each():
    assert pick(Work(), 2, environ={}) == Threads(1, 1)   # acting one env at a time
    from workflow_rl.search.config import SearchConfig

    main_job = SearchConfig(hidden=(256, 256), decoy_memory=True, mask_decoys=True).thread_work()
    assert pick(main_job, 16, environ={}) == Threads(1, 1)   # make run's search: small network, small batches


def test_large_work_gets_a_thread_per_share_up_to_the_cores():
    big = Work(macs=3 * threads.MACS_PER_THREAD, envs=5 * threads.ENVS_PER_THREAD)
    assert pick(big, 16, environ={}) == Threads(3, 5)
    assert pick(big, 2, environ={}) == Threads(2, 2)


def test_overrides_in_order():
    big = Work(macs=10 * threads.MACS_PER_THREAD, envs=10 * threads.ENVS_PER_THREAD)
    assert pick(Work(), 2, override=3, environ={threads.ENV_VAR: "1"}) == Threads(3, 3)   # the flag first
    assert pick(Work(), 2, environ={threads.ENV_VAR: "4"}) == Threads(4, 4)
    assert pick(big, 8, environ={threads.ENV_VAR: "off"}) == Threads(None, None)          # the libraries' own
    assert pick(big, 8, environ={"OMP_NUM_THREADS": "6"}) == Threads(None, 8)              # the user sized torch
    assert pick(big, 8, environ={"NUMBA_NUM_THREADS": "6"}) == Threads(8, None)
    with pytest.raises(ValueError, match="threads must be a count >= 1"):
        pick(Work(), 2, environ={threads.ENV_VAR: "-2"})
    with pytest.raises(ValueError, match="at most 1024"):   # torch segfaults on a million threads
        pick(Work(), 2, environ={threads.ENV_VAR: "1000000"})
    assert pick(Work(), 2, environ={threads.ENV_VAR: "1024"}) == Threads(1024, 1024)


def test_acting_one_env_gets_one_thread_on_two_cores(two_cores):
    torch.set_num_threads(2)
    numba.set_num_threads(2)
    threads.configure()   # what a command (or a caller of make_act that wants the policy) applies
    assert (torch.get_num_threads(), numba.get_num_threads()) == (1, 1)


def test_the_environment_override_wins(two_cores, monkeypatch):
    monkeypatch.setenv(threads.ENV_VAR, "2")
    torch.set_num_threads(1)
    threads.configure()
    assert torch.get_num_threads() == 2


def test_make_act_leaves_the_thread_pools_alone(two_cores):
    """A library call changes no global state: the thread policy is the command line's (or the caller's)."""
    from workflow_rl.rl.planning.planner import PlanConfig, make_act

    torch.set_num_threads(2)
    numba.set_num_threads(2)
    make_act("pretrained:universal", PlanConfig(), episode_length=30)
    assert (torch.get_num_threads(), numba.get_num_threads()) == (2, 2)


@pytest.mark.parametrize("flag,expect", [([], 1), (["--threads", "2"], 2)])
def test_a_command_applies_the_policy_and_its_flag_first(flag, expect, two_cores, capsys, monkeypatch):
    """torch's pool and numpy's BLAS (the GP's fits) both, unless the user sized BLAS."""
    from threadpoolctl import threadpool_info, threadpool_limits

    from workflow_rl.cli import main

    for var in threads.BLAS_VARS:
        monkeypatch.delenv(var, raising=False)
    torch.set_num_threads(2 if expect == 1 else 1)
    threadpool_limits(2 if expect == 1 else 1, user_api="blas")
    main(["replay", "sleep", "--length", str(10**9), *flag])   # refused, but only after its threads were set
    assert "error:" in capsys.readouterr().err
    assert torch.get_num_threads() == expect
    blas = [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]
    assert blas and set(blas) == {expect}
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "3")   # the user's own BLAS size is left alone
    threadpool_limits(3, user_api="blas")
    main(["replay", "sleep", "--length", str(10**9), *flag])
    capsys.readouterr()
    assert {p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"} == {3}
