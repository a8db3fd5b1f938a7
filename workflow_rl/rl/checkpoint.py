"""Checkpoint files: written atomically, loaded with one clear error per way a file can be unusable.

Atomic writes, loading with one clear error per way a file can be unusable, and the check that a checkpoint belongs to
the run that wants to continue it.
"""
from __future__ import annotations

import math
import re
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from workflow_rl.checks import check_int, check_same
from workflow_rl.rl.compliance import WorkflowWindow
from workflow_rl.rl.config import DECLARED, TrainConfig
from workflow_rl.rl.memory import Memory
from workflow_rl.rl.ppo import Agent
from workflow_rl.files import atomic_write
from workflow_rl.workflow import Workflow

CHECKPOINT_VERSION = 1
RECENT = 100
"""episodes in the running mean of returns (``mean100``)."""


@dataclass
class RunState:
    """A training run's counters: what its log rows, stop rule and summary read, and what a checkpoint must hold
    to continue it. ``to_checkpoint``/``from_checkpoint`` are the one place the checkpoint format is written and
    read."""

    n_envs: int
    update: int = 0
    global_step: int = 0
    total_episodes: int = 0
    episodes_per_env: np.ndarray = None
    round_active: int = 0
    last_compliance: float = float("nan")
    last_counted: float = 0.0
    stop_reason: str | None = None
    gate_at: int | None = None
    """episodes per env (the fewest any env finished) when the compliance gate fired; None: not yet"""
    gate_episodes: int | None = None
    """training episodes of the run when the gate fired"""
    recent: deque = field(default_factory=lambda: deque(maxlen=RECENT))
    window: WorkflowWindow | dict | None = None
    """a run across workflows: each workflow's recent fix counts (a :class:`WorkflowWindow`; as read from a
    checkpoint, its plain ``state``, until the run rebuilds it)"""

    def __post_init__(self):
        if self.episodes_per_env is None:
            self.episodes_per_env = np.zeros(self.n_envs, np.int64)
        if not self.round_active:
            self.round_active = self.n_envs

    def finish_update(self, steps: int, fin_returns: list[float], compliance: float, counted: float) -> None:
        """Count one update of ``steps`` steps whose finished episodes had ``fin_returns``."""
        self.update += 1
        self.global_step += steps
        self.total_episodes += len(fin_returns)
        self.recent.extend(fin_returns)
        self.last_compliance, self.last_counted = compliance, counted

    def to_checkpoint(self, cfg: TrainConfig, workflow: Workflow | None, agent: dict, optimizer: dict,
                      engine: dict | None = None) -> dict:
        """The checkpoint of this run: weights, Adam state, counters and, where the engine can be snapshotted and
        the run is mid-episode, ``engine`` (RNG, engine state, current observations, compliance counts and episode
        sums: see ``BatchedTrainer.engine_snapshot``)."""
        e = engine or {}
        return {
            "format": "workflow-rl", "version": CHECKPOINT_VERSION, "config": cfg.to_dict(),
            "workflow": workflow.names if workflow else None, "agent": agent, "optimizer": optimizer,
            "counters": {"update": self.update, "global_step": self.global_step,
                         "total_episodes": self.total_episodes, "episodes_per_env": self.episodes_per_env.copy(),
                         "stop_reason": self.stop_reason, "last_compliance": self.last_compliance,
                         "round_active": self.round_active, "gate_at": self.gate_at,
                         "gate_episodes": self.gate_episodes,
                         "workflow_window": self.window.state() if self.window is not None else None},
            "rng": e.get("rng"), "env_state": e.get("env_state"), "obs": e.get("obs"), "access": e.get("access"),
            "tracker": e.get("tracker"), "episode_running": e.get("episode_running"),
            "memory": e.get("memory"), "recent": list(self.recent),
        }

    @classmethod
    def from_checkpoint(cls, ck: dict, n_envs: int) -> "RunState":
        """The counters to continue from. The stop reason is not carried over: a resumed run trains on under its
        (possibly larger) limits, and stops again at once if they are already met."""
        c = ck["counters"]
        return cls(n_envs, update=c["update"], global_step=c["global_step"], total_episodes=c["total_episodes"],
                   episodes_per_env=np.asarray(c["episodes_per_env"]).copy(),
                   round_active=c.get("round_active", n_envs), last_compliance=c["last_compliance"],
                   gate_at=c.get("gate_at"), gate_episodes=c.get("gate_episodes"),
                   recent=deque(ck["recent"], maxlen=RECENT), window=c.get("workflow_window"))


