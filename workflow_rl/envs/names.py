"""Names every engine and layer agrees on: red agents, engines, vectorizations, start methods, devices.

A module of its own so the env modules below ``make_vector_env`` can use them without importing the factory
that imports them.
"""
from __future__ import annotations

import math


RED_AGENTS = ("B_lineAgent", "RedMeanderAgent", "SleepAgent")
_ALIASES = {
    "b_lineagent": "B_lineAgent", "b_line": "B_lineAgent", "bline": "B_lineAgent",
    "redmeanderagent": "RedMeanderAgent", "meander": "RedMeanderAgent",
    "sleepagent": "SleepAgent", "sleep": "SleepAgent",
}
ENGINES = ("native", "cyborg")
VECTORIZATIONS = ("sync", "pipes", "shared_memory")
START_METHODS = ("spawn", "fork", "forkserver", None)


MIX = "mix"
"""The red-agent name that asks for the default mixture, :data:`DEFAULT_MIX`."""
DEFAULT_MIX = {"B_lineAgent": 0.5, "RedMeanderAgent": 0.5}
"""``--red-agent mix``: B_line or Meander with equal odds, one drawn per env episode (CAGE2's two evaluated red
agents; blue is never told which one it faces)."""
_FIX = (f"use one of {', '.join(RED_AGENTS)} (aliases: b_line/bline, meander, sleep; any case), {MIX!r} "
        f"(= {','.join(f'{k}:{v:g}' for k, v in DEFAULT_MIX.items())}) or weights NAME:W,NAME:W")


def _single(name: str, whole: str) -> str:
    key = name.strip().lower()
    if key not in _ALIASES:
        raise ValueError(f"unknown red agent {name.strip()!r} in {whole!r}: {_FIX}" if name.strip() != whole.strip()
                         else f"unknown red agent {whole!r}: {_FIX}")
    return _ALIASES[key]


def red_weights(name: str) -> dict[str, float]:
    """The red-agent mixture a name stands for, {canonical name: probability} in :data:`RED_AGENTS` order with
    zero weights dropped: ``{name: 1.0}`` for one agent, :data:`DEFAULT_MIX` for ``mix``, and the normalised weights
    of ``NAME:W,NAME:W,...`` (each W a finite number >= 0, at least one > 0, each agent named once). One red agent is
    drawn per env episode from it. Bad input is one ValueError naming the fix."""
    text = str(name)
    if text.strip().lower() == MIX:
        return dict(DEFAULT_MIX)
    if ":" not in text and "," not in text:
        return {_single(text, text): 1.0}
    weights: dict[str, float] = {}
    for part in text.split(","):
        agent, sep, w = part.partition(":")
        if not sep:
            raise ValueError(f"red-agent mixture {text!r}: {part.strip()!r} has no weight: write NAME:WEIGHT for "
                             "every agent, e.g. B_lineAgent:0.5,RedMeanderAgent:0.5")
        canon = _single(agent, text)
        if canon in weights:
            raise ValueError(f"red-agent mixture {text!r} names {canon} twice: name each agent once")
        try:
            value = float(w)
        except ValueError:
            raise ValueError(f"red-agent mixture {text!r}: the weight {w.strip()!r} of {canon} is not a number: "
                             "write NAME:WEIGHT, e.g. B_lineAgent:0.5,RedMeanderAgent:0.5") from None
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"red-agent mixture {text!r}: the weight of {canon} must be a finite number >= 0, "
                             f"got {w.strip()}")
        weights[canon] = value
    total = sum(weights.values())
    if total <= 0:
        raise ValueError(f"red-agent mixture {text!r}: every weight is 0: give at least one agent a weight > 0")
    return {k: weights[k] / total for k in RED_AGENTS if weights.get(k, 0) > 0}


def parse_red_agent(name: str) -> str:
    """The canonical spelling of a red agent or mixture (any case, aliases, ``mix`` or ``NAME:W,...``): the CybORG
    class name for one agent, else ``NAME:P,NAME:P`` with normalised probabilities in :data:`RED_AGENTS` order
    (``mix`` -> ``B_lineAgent:0.5,RedMeanderAgent:0.5``). Parsing a canonical spelling returns it unchanged, so it
    is what configs, checkpoints and tables store."""
    weights = red_weights(name)
    if len(weights) == 1:
        return next(iter(weights))
    return ",".join(f"{k}:{v:.6g}" for k, v in weights.items())


def is_mixture(name: str) -> bool:
    """Whether ``name`` stands for more than one red agent."""
    return len(red_weights(name)) > 1
