"""GraphCache's control flow (rl/graphs.py), with a stand-in for CUDA graphs: the first run of a key is eager, the
second captures and replays, later runs replay; a failed capture stops the run. (Whether a real capture of
the rollout equals the eager rollout bit for bit is checked on a GPU:
``benchmarks/device/gpu_check.py``, stage rollout.)"""
import contextlib

import pytest
import torch

from workflow_rl.rl.graphs import GraphCache, GraphCacheError


class FakeGraph:
    """Records what a capture would (the function, not run) and runs it on replay, as a CUDA graph does."""

    captures = []

    def __init__(self):
        self.fn, self.generators = None, []

    def register_generator_state(self, g):
        self.generators.append(g)

    def replay(self):
        self.fn()


@pytest.fixture
def fake_cuda(monkeypatch):
    state = {"capturing": None, "fail": False}

    @contextlib.contextmanager
    def graph(g, capture_error_mode="global"):
        state["capturing"] = g
        yield
        state["capturing"] = None
        if state["fail"]:
            raise RuntimeError("operation not permitted when stream is capturing")

    monkeypatch.setattr(torch.cuda, "CUDAGraph", FakeGraph)
    monkeypatch.setattr(torch.cuda, "graph", graph)
    return state


def test_first_run_is_eager_second_captures_and_replays_then_replays(fake_cuda):
    calls = []

    def fn(x):
        if fake_cuda["capturing"] is not None:         # under capture: recorded, not run
            fake_cuda["capturing"].fn = lambda: calls.append(("replayed", x))
        else:
            calls.append(("eager", x))

    gen = torch.Generator()
    cache = GraphCache(True, generators=(gen,))
    for _ in range(3):
        cache.run("a", fn, 1)
    cache.run("b", fn, 2)
    assert calls == [("eager", 1), ("replayed", 1), ("replayed", 1), ("eager", 2)]
    assert cache._graphs["a"].generators == [gen]        # the generator advances on replay as it would eagerly


def test_a_failed_capture_stops_the_run_naming_the_fix(fake_cuda):
    calls = []

    def fn():
        if fake_cuda["capturing"] is None:      # under capture nothing runs
            calls.append("ran")

    fake_cuda["fail"] = True
    cache = GraphCache(True)
    cache.run("a", fn)
    with pytest.raises(GraphCacheError, match="run with --no-cuda-graphs"):
        cache.run("a", fn)
    assert calls == ["ran"]        # nothing ran after the failed capture: no silent eager fallback


def test_disabled_runs_everything_eagerly(fake_cuda):
    calls = []
    cache = GraphCache(False)
    for _ in range(3):
        cache.run("a", lambda: calls.append(fake_cuda["capturing"]))
    assert calls == [None, None, None] and not cache._graphs
