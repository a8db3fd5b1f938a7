"""Every seed derived from a run's seed, in one module: named streams, so no two parts of a run share one.

A run has one ``--seed``. Its parts need seeds of their own -- evaluation rounds, parity and curve rounds, the
search's random design start, each env's planner, each part of an expert-iteration round -- and each rule that
derives them is written here once, under a name, instead of as a magic number where it is used. The strides are
primes far apart, so the seeds of different runs' rounds (``seed`` and ``seed + 1``) do not meet for thousands of
rounds; the hashed streams (:func:`sub_seed`, :func:`expert_round_seed`) go through numpy's ``SeedSequence``.

Every committed result was played with these rules: changing one changes which episodes a seed names, so the
results would no longer reproduce (``make results`` regenerates the results page byte for byte from them).
"""
from __future__ import annotations

import numpy as np

EVAL_ROUND_STRIDE = 7919
"""Round r of an evaluation (``rl.evaluate``: ``evaluate``, ``--after``, ``join``) is seeded ``seed + 7919 r``."""
ENGINE_ROUND_STRIDE = 100_003
"""Round r of a parity or curves run (scripted defenders on both engines) is seeded ``seed + 100,003 r``."""
SEARCH_DESIGN_STREAM = 1_000_003
"""The tag of the stream that draws a search's 'random' design start (the search's other streams are iteration
numbers below 120)."""
EXPERT_TAG = 2
"""The tag of expert iteration's round streams (:func:`expert_round_seed`)."""
EXPERT_PARTS = {"episodes": 0, "planner": 1, "split": 2, "minibatches": 3}
"""The parts of an expert-iteration round with a stream each."""
RANDOM_ACT_TAG = 3
"""The tag of the random baseline's streams (:func:`random_act_key`)."""


def eval_round_seed(seed: int, round_: int) -> int:
    """The seed of round ``round_`` of an evaluation of seed ``seed``."""
    return seed + EVAL_ROUND_STRIDE * round_


def engine_round_seed(seed: int, round_: int) -> int:
    """The seed of round ``round_`` of a parity or curves run of seed ``seed``."""
    return seed + ENGINE_ROUND_STRIDE * round_


def design_rng(seed: int) -> np.random.Generator:
    """The generator of a search's random design start."""
    return np.random.default_rng([seed, SEARCH_DESIGN_STREAM])


def sub_seed(seed: int, i: int) -> int:
    """A seed for member ``i`` of a batch (each env's planner belief), independent of the others'."""
    return int(np.random.SeedSequence([seed, i]).generate_state(1, np.uint64)[0] >> 1)


def expert_round_seed(seed: int, round_: int, part: int | str) -> int:
    """The seed of ``part`` (a name of :data:`EXPERT_PARTS` or its number) of expert-iteration round ``round_``."""
    what = EXPERT_PARTS[part] if isinstance(part, str) else part
    return int(np.random.SeedSequence([seed, EXPERT_TAG, round_, what]).generate_state(1, np.uint64)[0] >> 1)


def random_act_key(seed: int, round_seed: int) -> int:
    """The key of the random baseline's draws (``--seed`` ``seed``) in the round of envs reset with ``round_seed``
    (:func:`random_actions`)."""
    return int(np.random.SeedSequence([seed, RANDOM_ACT_TAG, round_seed]).generate_state(1, np.uint64)[0])


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser on uint64 arrays (wrapping arithmetic): a counter in, a well-mixed 64-bit word out."""
    x = x + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def random_actions(key: int, n: int, t: int, high: int) -> np.ndarray:
    """The random baseline's actions (0..high-1) at step ``t`` of envs 0..n-1 of the round keyed ``key``: a
    counter-based draw of (key, env, step), so env i's action depends on nothing else (not on the round's size, the
    rounds before it or the process that plays it)."""
    counter = (np.arange(n, dtype=np.uint64) << np.uint64(32)) | np.uint64(t & 0xFFFFFFFF)
    return (_mix(_mix(counter ^ np.uint64(key))) % np.uint64(high)).astype(np.int64)


__all__ = ["EVAL_ROUND_STRIDE", "ENGINE_ROUND_STRIDE", "SEARCH_DESIGN_STREAM", "EXPERT_PARTS", "eval_round_seed",
           "engine_round_seed", "design_rng", "sub_seed", "expert_round_seed", "RANDOM_ACT_TAG", "random_act_key",
           "random_actions"]
