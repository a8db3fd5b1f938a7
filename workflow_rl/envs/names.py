"""Names every engine and layer agrees on: red agents, engines, vectorizations, start methods, devices.

A module of its own so the env modules below ``make_vector_env`` can use them without importing the factory
that imports them.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

from workflow_rl.sim import attackers


class _Registered(Sequence):
    """The registered attackers' names (``sim.attackers``), read from the registry at every use: an attacker
    registered after this module was imported is in it. Compares equal to the tuple of the same names."""

    def __getitem__(self, i):
        return attackers.names()[i]

    def __len__(self) -> int:
        return len(attackers.names())

    def __eq__(self, other) -> bool:
        return tuple(self) == tuple(other) if isinstance(other, (tuple, list, Sequence)) else NotImplemented

    __hash__ = None

    def __repr__(self) -> str:
        return repr(attackers.names())


RED_AGENTS = _Registered()
"""Every red agent's canonical name, in listing order (B_lineAgent, RedMeanderAgent, SleepAgent, then those
registered): derived from :mod:`workflow_rl.sim.attackers`."""


def _aliases() -> dict[str, str]:
    return {spelling.lower(): a.name for a in attackers.attackers() for spelling in (a.name, *a.aliases)}


ENGINES = ("native", "cyborg")
VECTORIZATIONS = ("sync", "pipes", "shared_memory")
START_METHODS = ("spawn", "fork", "forkserver", None)


MIX = "mix"
"""The red-agent name that asks for the default mixture, :data:`DEFAULT_MIX`."""
DEFAULT_MIX = {name: 1.0 / len(attackers.cage2(attacking=True)) for name in attackers.cage2(attacking=True)}
"""``--red-agent mix``: B_line or Meander with equal odds, one drawn per env episode (CAGE2's two evaluated red
agents, ``Attacker.cage2``; blue is never told which one it faces)."""


FAMILY = "family"
"""The red-agent name that asks for the attacker family (``sim.attackers.family``: sim/family.py), each of its six
with equal odds, one drawn per env episode."""


TRAINING = "training"
"""The red-agent name that asks for the held-out protocol's training set (``sim.attackers.training``), equal odds."""
HELD_OUT = "held_out"
"""The red-agent name that asks for the held-out protocol's held-out attackers (``sim.attackers.HELD_OUT``), equal
odds: for evaluation; no recipe trains on them."""

_NAMED = {FAMILY: attackers.family, TRAINING: attackers.training, HELD_OUT: attackers.held_out}
"""The named mixtures beside ``mix``, each with equal odds over the names its function gives."""


def _fix() -> str:
    spellings = ", ".join("/".join(a.aliases) for a in attackers.attackers() if a.aliases)
    return (f"use one of {', '.join(RED_AGENTS)} (aliases: {spellings}; any case), {MIX!r} "
            f"(= {','.join(f'{k}:{v:g}' for k, v in DEFAULT_MIX.items())}), {FAMILY!r} (the attacker family, "
            f"equal odds), {TRAINING!r} / {HELD_OUT!r} (the held-out protocol's two sides) or weights NAME:W,NAME:W")


def _single(name: str, whole: str) -> str:
    key = name.strip().lower()
    aliases = _aliases()
    if key not in aliases:
        raise ValueError(f"unknown red agent {name.strip()!r} in {whole!r}: {_fix()}" if name.strip() != whole.strip()
                         else f"unknown red agent {whole!r}: {_fix()}")
    return aliases[key]


def red_weights(name: str) -> dict[str, float]:
    """The red-agent mixture a name stands for, {canonical name: probability} in :data:`RED_AGENTS` order with
    zero weights dropped: ``{name: 1.0}`` for one agent, :data:`DEFAULT_MIX` for ``mix``, the attacker family with
    equal odds for ``family``, ``training`` and ``held_out`` (:data:`_NAMED`), and the normalised weights
    of ``NAME:W,NAME:W,...`` (each W a finite number >= 0, at least one > 0, each agent named once). One red agent is
    drawn per env episode from it. Bad input is one ValueError naming the fix."""
    text = str(name)
    if text.strip().lower() == MIX:
        return dict(DEFAULT_MIX)
    if text.strip().lower() in _NAMED:
        members = _NAMED[text.strip().lower()]()
        return {n: 1.0 / len(members) for n in members}
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


def check_engine_plays(name: str, engine: str) -> None:
    """A ValueError unless ``engine`` can play every red agent of ``name``: real CybORG only those with a CybORG
    twin (``Attacker.cyborg_class``), checked before anything plays."""
    if engine == "cyborg":
        missing = [n for n in red_weights(name) if attackers.get(n).cyborg_class is None]
        if missing:
            raise ValueError(f"red agent {missing[0]} has no CybORG twin (its Attacker.cyborg_class is None), so "
                             "real CybORG cannot play it: play it on the native engine (--engine native)")


def is_mixture(name: str) -> bool:
    """Whether ``name`` stands for more than one red agent."""
    return len(red_weights(name)) > 1
