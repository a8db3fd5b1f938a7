"""argparse types for the flags that are not config settings: one readable message per bad value."""
from __future__ import annotations

import argparse

from workflow_rl.checks import MAX_BENCH_CYBORG_STEPS, MAX_BENCH_REPEATS, MAX_EPISODE_LENGTH, MAX_EPISODES, MAX_SEED


def number(cast, ok, requirement: str):
    """An argparse type: ``cast`` the text and check ``ok``, with one readable message for each failure."""
    def parse(text: str):
        try:
            v = cast(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {'an integer' if cast is int else 'a number'}") \
                from None
        if not ok(v):
            raise argparse.ArgumentTypeError(f"must be {requirement}, got {v}")
        return v

    return parse


positive_int = number(int, lambda v: v >= 1, ">= 1")
positive_float = number(float, lambda v: v > 0, "> 0")
non_negative_int = number(int, lambda v: v >= 0, ">= 0")
seed_int = number(int, lambda v: 0 <= v <= MAX_SEED, f"in 0..{MAX_SEED} (a 64-bit seed)")
episode_length = number(int, lambda v: 1 <= v <= MAX_EPISODE_LENGTH,
                        f"in 1..{MAX_EPISODE_LENGTH} (the engines count steps in 32 bits)")
episode_count = number(int, lambda v: 1 <= v <= MAX_EPISODES,
                       f"in 1..{MAX_EPISODES:,} (no evaluation needs more episodes per cell)")
bench_repeats = number(int, lambda v: 1 <= v <= MAX_BENCH_REPEATS,
                       f"in 1..{MAX_BENCH_REPEATS} (the median stops moving after a few dozen)")
bench_cyborg_steps = number(int, lambda v: 1 <= v <= MAX_BENCH_CYBORG_STEPS,
                            f"in 1..{MAX_BENCH_CYBORG_STEPS:,} (minutes of CybORG per cell)")


def worker_count(text: str) -> int:
    """argparse type of a count of worker processes: ``resources.check_workers`` (at most a few per usable core)."""
    from workflow_rl.resources import check_workers

    v = number(int, lambda v: v >= 1, ">= 1")(text)
    try:
        return check_workers("", v)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e).strip()) from None
