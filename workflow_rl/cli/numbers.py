"""The argparse types of the numeric flags, each reading its range from the one table.

The table is ``workflow_rl.ranges``; each type gives one readable message per bad value."""
from __future__ import annotations

import argparse

from workflow_rl.ranges import RANGES, key
from workflow_rl.resources import WORKERS_PER_CORE, check_workers
from workflow_rl.threads import parse_threads


class Ranged:
    """argparse type of a numeric flag whose range is ``RANGES[key]``: the text cast to the range's kind and, with
    ``check``, checked against it (``must be in 1..100 (why), got 2147483648``). A config setting's flag
    (``cli.flags``) is not checked here but by its config's ``validate()``, which reads the same entry and is what
    the Python API and state files pass through too. Without a key, ``build_parser`` binds the type to its flag's
    entry (:func:`bind_ranges`)."""

    def __init__(self, key: str | None = None, kind: type | None = None, check: bool = True):
        self.range_key, self.check = key, check
        self.kind = kind or (RANGES[key].kind if key else int)
        self.__name__ = self.kind.__name__   # argparse's "invalid int value"

    def bind(self, name: str, command: str | None) -> "Ranged":
        return Ranged(key(name, command), self.kind, self.check)

    def __call__(self, text: str):
        if not self.check:
            return self.kind(text)   # a ValueError: argparse's own "invalid int value"
        try:
            v = self.kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {'an integer' if self.kind is int else 'a number'}") \
                from None
        if self.range_key is not None:
            r = RANGES[self.range_key]
            if not r.contains(v):
                raise argparse.ArgumentTypeError(f"must be in {r.text()} ({r.why}), got {v}")
        return v


def ranged(name: str, command: str | None = None) -> Ranged:
    """The argparse type of setting ``name`` (of ``command``, where it has its own entry)."""
    return Ranged(key(name, command))


seed_int = ranged("seed")
episode_count = ranged("episodes")


def bind_ranges(parser: argparse.ArgumentParser, command: str) -> None:
    """Give every numeric flag of ``command``'s ``parser`` its table entry: an unbound :class:`Ranged` or a plain
    ``int``/``float`` type becomes its flag's (a KeyError naming the fix where the table has none). ``--help``
    shows each flag's range from the same entry (``(range 1..4,194,304)``): the help and the refusal cannot
    differ."""
    for action in parser._actions:
        if isinstance(action.type, Ranged) and action.type.range_key is None:
            action.type = action.type.bind(action.dest, command)
        elif action.type in (int, float):
            action.type = Ranged(key(action.dest, command), action.type)
        entry = getattr(action.type, "range_key", None)
        if entry is not None and action.help != argparse.SUPPRESS:
            limit = f"range {RANGES[entry].text()}{getattr(action.type, 'range_note', '')}"
            action.help = f"{(action.help or '').rstrip('. ')} ({limit})".lstrip()


def checked_by(check, prefix: str = "", range_key: str | None = None):
    """argparse type of a flag whose text ``check`` reads (refusing it with a ValueError): the refusal as argparse's
    one-line message, less ``prefix`` (the flag's name, which argparse says itself); ``range_key``: the flag's entry
    in ``ranges.RANGES`` (tests/test_ranges.py reads it), where it has one."""
    def read(text: str):
        try:
            return check(text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e).removeprefix(prefix).strip()) from None

    read.range_key = range_key
    return read


thread_count = checked_by(parse_threads, "threads ", "threads")
"""argparse type of ``--threads``: ``threads.parse_threads`` (which reads its range, ``ranges.RANGES["threads"]``)."""
worker_count = checked_by(lambda text: check_workers("", ranged("workers")(text)), range_key="workers")
"""argparse type of a count of worker processes: within its range, and ``resources.check_workers`` (at most a few
per usable core, which its help says beside the range)."""
worker_count.range_note = f", and at most {WORKERS_PER_CORE} per core this process may use"
