"""The value checks every layer shares, so a bad setting is refused the same way wherever it enters.

One helper per kind of check (type, finite range, seed, episode counts), so a setting is refused the same way, naming
its flag and the fix, wherever it enters (the command line, a config dataclass, ``make_vector_env``, a state file).
Machine resources (cores, memory) are ``workflow_rl.resources``; files a command writes are ``workflow_rl.files``. Below
every other layer: it imports nothing of the package."""
from __future__ import annotations

import dataclasses
import math
import numbers
import os
import sys
import types
import typing
from pathlib import Path

import numpy as np

MAX_SEED = 2**63 - 1
"""Seeds are 64-bit signed integers in torch and numpy: larger ones overflow deep inside a generator."""
MAX_EPISODE_LENGTH = 2**31 - 1
"""The native engine counts an episode's steps in int32 (``sim.native.SimState.t``, its kernels' length argument):
a longer episode overflows inside the kernel, so every episode length (training, evaluation) is checked against it
where it enters."""
MAX_EPISODES = 10_000_000
"""Most episodes an evaluation may ask for per cell (``evaluate --episodes``). Ten million 100-step episodes are
10**9 env-steps per red agent (tens of minutes on the native engine, years on real CybORG) and their per-episode
results (``rl.evaluate.Episodes``: a return and two fix counts) take 240 MB per cell: the protocol asks for
hundreds to thousands, and a mistyped count (10**19) would otherwise start rounds that never end."""
MAX_REPLAY_STEPS = 100_000
"""Most steps (episodes x length) one replay page holds: each step is about 240 bytes of the page, so 100,000 steps
are a page of about 25 MB, about what a browser still opens; ``replay --length 10**9`` would otherwise play for
days without a word and then write a page no browser can open."""
MAX_BENCH_REPEATS = 100
"""Most repeats of a native ``bench`` cell (its median is reported): each repeat is a full timed run of the cell,
and past a few dozen the median no longer moves, so 2**31 can only be a typo (it would run for years in silence)."""
MAX_BENCH_CYBORG_STEPS = 100_000
"""Most vector steps x envs of one real-CybORG ``bench`` cell: CybORG steps run in the thousands per second, so
100,000 is minutes per cell; more adds nothing to a throughput figure."""
MAX_PLAY_STEPS = 10**10
"""Most env-steps one evaluation may play in all (``evaluate``: episodes x steps per episode x red agents x modes x
engines, x workflows across workflows; ``train``'s closing evaluation: seeds x ``--eval-episodes`` x
``--eval-length``; a search's evaluation of one workflow): each factor has its own range, but their product does
not (``--episodes 10000000 --lengths 2147483647`` is 2*10**16 steps, ages on any engine). 10**10 steps are about an
hour of the native engine on a CPU (3.4M steps/s, BENCHMARKS.md): every evaluation the repository runs is far below
(the largest, 1,000 episodes x 120 workflows x 3 red agents at lengths 30 50 100, plays 3.6*10**7 steps a mode:
6.5*10**7 counting each length apart), and so is ten million 100-step episodes (``MAX_EPISODES``) against three red
agents in two modes (6*10**9)."""


MAX_RECORDED_SECONDS = 10**9
"""Most seconds a file may say one part of a job took (a cell of ``evaluation.json``): 31 years. ``join`` sums the
parts' seconds, and two edited 1e308s would sum to Infinity, which ``json.dumps`` writes as no JSON reader reads."""


def check_play_steps(product: str, steps: int, fix: str) -> None:
    """An evaluation of ``steps`` env-steps in all (``product`` says how they multiply, e.g. "--episodes 10 x
    --lengths 100"), at most :data:`MAX_PLAY_STEPS`; otherwise one ValueError naming the product, the cap and
    ``fix`` (how to get under it)."""
    if steps > MAX_PLAY_STEPS:
        raise ValueError(f"{product} is {steps:,} steps of play, more than the {MAX_PLAY_STEPS:,} one evaluation "
                         f"may play (about an hour of the native engine on a CPU): {fix}")


def read_json(text: str | bytes, **kw):
    """``json.loads``, with text nested too deeply for Python's parser (200,000 nested arrays raise a
    ``RecursionError``) refused as a ValueError like any other damage: no workflow-rl file nests more than a few
    levels. Every JSON file a command reads back goes through it."""
    import json

    try:
        return json.loads(text, **kw)
    except RecursionError:
        raise ValueError("arrays or objects nested deeper than Python can read") from None


