"""Reuse of a universal agent's *screen* (its greedy evaluation under all 120 workflows, ``search.universal``).

The screen is a deterministic function of the checkpoint's bytes and the evaluation settings
(:class:`ScreenSettings`: episodes, episode length, red agent, engine, evaluation seed, mode; not the device, see
there), so a search need not recompute it when it has been computed before. Three sources, tried in this order:

* ``shipped``: a shipped agent (``pretrained:NAME``) may ship its screen at the default search settings beside its
  weights (``workflow_rl/pretrained/NAME.screen.json``, written by ``python benchmarks/ship_screen.py
  NAME``); it is used only when its key is the key of this search's checkpoint and settings;
* ``cache``: a content-addressed file under the user's cache folder (:func:`cache_dir`), written atomically after
  every computed screen;
* ``computed``: the evaluation itself.

Why a key and not a name: the key is the sha256 of the checkpoint file and the settings, so new weights or any
changed setting can never be served an old screen. Files are JSON (read with ``json``, never pickle), and a file
is *validated*, not trusted: the right format and key, exactly the 120 workflows in their order, finite values,
compliance in [0, 1]; anything else is ignored with a one-line warning and the screen recomputed (and rewritten).
``WORKFLOW_RL_NO_CACHE=1`` computes every screen, reads no stored one (cache or shipped) and writes none.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from workflow_rl.checks import MAX_EPISODE_LENGTH, MAX_EPISODES, check_float, check_int, no_constant, read_json
from workflow_rl.search.records import Screened, atomic_json
from workflow_rl.checks import check_return
from workflow_rl.sim.native import WORST_REWARD
from workflow_rl.workflow import all_workflows

FORMAT = 1
"""The screen file's format (part of the key: a new format never reads an old file)."""
CACHE_ENV = "WORKFLOW_RL_CACHE"
"""Overrides the cache folder (default ``$XDG_CACHE_HOME/workflow-rl`` or ``~/.cache/workflow-rl``)."""
NO_CACHE_ENV = "WORKFLOW_RL_NO_CACHE"
"""Set (to anything but '' or '0'): compute every screen, read and write no stored one."""
SHIPPED_SUFFIX = ".screen.json"


