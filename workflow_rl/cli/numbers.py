"""argparse types for the flags that are not config settings: one readable message per bad value."""
from __future__ import annotations

import argparse

from workflow_rl.checks import MAX_EPISODE_LENGTH, MAX_EPISODES, MAX_SEED


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
