"""Command-line flags generated from the config dataclasses: each setting written once, on its field.

A setting's name, default, type, choices and help come from its field: ``n_envs: int = 200`` with its docstring
becomes ``--n-envs N_ENVS`` (default 200).

Types map to argparse as: bool → ``--x`` (default False) or ``--x/--no-x`` (default True); ``int``, ``float``,
``str`` and ``Path`` (optionally ``| None``) → that type; ``tuple[int, ...]`` and ``list[str]`` → one or more
values. A field's ``one_of`` options become choices, a ``metavar`` in its metadata names its value and a ``flag``
there spells the flag otherwise than the field (``engines`` as ``--engine``).
"""
from __future__ import annotations

import argparse
import ast
import dataclasses
import functools
import inspect
import textwrap
import types
import typing

from workflow_rl.rl.config import flag


@functools.cache
def field_docs(cls) -> dict[str, str]:
    """Each field's attribute docstring (the string literal under it in the class body), whitespace collapsed and
    reST's double backticks dropped: it is read as ``--help`` text."""
    body = ast.parse(textwrap.dedent(inspect.getsource(cls))).body[0].body
    docs = {}
    for node, after in zip(body, body[1:]):
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str)):
            docs[node.target.id] = " ".join(after.value.value.split()).replace("``", "")
    return docs


def _value_type(hint):
    """The type a flag's values have: ``X | None`` is ``X``."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return next(a for a in typing.get_args(hint) if a is not type(None))
    return hint


def argparse_kind(hint, default, name: str | None = None, check: bool = False, command: str | None = None) -> dict:
    """How argparse reads a field of type ``hint``: a number's type is its range's (``ranges.RANGES``' entry for
    ``name`` of ``command``), parsed here and checked by its config's ``validate()``, or here too with ``check`` (a
    KeyError where the table has no range for it)."""
    from workflow_rl.cli.numbers import Ranged
    from workflow_rl.ranges import key

    tp = _value_type(hint)
    if tp is bool:
        return {"action": argparse.BooleanOptionalAction if default else "store_true"}
    nargs = {}
    if typing.get_origin(tp) in (tuple, list):
        nargs, tp = {"nargs": "+"}, typing.get_args(tp)[0]
    if tp in (int, float):
        return {**nargs, "type": Ranged(key(name, command), tp, check=check)}
    return {**nargs, "type": tp}


def add_flags(group, cls, defaults: dict, skip=(), check: bool = False, prefix: str = "", note: str = "",
              notes: dict | None = None, command: str | None = None) -> list[str]:
    """One flag per field of dataclass ``cls`` (nested dataclasses and ``skip`` excepted), with its default taken
    from ``defaults`` (a config instance's flat settings), its numbers checked against their ranges (``command``'s
    own entries first) as typed with ``check``, and ``choices``, ``metavar``, ``nargs`` or ``flag`` from its
    metadata; ``prefix`` goes before each name (flag, dest and range key: ``plan_`` makes ``--plan-top-k``), and
    ``note`` (or the field's entry in ``notes``) after each help text. Returns the field names, which are the
    flags' dests without the prefix."""
    hints = typing.get_type_hints(cls)
    docs = field_docs(cls)
    names = []
    for f in dataclasses.fields(cls):
        if f.name in skip or dataclasses.is_dataclass(hints[f.name]):
            continue
        default, name = defaults[f.name], prefix + f.name
        kind = {**argparse_kind(hints[f.name], default, name, check, command),
                **{k: f.metadata[k] for k in ("choices", "metavar", "nargs") if k in f.metadata}}
        text = docs.get(f.name, "").replace("%", "%%") + (notes or {}).get(f.name, note)
        group.add_argument(f.metadata.get("flag", flag(name)), dest=name, default=default, help=text, **kind)
        names.append(f.name)
    return names


def typed_options(make_parser, argv: list[str], command: str) -> frozenset[str]:
    """The options of subcommand ``command`` that the command line ``argv`` sets, whatever their values (a parsed
    namespace cannot tell a default from the same value typed): ``argv`` parsed again by a fresh parser from
    ``make_parser`` with every option's default suppressed."""
    parser = make_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    for action in sub._actions:
        action.default = argparse.SUPPRESS
    ns = parser.parse_args(argv)
    return frozenset(a.dest for a in sub._actions if hasattr(ns, a.dest))


def settings(args: argparse.Namespace, names) -> dict:
    """The parsed values of the flags ``names``, by setting name."""
    return {n: getattr(args, n) for n in names}


def config_from(cls, args: argparse.Namespace, names, **given):
    """A ``cls`` of the parsed flags ``names`` (lists as the tuples its fields hold) and the settings ``given``."""
    return cls(**{n: tuple(v) if isinstance(v, list) else v for n, v in settings(args, names).items()}, **given)


OVERWRITE_HELP = ("replace what {out} holds (default: refuse a folder that is not empty): the files a train, "
                  "search or expert-iterate run wrote there (runs.rundir.RUN_FILES) are deleted first, other files "
                  "are left alone")
"""``--overwrite`` of the commands that write a run folder (``train``, ``search``, ``expert-iterate``)."""