@dataclass(frozen=True)
class ScreenSettings:
    """Everything besides the weights that determines a screen's numbers."""

    episodes: int
    length: int
    red_agent: str
    """canonical spelling (``envs.names.parse_red_agent``), so aliases share one key"""
    engine: str
    seed: int
    mode: str
    """'greedy' (the search's screen) or 'sampled'"""

    # Not the device. The native engine plays the same episodes bit for bit on the CPU and on CUDA (one rule source,
    # counter-based streams), and a greedy agent's action is the argmax of the same network on the same inputs:
    # the devices' float arithmetic differs in the last bits, so an action can differ only where two logits tie
    # within that rounding, which moves a workflow's mean by far less than the screen's own 95% interval (the
    # screen is the search's low-fidelity observation; each fine-tuned workflow is observed afresh). So a search
    # on CUDA reads the screen shipped with ``pretrained:universal`` (computed on the CPU) instead of spending
    # minutes recomputing it, and a screen computed on either device serves both.


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def screen_key(checkpoint: Path, settings: ScreenSettings, checkpoint_sha256: str | None = None) -> str:
    """The content address: sha256 over the format, the checkpoint file's sha256 (``checkpoint_sha256`` when the
    caller has it already) and the settings."""
    text = json.dumps({"format": FORMAT, "checkpoint_sha256": checkpoint_sha256 or file_sha256(checkpoint),
                       "settings": dataclasses.asdict(settings)}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def disabled() -> bool:
    return os.environ.get(NO_CACHE_ENV, "") not in ("", "0")


def cache_dir() -> Path:
    """``$WORKFLOW_RL_CACHE``, else ``$XDG_CACHE_HOME/workflow-rl`` (an absolute XDG path only, as the XDG spec
    says), else ``~/.cache/workflow-rl``."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return base / "workflow-rl"


def cache_file(key: str) -> Path:
    return cache_dir() / "screens" / f"{key}.json"


def shipped_file(weights: Path) -> Path:
    """Where a shipped agent's screen lies: beside its weights, ``NAME.screen.json``."""
    return weights.with_name(weights.stem + SHIPPED_SUFFIX)


# ------------------------------------------------------------------------------------------------ file form
def to_json(screened: list[Screened], key: str, settings: ScreenSettings, checkpoint_sha256: str) -> dict:
    return {"format": FORMAT, "key": key, "checkpoint_sha256": checkpoint_sha256,
            "settings": dataclasses.asdict(settings),
            "rows": [{"workflow": s.workflow, "mean": s.observed_reward, "ci95": s.observed_ci95,
                      "compliance": s.eval_compliance, "fixes": s.fixes} for s in screened]}


class OtherKey(ValueError):
    """A well-formed screen file of other weights or settings (a shipped screen at other settings: not damage)."""


def from_json(text: str, key: str) -> list[Screened]:
    """The screen a file holds, validated against ``key``; a ValueError saying what is wrong otherwise."""
    d = read_json(text, parse_constant=no_constant)   # 200,000-deep nesting: damage, not a RecursionError
    if not isinstance(d, dict) or d.get("format") != FORMAT:
        raise ValueError(f"not a format-{FORMAT} screen file")
    if d.get("key") != key:
        raise OtherKey("its key is not this checkpoint's and settings'")
    rows = d.get("rows")
    codes = [w.codes for w in all_workflows()]
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows) \
            or [r.get("workflow") for r in rows] != codes:
        raise ValueError(f"it does not hold the {len(codes)} workflows in order")
    # each row what its screen's episodes can score: a mean of returns of that length, an interval no wider than
    # their range, at most one fix a step (an edited 1e308 or 10**30 is finite, and the search computes with it)
    settings = d.get("settings") if isinstance(d.get("settings"), dict) else {}
    steps = check_int("settings.length", settings.get("length"), 1, MAX_EPISODE_LENGTH)
    episodes = check_int("settings.episodes", settings.get("episodes"), 1, MAX_EPISODES)
    out = []
    for r in rows:
        w = r["workflow"]
        comp = None if r.get("compliance") is None else check_float(f"{w}: compliance", r["compliance"], 0.0, 1.0)
        out.append(Screened(workflow=w, observed_reward=float(check_return(f"{w}: mean", r.get("mean"), steps)),
                            observed_ci95=float(check_float(f"{w}: ci95", r.get("ci95"), 0.0,
                                                            -steps * WORST_REWARD)),
                            eval_compliance=None if comp is None else float(comp),
                            fixes=check_int(f"{w}: fixes", r.get("fixes"), 0, episodes * steps)))
    return out


def _read(path: Path, key: str, other_key_ok: bool = False) -> list[Screened] | None:
    """The validated screen in ``path``; None (with a one-line warning) if it is there but unusable, silently if
    it is another key's and ``other_key_ok``."""
    if not path.is_file():
        return None
    try:
        return from_json(path.read_text(), key)
    except OtherKey:
        if other_key_ok:
            return None
        print(f"warning: {path}: ignored (its key is not its name); the screen is recomputed", file=sys.stderr,
              flush=True)
        return None
    except (OSError, UnicodeDecodeError, ValueError) as e:   # JSONDecodeError is a ValueError
        print(f"warning: {path}: ignored ({str(e).splitlines()[0]}); the screen is recomputed", file=sys.stderr,
              flush=True)
        return None


def write(path: Path, screened: list[Screened], key: str, settings: ScreenSettings, sha: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_json(to_json(screened, key, settings, sha), path)


# --------------------------------------------------------------------------------------------------- lookup
def screen_of(checkpoint: Path, settings: ScreenSettings, compute: Callable[[], list[Screened]],
              shipped: bool = False) -> tuple[list[Screened], str]:
    """The screen of ``checkpoint`` under ``settings`` and where it came from (one of ``search.records.SCREEN_SOURCES``): the
    shipped file (``shipped``: the checkpoint is a shipped agent), the cache, or ``compute()`` (then cached)."""
    if disabled():
        return compute(), "computed"
    sha = file_sha256(checkpoint)
    key = screen_key(checkpoint, settings, sha)
    if shipped:
        got = _read(shipped_file(checkpoint), key, other_key_ok=True)
        if got is not None:
            return got, "shipped"
    got = _read(cache_file(key), key)
    if got is not None:
        return got, "cache"
    screened = compute()
    try:
        write(cache_file(key), screened, key, settings, sha)
    except OSError as e:   # a read-only or full cache folder costs the reuse, not the search
        print(f"warning: screen not cached ({e})", file=sys.stderr, flush=True)
    return screened, "computed"