def no_constant(name: str):
    """``parse_constant`` of :func:`read_json` for a file that holds only finite numbers: NaN, Infinity and
    -Infinity (which ``json.dumps`` writes for them, and which no JSON reader but Python's accepts) are refused."""
    raise ValueError(f"{name} is not a finite number")


def flag(name: str) -> str:
    """The command-line spelling of a setting, as error messages name it."""
    return "--" + name.replace("_", "-")


def check_bool(name: str, value) -> bool:
    """``value`` if it is a real bool: the string 'no' is truthy, so a mistyped option must not mean True."""
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return value


def check_int(name: str, value, lo: int | None = None, hi: int | None = None) -> int:
    """``value`` as an int if it is an integer within [lo, hi]: Python's or numpy's (``np.int64(3)`` is a whole number
    as much as 3 is), never a bool (``True`` is no count) and never a float (``1.5`` is no seed, and ``2.0`` hides
    a computation that went wrong); otherwise one message naming ``name``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    value = int(value)
    _check_bounds(name, value, lo, hi, "")
    return value


def check_float(name: str, value, lo: float | None = None, hi: float | None = None, lo_open: bool = False) -> float:
    """``value`` if it is a finite number within [lo, hi] ((lo, hi] with ``lo_open``): nan and inf are refused,
    because every comparison with nan is False and an infinite weight or step size turns training into NaNs."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be a number, got {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value}")
    if lo_open and lo is not None and value <= lo:
        raise ValueError(f"{name} must be > {lo:g}, got {value:g}")
    _check_bounds(name, value, lo, hi, "g")
    return value


def check_return(name: str, value, steps: int) -> float:
    """``value`` if it is a return (or a mean of returns) that ``steps`` steps can score: a finite number in
    ``[steps * WORST_REWARD, 0]`` (up to float rounding); otherwise one ValueError naming ``name``. What a file
    that holds returns (``episodes.csv``, a ground truth, a screen, a search state) is checked by as it is read
    back: an edited -1e308 is finite, and a sum or mean of two is -Infinity, which ``json.dumps`` writes as no
    JSON reader reads."""
    from workflow_rl.sim.native import WORST_REWARD   # here, not at the top: the checks load before the engine

    check_float(name, value)
    if not steps * WORST_REWARD * (1 + 1e-6) - 1e-6 <= value <= 1e-6:
        raise ValueError(f"{name} {value:g} is no return of {steps:,} steps (each step's reward is in "
                         f"[{WORST_REWARD:g}, 0]: {steps * WORST_REWARD:g}..0)")
    return value


def _check_bounds(name: str, value, lo, hi, fmt: str) -> None:
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        want = (f"in [{lo:{fmt}}, {hi:{fmt}}]" if lo is not None and hi is not None else
                f">= {lo:{fmt}}" if lo is not None else f"<= {hi:{fmt}}")
        raise ValueError(f"{name} must be {want}, got {value:{fmt}}")


def check_seed(name: str, value) -> int:
    """A seed torch and numpy both accept: an integer in 0..2**63-1."""
    return check_int(name, value, 0, MAX_SEED)


def check_types(config, spell=flag) -> None:
    """Every field of dataclass ``config`` holds a value of its annotated type (``X | None``, ``tuple[int, ...]``
    and ``list[str]`` included; nested dataclasses are checked by their own ``validate``): a state file or a Python
    caller that passes '50' or 'no' is refused here, before the value is compared or used. ``spell`` names a
    field in the message (default: its flag)."""
    hints = typing.get_type_hints(type(config))
    for f in dataclasses.fields(config):
        hint, value = hints[f.name], getattr(config, f.name)
        if not dataclasses.is_dataclass(hint):
            _check_type(spell(f.name), value, hint)


def check_config(name: str, value, cls, spell=flag) -> None:
    """``value`` is a ``cls`` (a dataclass config) whose fields hold their annotated types: a job function's
    arguments checked at the call (a dict, None or ``resume='no'`` is one ValueError, not an AttributeError deep
    inside or a truthy string taken for True)."""
    if not isinstance(value, cls):
        raise ValueError(f"{name} must be of type {cls.__name__}, got {type(value).__name__}")
    check_types(value, spell)


