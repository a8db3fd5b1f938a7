"""Replay fixed-buffer device work as CUDA graphs.

Why: on a GPU a rollout step is a few hundred small kernels (policy, sampling, the engine, compliance, bookkeeping)
launched one by one from Python: the launches, not the arithmetic, bound the step whatever the batch. A function that reads and writes only tensors living as long as the trainer (fixed buffers, state
updated in place) launches the same kernels on the same memory every time it runs with the same shape, so it can be
captured once per shape and replayed in one launch.

``GraphCache.run(key, fn, *args)``: the first run of a key is eager (it is also the warm-up a capture needs: lazy
initialisation, cuBLAS workspaces, numba's module load), the second captures ``fn`` and replays it, later runs
replay. Generators ``fn`` draws from are registered with each graph, so a replay advances them as the eager run
would. Disabled (off a GPU, or not asked for) every run is eager: the same arithmetic, launched op by op. A capture
that fails stops the run with an error naming the fix (``--no-cuda-graphs``): torch does not promise a clean state
(generator offsets, the allocator) after a failed capture, so going on eagerly could silently differ.
"""
from __future__ import annotations

from typing import Callable, Hashable

import torch


class GraphCacheError(RuntimeError):
    """A capture failed; the run cannot go on safely with graphs."""


class GraphCache:
    def __init__(self, enabled: bool, generators: tuple[torch.Generator, ...] = ()):
        self.enabled = enabled
        self.generators = generators
        self._graphs: dict[Hashable, torch.cuda.CUDAGraph | None] = {}   # None: ran once, eagerly (the warm-up)

    def run(self, key: Hashable, fn: Callable[..., None], *args) -> None:
        """``fn(*args)``, replayed from a graph where one is (or can now be) captured for ``key``."""
        if not self.enabled:
            fn(*args)
            return
        if key not in self._graphs:          # first time: eager, the warm-up
            self._graphs[key] = None
            fn(*args)
            return
        graph = self._graphs[key] or self._capture(key, fn, *args)
        graph.replay()

    def _capture(self, key: Hashable, fn: Callable[..., None], *args) -> torch.cuda.CUDAGraph:
        graph = torch.cuda.CUDAGraph()
        for g in self.generators:
            graph.register_generator_state(g)
        try:
            with torch.cuda.graph(graph, capture_error_mode="thread_local"):
                fn(*args)
        except Exception as e:  # noqa: BLE001 - torch and numba raise several kinds; all mean the same here
            raise GraphCacheError(f"capturing {key!r} as a CUDA graph failed ({type(e).__name__}: {e}); run "
                                  "with --no-cuda-graphs") from e
        self._graphs[key] = graph
        return graph