class CheckpointError(ValueError):
    """A checkpoint that cannot be used (corrupt, wrong version, or from a different configuration)."""


def atomic_save(obj, path: Path) -> None:
    """torch.save to a temporary file in the same folder, fsync, then rename over ``path``. A write that fails
    (full disk, file-size limit) raises its OSError: torch's zip writer, closing after the failed write, can raise a
    RuntimeError of its own ("unexpected pos") that would otherwise hide it from the callers' one-line report."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path, "wb") as f:
        try:
            torch.save(obj, f)
        except RuntimeError as e:
            if isinstance(e.__context__, OSError):
                raise e.__context__ from None
            raise


def _numpy_globals() -> list:
    """The numpy names a checkpoint's pickle may call: rebuilding an ndarray of a plain numeric dtype (the engine
    state and the per-env counters are numpy arrays). Nothing else outside torch's own weights-only set: a file
    that names any other callable (``os.system``, a class with a ``__reduce__``) is refused before it is run."""
    core = np._core if hasattr(np, "_core") else np.core   # numpy 2 renamed numpy.core; pickles hold either name
    reconstruct = core.multiarray._reconstruct
    return [(reconstruct, "numpy._core.multiarray._reconstruct"), (reconstruct, "numpy.core.multiarray._reconstruct"),
            np.ndarray, np.dtype, *{type(np.dtype(c)) for c in "?bhilqBHILQefdg"}]


MAX_DEPTH = 32
"""How deeply a file's containers may nest. A workflow-rl file nests at most six deep (checkpoint, optimizer, its
state, a parameter's entry, a moment); a pickle of 200,000 nested lists loads (the unpickler is a loop), but every
reader that walks it would exhaust Python's recursion, and a list holding itself would never end."""

TENSOR_DTYPES = (torch.float32, torch.float64, torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8,
                 torch.bool)
"""The tensor dtypes workflow-rl files hold: float32 weights, observations and Adam state, float64 episode sums and
compliance counts, integer red access, workflow ranks and memory, uint8 random-generator states. Anything else
(complex numbers, whose NaN parts ``is_floating_point`` does not see; half precision; quantized integers) is no
file of this project."""