def _check_type(name: str, value, hint) -> None:
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return
        kinds = [a for a in args if a is not type(None)]
        first = None   # ``int | str`` (``threads``: a count, 'auto' or 'off'): any of its kinds will do
        for kind in kinds:
            try:
                return _check_type(name, value, kind)
            except ValueError as e:
                first = first or e
        raise first
    origin = typing.get_origin(hint)
    if origin in (tuple, list):
        if not isinstance(value, (tuple, list)):
            raise ValueError(f"{name} must be a list, got {value!r}")
        for v in value:
            _check_type(name, v, args[0])
    elif hint is bool:
        check_bool(name, value)
    elif hint is int:
        check_int(name, value)
    elif hint is float:
        check_float(name, value)
    elif hint is str and not isinstance(value, str):
        raise ValueError(f"{name} must be a string, got {value!r}")
    elif hint is Path and not isinstance(value, (str, os.PathLike)):
        raise ValueError(f"{name} must be a path, got {value!r}")


def check_episode_length(name: str, value) -> int:
    """An episode length the engines can count: an integer in 1..:data:`MAX_EPISODE_LENGTH`."""
    return check_int(name, value, 1, MAX_EPISODE_LENGTH)


def check_episodes(name: str, value) -> int:
    """An evaluation's episode count: an integer in 1..:data:`MAX_EPISODES`."""
    return check_int(name, value, 1, MAX_EPISODES)


def check_replay_steps(episodes: int, length: int) -> None:
    """A replay page of ``episodes`` x ``length`` steps, at most :data:`MAX_REPLAY_STEPS`."""
    check_int("--episodes", episodes, 1)
    check_episode_length("--length", length)
    if episodes * length > MAX_REPLAY_STEPS:
        raise ValueError(f"--episodes {episodes:,} x --length {length:,} is {episodes * length:,} steps, more than the "
                         f"{MAX_REPLAY_STEPS:,} a replay page holds (about 25 MB; a browser opens no more): lower "
                         "--length or --episodes")


def fail(message: str) -> typing.NoReturn:
    """End a script the way the ``workflow-rl`` command line ends on bad input: one ``error:`` line on stderr and
    exit status 2 (raised as ``SystemExit``, so nothing after it runs, hence nothing is written). For the scripts
    beside the package (``benchmarks/``), which have no ``main`` that turns a ValueError into that line."""
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


class ValidatedOnce:
    """Settings validated once, at a command's boundary (``TrainConfig``, ``SearchConfig``).

    A command builds its settings, calls ``validate()`` once, and hands them to the code that runs them; that code
    (the trainer, a search's executors) calls :meth:`validate_once`, which validates only settings that have not
    passed here. Why a mark on the settings rather than a ``validated=True`` argument: the settings themselves say
    what passed, so a caller cannot vouch for settings nobody checked. A library user who builds a trainer straight
    from a config gets the full validation there, and one who validated first is not charged twice. The mark holds
    this process's id and the settings as they were (their ``repr``, every field, nested ones included): a config
    changed after it passed, or shipped to another process or machine (a Ray worker, whose devices and memory are
    its own), is not vouched for and is validated again where it runs. A config derived by ``dataclasses.replace``
    carries no mark; code that derives one from validated settings and knows the changes valid (a search's
    per-workflow configs) says so with :meth:`mark_validated`."""

    def _validated_key(self) -> tuple[int, str]:
        return os.getpid(), repr(self)

    def mark_validated(self) -> None:
        """Record that these settings, as they are now, passed ``validate()`` in this process."""
        self.__dict__["_validated_as"] = self._validated_key()

    @property
    def validated(self) -> bool:
        """Whether these exact settings passed ``validate()`` in this process."""
        return self.__dict__.get("_validated_as") == self._validated_key()

    def validate_once(self) -> None:
        """``validate()``, unless these exact settings already passed it here."""
        if not self.validated:
            self.validate()


def same_form(value):
    """A setting as two runs' settings are compared: a list (JSON's form of a tuple) as a tuple."""
    return tuple(same_form(v) for v in value) if isinstance(value, (list, tuple)) else value


def check_same(saved: dict, now: dict, names, what: str, fix: str, verb: str = "was written with",
               this: str = "this run has", spell=flag, error=ValueError) -> None:
    """The one resume-identity rule: refuse (``error``) to continue ``what`` whose ``saved`` settings differ from
    ``now`` in any of ``names`` (flat setting names, spelt by ``spell``), naming the first in one line: "checkpoint
    was written with --seed 0, this run has 1: <fix>". A continued run under other settings would not be the run its
    files name."""
    for name in names:
        was, has = same_form(saved.get(name)), same_form(now.get(name))
        if was != has:
            raise error(f"{what} {verb} {spell(name)} {was!r}, {this} {has!r}: {fix}")
