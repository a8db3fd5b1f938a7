"""Replay fixed-buffer device work as CUDA graphs.

Why: on a GPU a rollout step is a few hundred small kernels (policy, sampling, the engine, compliance, bookkeeping)
launched one by one from Python -- ~2.9 ms per step on an H100 whatever the batch (BENCHMARKS.md), far more than
the arithmetic. A function that reads and writes only tensors living as long as the trainer (fixed buffers, state
updated in place) launches the same kernels on the same memory every time it runs with the same shape, so it can be
captured once per shape and replayed in one launch.

``GraphCache.run(key, fn, *args)``: the first run of a key is eager (it is also the warm-up a capture needs: lazy
initialisation, cuBLAS workspaces, numba's module load), the second captures ``fn`` and replays it, later runs
replay. Generators ``fn`` draws from are registered with each graph, so a replay advances them as the eager run
would. Disabled (off a GPU, or not asked for) every run is eager: the same arithmetic, launched op by op. A capture
that fails (e.g. a library call that may not be captured) is reported once and that key runs eagerly from then on.
"""
from __future__ import annotations

import warnings
from typing import Callable, Hashable

import torch


class GraphCache:
    def __init__(self, enabled: bool, generators: tuple[torch.Generator, ...] = ()):
        self.enabled = enabled
        self.generators = generators
        self._graphs: dict[Hashable, torch.cuda.CUDAGraph | None] = {}   # None: ran once eagerly, or capture failed
        self._failed: set[Hashable] = set()

    def run(self, key: Hashable, fn: Callable[..., None], *args) -> None:
        """``fn(*args)``, replayed from a graph where one is (or can now be) captured for ``key``."""
        if not self.enabled or key in self._failed:
            fn(*args)
            return
        if key not in self._graphs:          # first time: eager, the warm-up
            self._graphs[key] = None
            fn(*args)
            return
        graph = self._graphs[key]
        if graph is None:
            graph = self._capture(key, fn, *args)
            if graph is None:
                fn(*args)
                return
        graph.replay()

    def _capture(self, key: Hashable, fn: Callable[..., None], *args) -> torch.cuda.CUDAGraph | None:
        graph = torch.cuda.CUDAGraph()
        for g in self.generators:
            graph.register_generator_state(g)
        try:
            with torch.cuda.graph(graph, capture_error_mode="thread_local"):
                fn(*args)
        except RuntimeError as e:
            self._failed.add(key)
            warnings.warn(f"CUDA graph capture failed for {key!r}; it runs eagerly ({e})", RuntimeWarning,
                          stacklevel=3)
            return None
        self._graphs[key] = graph
        return graph