ARRAY_DTYPES = tuple(np.dtype(c) for c in ("?", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f4", "f8"))
"""The numpy dtypes workflow-rl files hold (engine state, per-env counters), in this machine's byte order: an
object array could carry arbitrary objects, a byte-swapped one reaches the compiled kernels as another number."""

MAX_WEIGHT = 1e6
"""The largest weight (and Adam first moment) a checkpoint may hold. Adam moves a weight by about one learning
rate a step (its update is the ratio of two moments), so a run of a million steps at the default 2.5e-4 drifts by
a few hundred at most; the shipped agents' weights are below 1. A weight of 3e38 is finite, yet every forward pass
through it overflows to inf and NaN: an edited or broken file, refused like a NaN weight."""


def safe_load(path: Path, device: str = "cpu", what: str = "checkpoint",
              fix: str = "use another checkpoint or retrain"):
    """``torch.load`` that cannot run code: torch's weights-only unpickler (tensors, containers, numbers, strings)
    with numeric numpy arrays allowed and nothing else, then every container, tensor and array checked for what it
    is (:func:`check_contents`) before anything reads a value from it. Raises ``CheckpointError`` naming the file
    for anything else: a checkpoint from another user is data, never a program."""
    path = Path(path)
    try:
        with torch.serialization.safe_globals(_numpy_globals()):
            obj = torch.load(path, map_location=device, weights_only=True)
    except Exception as e:  # noqa: BLE001 - any unpickling failure (incl. a refused global) means unusable
        called = re.search(r"GLOBAL (\S+)|but got <class '([^']+)'>", str(e))
        if called:
            raise CheckpointError(f"{what} {path} needs {called.group(1) or called.group(2)} to load, which no "
                                  f"workflow-rl file does (a pickle can run code): it was refused unread; {fix}") \
                from None
        raise CheckpointError(f"{what} {path} is damaged: corrupt or not a workflow-rl {what} "
                              f"({type(e).__name__}); {fix}") from None
    try:
        check_contents(obj)
    except ValueError as e:
        raise CheckpointError(f"{what} {path} holds {e}, which no workflow-rl file does: {fix}") from None
    return obj


def check_contents(obj) -> None:
    """Everything in a loaded file checked for what it is, without reading a value (a ValueError saying what, to
    follow "holds"): containers nested at most :data:`MAX_DEPTH` deep; every tensor a plain one
    (:func:`tensor_problem`), every numpy array a plain numeric one (:func:`array_problem`). Only then may a reader
    compute on it: a zero-stride 10^7 x 10^7 tensor (4 bytes on disk) would be materialised by the first
    ``isfinite``, a sparse one fails in the first operation, a planted attribute can shadow a tensor's methods."""
    for leaf in _leaves(obj, (torch.Tensor, np.ndarray)):
        problem = tensor_problem(leaf) if isinstance(leaf, torch.Tensor) else array_problem(leaf)
        if problem:
            raise ValueError(problem)


def tensor_problem(t: torch.Tensor) -> str | None:
    """What makes ``t`` something other than a tensor workflow-rl writes, or None: its exact type is
    ``torch.Tensor`` (or a ``Parameter``) with no instance attributes (the unpickler's tensor rebuild can set any:
    ``is_floating_point`` shadowed by a callable returning a falsy value hid NaN weights), no gradient attached,
    a dense strided layout (not sparse, quantized, nested or meta), a dtype of :data:`TENSOR_DTYPES`, and no
    more elements than its storage holds (a view of part of a storage is fine; a zero-stride expansion, many
    elements from a few bytes, is not: the first operation would materialise it). Checked in this order, so each
    test runs on what the earlier ones established."""
    if type(t) not in (torch.Tensor, torch.nn.Parameter):
        return f"a tensor of type {type(t).__name__}"
    if vars(t):
        return f"a tensor carrying attributes ({', '.join(map(str, vars(t)))})"
    special = [k for k, is_k in (("sparse", t.layout != torch.strided), ("quantized", t.is_quantized),
                                 ("nested", t.is_nested), ("meta", t.is_meta)) if is_k]
    if special:
        return f"a {'/'.join(special)} tensor, not a plain dense array"
    if t.dtype not in TENSOR_DTYPES:
        return f"a {t.dtype} tensor (files hold {', '.join(str(d).replace('torch.', '') for d in TENSOR_DTYPES)})"
    if t.grad is not None:
        return "a tensor with a gradient attached"
    if t.numel() * t.element_size() > t.untyped_storage().nbytes():
        return (f"a tensor of shape {tuple(t.shape)} with more elements than its data holds (strides {t.stride()}, "
                f"{t.untyped_storage().nbytes()} bytes stored)")
    return None


def array_problem(a: np.ndarray) -> str | None:
    """What makes ``a`` something other than a numpy array workflow-rl writes, or None: exactly ``np.ndarray``, a
    dtype of :data:`ARRAY_DTYPES`, and contiguous data (as numpy's unpickling makes it: no zero or overlapping
    strides)."""
    if type(a) is not np.ndarray:
        return f"an array of type {type(a).__name__}"
    if a.dtype not in ARRAY_DTYPES:
        return f"an array of dtype {a.dtype.str} (files hold {', '.join(d.str for d in ARRAY_DTYPES)})"
    if not (a.flags.c_contiguous or a.flags.f_contiguous):
        return f"an array of shape {a.shape} whose data is not laid out in full (strides {a.strides})"
    return None


def _leaves(obj, kind):
    """Every ``kind`` (numpy array, torch tensor, or a tuple of such types) inside nested dicts, lists and tuples,
    each container visited once (a pickle can share one container many times, or make one hold itself); a
    ValueError where they nest deeper than :data:`MAX_DEPTH`. A loop, not a recursion: a deep file is refused,
    never a ``RecursionError``."""
    stack, seen = [(obj, 0)], set()
    while stack:
        x, depth = stack.pop()
        if isinstance(x, kind):
            yield x
        elif isinstance(x, (dict, list, tuple)):
            if depth >= MAX_DEPTH:
                raise ValueError(f"containers nested deeper than {MAX_DEPTH} levels")
            if id(x) in seen:
                continue
            seen.add(id(x))
            stack.extend((v, depth + 1) for v in reversed(list(x.values() if isinstance(x, dict) else x)))


def check_finite(what: str, obj, bound: float = math.inf) -> None:
    """Every floating-point tensor in ``obj`` finite and, with ``bound``, at most that in magnitude: a NaN weight
    evaluates to numbers and trains on to NaN losses without a word, so it is refused where it is read. The dtype
    is read from the tensor's class (``torch.Tensor.dtype``, which no attribute can shadow); files are loaded by
    :func:`safe_load`, which admits real dtypes only."""
    for t in _leaves(obj, torch.Tensor):
        if torch.Tensor.dtype.__get__(t).is_floating_point:
            if not bool(torch.isfinite(t).all()):
                raise ValueError(f"{what} hold NaN or infinite values")
            if t.numel() and float(t.abs().max()) > bound:
                raise ValueError(f"{what} hold a value of {float(t.abs().max()):.3g}, beyond {bound:g}: the file is "
                                 "broken or edited")


def load_checkpoint(path: Path, device: str = "cpu") -> dict:
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"no checkpoint at {path}: pass a file written by `workflow-rl train`")
    ck = safe_load(path, device)
    if not isinstance(ck, dict) or ck.get("format") != "workflow-rl" or "agent" not in ck:
        raise CheckpointError(f"{path} is not a workflow-rl checkpoint: use a file written by `workflow-rl train`")
    if ck.get("version") != CHECKPOINT_VERSION:
        raise CheckpointError(f"checkpoint {path} has version {ck.get('version')}, this workflow-rl reads "
                              f"{CHECKPOINT_VERSION}: retrain, or use the workflow-rl release that wrote it")
    try:
        check_fields(ck)
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        why = str(e) if isinstance(e, ValueError) else f"{type(e).__name__}: {e}"
        raise CheckpointError(f"checkpoint {path} is damaged ({why}): use another checkpoint or retrain") from None
    return ck


def check_fields(ck: dict) -> None:
    """The fields a resume, an evaluation or an inheritance reads, checked for type, range and consistency: its
    config (every setting's type and range), the weights and the counters."""
    cfg = TrainConfig.from_dict(ck["config"])
    cfg.validate_settings()
    if not isinstance(ck["agent"], dict) or not ck["agent"]:
        raise ValueError("agent weights are missing")
    check_network(ck["agent"], cfg)
    check_finite("its weights", ck["agent"], MAX_WEIGHT)
    check_finite("its optimizer state", ck.get("optimizer"))
    c = ck["counters"]
    for name in ("update", "global_step", "total_episodes", "round_active"):
        if name in c:
            check_int(name, c[name], 0)
    per_env = np.asarray(c["episodes_per_env"])
    if per_env.shape != (cfg.n_envs,) or per_env.dtype.kind not in "iu" or (per_env < 0).any():
        raise ValueError(f"episodes_per_env is not {cfg.n_envs} counts >= 0")
    if int(per_env.sum()) > c["total_episodes"]:
        raise ValueError(f"episodes_per_env sums to {int(per_env.sum())}, more than total_episodes "
                         f"{c['total_episodes']}")


def network_shapes(cfg: TrainConfig) -> dict[str, tuple[int, ...]]:
    """{name: shape} of the weights of the network ``cfg`` describes (``Agent.state_dict()``), from the network
    itself built on the meta device: no memory, no draw from the random streams."""
    with torch.device("meta"):
        agent = Agent(tuple(cfg.ppo.hidden), Memory.of(cfg.ppo))
    return {k: tuple(v.shape) for k, v in agent.state_dict().items()}


def check_network(weights: dict, cfg: TrainConfig) -> None:
    """The weights are those of the network the checkpoint's config describes, name for name and shape for shape,
    checked before any network is built from the config: a config claiming layers the file does not hold (hidden
    [10**9] beside 64-wide weights) would otherwise allocate first and fail after."""
    want = network_shapes(cfg)
    got = {k: tuple(v.shape) if isinstance(v, torch.Tensor) else type(v).__name__ for k, v in weights.items()}
    if got != want:
        diff = next((k for k in want if got.get(k) != want[k]), None) or next(k for k in got if k not in want)
        raise ValueError(f"its weights do not fit the network its config describes (--hidden "
                         f"{' '.join(map(str, cfg.ppo.hidden))}, {Memory.of(cfg.ppo).flags}): {diff} is "
                         f"{got.get(diff, 'missing')}, the network's is {want.get(diff, 'absent')}")


SAME_RUN = tuple(n for n, d in DECLARED.items() if d.resume == "must_match")
"""The settings (flat: PPO's too) a resumed run must share with its checkpoint, those declared ``resume="must_match"``
(``rl.config.setting``): what it trains against, on what, how its reward is made. Budget, stop rule, device and
bookkeeping may differ."""


def check_same_run(ck: dict, cfg: TrainConfig) -> None:
    """Refuse to continue a checkpoint under settings that would make it a different run: a resumed run that
    silently trained on with another learning rate or reward would not be the run its files name. Starting a new
    run from the checkpoint's weights under new settings is what ``--init-checkpoint`` is for."""
    check_same(TrainConfig.from_dict(ck["config"]).flat(), cfg.flat(), SAME_RUN, "checkpoint",
               "resume with the original settings, or start a new run from its weights with --init-checkpoint",
               error=CheckpointError)


def agent_from_checkpoint(ck: dict, device: str | torch.device) -> Agent:
    """The network a loaded checkpoint ``ck`` holds, built on ``device``. No default: an agent built where the run
    does not compute fails at its first step ("Expected all tensors to be on the same device"); commands load
    through :func:`workflow_rl.rl.pretrained.load_agent`, which passes the run's device."""
    ppo = ck["config"]["ppo"]
    agent = Agent(tuple(ppo["hidden"]), Memory.of(ppo), tuple(ppo.get("opening", ()))).to(device)
    try:
        agent.load_state_dict(ck["agent"])
    except RuntimeError as e:
        raise CheckpointError(f"checkpoint weights do not fit the network ({e.__class__.__name__}): the file is "
                              "damaged or was edited; retrain") from None
    return agent


BATCH_STATE_FIX = "delete it and resume again (the runs then continue from their checkpoints on fresh episodes)"
"""What to do about a batch state file that cannot be used: it is an optimisation of a resume, never required."""


def load_batch_state(path: Path, device: str = "cpu") -> dict:
    """A batch's own state file (``train --seeds``' ``batch.pt``, a batched search's ``search_batch.pt``), written
    with :func:`atomic_save` beside the runs' checkpoints: the one place such files are read, as safely as a
    checkpoint (:func:`safe_load`). A damaged one is refused naming the fix (without it the runs still resume, on
    fresh episodes)."""
    snap = safe_load(path, device, what="batch state", fix=BATCH_STATE_FIX)
    if not isinstance(snap, dict):
        raise CheckpointError(f"batch state {path} is damaged ({type(snap).__name__}): {BATCH_STATE_FIX}")
    return snap
