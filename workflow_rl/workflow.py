"""Workflows: priority orders over the five host unit types, their encodings and distances.

A workflow is a permutation of (defender, enterprise, op_server, op_host, user); there are 120. The policy sees it as
a 25-dim one-hot (index = rank * 5 + type index); the GP search compares workflows by Kendall distance (discordant
pairs / 10) or through the 10-dim pairwise-order embedding.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import cache

import numpy as np

from workflow_rl.sim.tables import HOST_UNIT_TYPE, UNIT_TYPES

SHORT_CODES = {"D": "defender", "E": "enterprise", "OS": "op_server", "OH": "op_host", "U": "user"}
_CODE_OF = {v: k for k, v in SHORT_CODES.items()}
_ALIASES = {
    **{t: t for t in UNIT_TYPES}, **{k.lower(): v for k, v in SHORT_CODES.items()},
    "op-server": "op_server", "opserver": "op_server", "op-host": "op_host", "ophost": "op_host",
    "operational_server": "op_server", "operational_host": "op_host", "ent": "enterprise", "def": "defender",
}
NAMED = {
    "critical_first": ("D", "OS", "E", "OH", "U"),
    "enterprise_focus": ("E", "D", "OS", "OH", "U"),
    "user_priority": ("U", "D", "E", "OS", "OH"),
    "operational_focus": ("OS", "OH", "D", "E", "U"),
    "balanced": ("D", "E", "OS", "U", "OH"),
    "reverse": ("U", "OH", "E", "OS", "D"),
}


@dataclass(frozen=True, order=True)
class Workflow:
    """A priority order over the unit types, as type indices into ``UNIT_TYPES`` (highest priority first)."""

    order: tuple[int, ...]

    def __post_init__(self):
        if sorted(self.order) != list(range(len(UNIT_TYPES))):
            raise ValueError(f"a workflow must order each of the 5 unit types exactly once, got {self.order}")

    @classmethod
    def parse(cls, text: "str | Workflow | list | tuple") -> "Workflow":
        """From a named order (critical_first, ...), or type names / short codes (D,E,OS,OH,U) separated by commas,
        spaces, '>' or '-'; a list of such names works too."""
        if isinstance(text, Workflow):
            return text
        if isinstance(text, (list, tuple)):
            parts = [str(p) for p in text]
        else:
            raw = str(text).strip()
            if raw.lower() in NAMED:
                parts = list(NAMED[raw.lower()])
            else:
                for sep in (">", ";", " "):
                    raw = raw.replace(sep, ",")
                parts = [p for p in raw.split(",") if p.strip()]
        names = []
        for p in parts:
            key = p.strip().lower()
            if key not in _ALIASES:
                raise ValueError(f"unknown unit type {p.strip()!r} in workflow {text!r}: use the types "
                                 f"{', '.join(UNIT_TYPES)}, the codes D,E,OS,OH,U, or a named order "
                                 f"({', '.join(NAMED)})")
            names.append(_ALIASES[key])
        if len(names) != 5 or len(set(names)) != 5:
            dup = sorted({n for n in names if names.count(n) > 1})
            missing = [t for t in UNIT_TYPES if t not in names]
            detail = (f"repeated: {', '.join(dup)}; " if dup else "") + (
                f"missing: {', '.join(missing)}" if missing else "")
            raise ValueError(f"workflow {text!r} must list each of the 5 unit types exactly once "
                             f"({detail.strip('; ')})")
        return cls(tuple(UNIT_TYPES.index(n) for n in names))

    @property
    def names(self) -> list[str]:
        return [UNIT_TYPES[i] for i in self.order]

    @property
    def codes(self) -> str:
        return ",".join(_CODE_OF[n] for n in self.names)

    def __str__(self) -> str:
        return self.codes

    @property
    def rank(self) -> np.ndarray:
        """rank[type_index] = position of that type in the order (0 = highest priority)."""
        r = np.empty(5, np.int64)
        r[list(self.order)] = np.arange(5)
        return r

    def encode(self) -> np.ndarray:
        """25-dim one-hot, index = rank * 5 + type_index."""
        x = np.zeros(25, np.float32)
        x[np.arange(5) * 5 + np.array(self.order)] = 1.0
        return x

    def pairwise(self) -> np.ndarray:
        """10-dim pairwise-order embedding: +1 if type i precedes type j (i < j), else -1."""
        r = self.rank
        return np.array([1.0 if r[i] < r[j] else -1.0 for i, j in itertools.combinations(range(5), 2)])

    @property
    def index(self) -> int:
        """Position in :func:`all_workflows` (lexicographic order of type indices)."""
        return _INDEX[self.order]

    def host_rank(self) -> np.ndarray:
        """(13,) priority rank of each host's unit type under this workflow."""
        return self.rank[HOST_UNIT_TYPE]


def kendall(a: Workflow, b: Workflow) -> float:
    """Kendall distance: the fraction of the 10 type pairs the two orders rank differently."""
    return float(np.sum(a.pairwise() != b.pairwise()) / 10.0)


@cache
def all_workflows() -> tuple[Workflow, ...]:
    return tuple(Workflow(p) for p in itertools.permutations(range(5)))


_INDEX = {p: i for i, p in enumerate(itertools.permutations(range(5)))}


def parse_workflow_arg(text: str | None) -> Workflow | None:
    """CLI helper: 'none' (any case) means no workflow (plain PPO). An empty text is refused: it is far more
    likely an unset shell variable than a request for plain PPO."""
    if text is None or str(text).strip().lower() == "none":
        return None
    if not str(text).strip():
        raise ValueError("--workflow is empty: name a workflow (e.g. critical_first), or 'none' for plain PPO")
    return Workflow.parse(text)
