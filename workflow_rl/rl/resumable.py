"""Whether a checkpoint can be *continued*, checked before the resumed run writes anything.

Every field a resume reads (counters, running returns, Adam state, the engine snapshot) of the type, shape and range a
run writes, checked before the resumed run writes anything.

``load_checkpoint`` checks what any reader needs (config, weights, the episode counters); a resume reads more, and
reads it only after ``BatchedTrainer.start`` has rewritten the run's ``config.json`` and trimmed its log, so a
damaged field found there would leave the run half rewritten. ``check_resumable`` is run first, by every resume
(``train --resume``, ``train --seeds N --resume``, ``search --resume``), and says what is wrong in one line.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch

from workflow_rl.checks import check_int
from workflow_rl.rl.checkpoint import MAX_WEIGHT, RECENT, CheckpointError, check_finite, check_same_run
from workflow_rl.rl.config import TrainConfig
from workflow_rl.rl.memory import Memory
from workflow_rl.rl import reward

STOP_REASONS = (None, "compliant", "post_gate", "max_episodes", "budget", "interrupted")
"""Why a run stopped (``schedule.stop_rule``, ``Trainer.run``); None: it had not."""


def check_resumable(ck: dict, cfg: TrainConfig, path: str | Path, total_envs: int | None = None) -> None:
    """Refuse (``CheckpointError`` naming ``path``) a loaded checkpoint that ``cfg`` cannot continue: another run's
    settings (``check_same_run``), counters of the wrong type or out of the range a run can reach, or (with
    ``total_envs``, the envs of the batch it resumes into) an engine snapshot that does not fit that batch."""
    same_run(ck, cfg, path)
    try:
        check_counters(ck)
        if total_envs is not None:
            check_snapshot(ck, cfg, total_envs)
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        why = str(e) if isinstance(e, ValueError) else f"{type(e).__name__}: {e}"
        raise CheckpointError(f"checkpoint {path} is damaged ({why}): use another checkpoint or retrain") from None


def same_run(ck: dict, cfg: TrainConfig, path: str | Path) -> None:
    """``check_same_run``, its refusal naming the checkpoint ``path`` (a search holds many)."""
    try:
        check_same_run(ck, cfg)
    except CheckpointError as e:
        raise CheckpointError(f"{path}: {e}") from None


def check_counters(ck: dict) -> None:
    """The counters and running statistics ``RunState.from_checkpoint`` reads, against what the run that wrote
    them can have reached under its own config: an edited counter (1e30 episodes, a gate before any episode, a
    running mean over text) is refused instead of steering the resumed run."""
    saved = TrainConfig.from_dict(ck["config"])
    c = ck["counters"]
    if not isinstance(c, dict):
        raise ValueError("counters is not a mapping")
    total = check_int("total_episodes", c["total_episodes"], 0, saved.budget)
    per_env = np.asarray(c["episodes_per_env"])
    done = int(per_env.min()) if per_env.size else 0
    step = max(saved.update_every_steps, saved.episode_length)
    # every episode round finishes at least one episode, and each update advances at least one step
    glob = check_int("global_step", c["global_step"], 0, (total + 1) * step)
    check_int("update", c["update"], 0, glob)
    if "round_active" in c:
        check_int("round_active", c["round_active"], 0, saved.n_envs)
    comp = c["last_compliance"]
    if isinstance(comp, bool) or not isinstance(comp, (int, float)) or not (math.isnan(comp) or 0 <= comp <= 1):
        raise ValueError(f"last_compliance must be a number in [0, 1] (or nan), got {comp!r}")
    if c.get("stop_reason") not in STOP_REASONS:
        raise ValueError(f"stop_reason {c.get('stop_reason')!r} is not one of "
                         f"{', '.join(str(r) for r in STOP_REASONS)}")
    gate_at, gate_episodes = c.get("gate_at"), c.get("gate_episodes")
    if (gate_at is None) != (gate_episodes is None):
        raise ValueError("gate_at and gate_episodes must both be set or both be None")
    if gate_at is not None:
        check_int("gate_at", gate_at, 0, done)
        check_int("gate_episodes", gate_episodes, 0, total)
    recent = ck["recent"]
    if not isinstance(recent, (list, tuple)) or len(recent) > RECENT:
        raise ValueError(f"recent must be a list of at most {RECENT} returns")
    if any(isinstance(r, bool) or not isinstance(r, (int, float)) or not math.isfinite(r) for r in recent):
        raise ValueError("recent must hold finite returns")
    if len(recent) > total:
        raise ValueError(f"recent holds {len(recent)} returns, more than total_episodes {total}")
    if not isinstance(ck["optimizer"], dict):
        raise ValueError("optimizer state is not a mapping")
    check_optimizer(ck["optimizer"], ck["agent"], saved, c["update"])


def check_optimizer(opt: dict, weights: dict, cfg: TrainConfig, updates: int) -> None:
    """The Adam state ``StackedAdam.load_member_state`` reads, against the weights it goes with and the run that
    wrote it: no state (before a first step), or one entry per weight tensor, in order, each a step count and two
    moments of that tensor's shape (an edited shape would fail inside the optimizer, or reshape silently); the
    second moment >= 0 (its square root divides), the first within :data:`MAX_WEIGHT`; one step count for all, a
    whole number in 1..the optimizer steps ``updates`` updates can take (every epoch's minibatches, each of at
    least one transition): a step of -1 or 1e9 would bend Adam's bias correction for the rest of the run."""
    state = opt.get("state")
    if not isinstance(state, dict):
        raise ValueError("optimizer state has no 'state' mapping")
    if not state:
        return
    shapes = [tuple(w.shape) for w in weights.values()]
    if set(state) != set(range(len(shapes))):
        raise ValueError(f"optimizer state has {len(state)} entries ({', '.join(map(repr, list(state)[:3]))}, ...), "
                         f"the network's weights are 0..{len(shapes) - 1}")
    most = updates * cfg.ppo.update_epochs * cfg.n_envs * max(cfg.update_every_steps, cfg.episode_length)
    steps = set()
    for i, shape in enumerate(shapes):
        e = state[i]
        if not isinstance(e, dict) or set(e) != {"step", "exp_avg", "exp_avg_sq"}:
            raise ValueError(f"optimizer state of weight {i} is not a step and two moments")
        for name in ("exp_avg", "exp_avg_sq"):
            m = e[name]
            if not isinstance(m, torch.Tensor) or not m.dtype.is_floating_point or tuple(m.shape) != shape:
                raise ValueError(f"optimizer {name} of weight {i} has shape "
                                 f"{tuple(m.shape) if isinstance(m, torch.Tensor) else type(m).__name__}, the "
                                 f"weight's is {shape}")
        check_finite(f"optimizer moments of weight {i}", e["exp_avg"], MAX_WEIGHT)
        check_finite(f"optimizer moments of weight {i}", e["exp_avg_sq"], MAX_WEIGHT ** 2)
        if bool((e["exp_avg_sq"] < 0).any()):
            raise ValueError(f"optimizer exp_avg_sq of weight {i} holds negative values")
        step = e["step"]
        if isinstance(step, torch.Tensor) and step.numel() == 1 and not step.dtype == torch.bool:
            step = step.item()
        if isinstance(step, bool) or not isinstance(step, (int, float)) or not float(step).is_integer():
            raise ValueError(f"optimizer step of weight {i} is not a whole number (got {step!r})")
        steps.add(int(step))
    if len(steps) != 1:
        raise ValueError(f"optimizer steps differ between weights ({', '.join(map(str, sorted(steps)))})")
    check_int("optimizer step", steps.pop(), 1, max(1, most))


def snapshot_reference(cfg: TrainConfig, total_envs: int) -> dict:
    """What an engine snapshot of a batch of ``total_envs`` envs under ``cfg`` holds (``BatchedTrainer.
    engine_snapshot``), as zeros of the right types and shapes, built without an engine."""
    from workflow_rl.sim.native import SimState, allocate_buffers, allocate_state

    buf = allocate_buffers(total_envs)
    f64 = torch.zeros(total_envs, dtype=torch.float64)
    return {"rng": {"generator": torch.Generator(device=cfg.device).get_state(), "torch": torch.get_rng_state()},
            "env_state": dict(zip(SimState._fields, allocate_state(total_envs))), "obs": buf.obs,
            "access": buf.access, "tracker": {"compliant": f64, "violations": f64, "neutral": f64},
            "episode_running": {t.name: f64 for t in reward.TERMS}, "memory": Memory.of(cfg.ppo).blank(total_envs)}


def check_snapshot(snap: dict, cfg: TrainConfig, total_envs: int) -> None:
    """The engine snapshot in ``snap`` (a checkpoint or a batch file) fits a batch of ``total_envs`` envs under
    ``cfg``: each field None where a run may leave it out (no snapshot: fresh episodes), else of the type, shape and
    dtype the batch holds, and finite."""
    ref = snapshot_reference(cfg, total_envs)
    if snap.get("rng") is not None:
        check_like("rng", snap["rng"], ref["rng"])
    if snap.get("env_state") is None or cfg.engine == "cyborg":   # nothing else of the snapshot is read
        return
    check_like("env_state", snap["env_state"], ref["env_state"], partial=True)   # older snapshots lack newer fields
    for name in ("obs", "access", "tracker"):
        check_like(name, snap.get(name), ref[name])
    check_like("episode_running", snap.get("episode_running"), ref["episode_running"], partial=True)
    running = snap["episode_running"]
    for t in reward.active([cfg]):   # a term added since the checkpoint was written may be missing: at weight 0
        if t.name not in running:
            raise ValueError(f"episode_running.{t.name} is missing")
    saved = None
    if ref["memory"] is not None:
        saved = snap.get("memory", snap.get("decoys_placed"))
        if saved is None:
            raise ValueError("memory is missing: the run was written with other --decoy-memory/--red-memory "
                             "settings")
        check_like("memory", saved, ref["memory"])
    check_snapshot_values(snap, cfg, saved)


def check_snapshot_values(snap: dict, cfg: TrainConfig, memory) -> None:
    """Every number of an engine snapshot (its types and shapes already checked) against what a run under ``cfg``
    can have written, each by the code that owns the field: the engine state (``sim.native.check_state``, which
    also wants every env at the batch's step in the episode), the observations, access levels and episode returns
    (``sim.native.check_outputs``), the compliance counts (``ComplianceTracker.check_state``) and the episode
    memory (``Memory.check_state``). The batch's step is its ``global_step`` (a batch state's own, or the
    checkpoint's counter), every env being ``global_step % episode_length`` steps into its episode."""
    from workflow_rl.rl.compliance import ComplianceTracker
    from workflow_rl.sim.native import check_outputs, check_state

    steps = (snap["global_step"] if "global_step" in snap else snap["counters"]["global_step"]) % cfg.episode_length
    check_state(snap["env_state"], cfg.episode_length, steps)
    check_outputs(_host(snap["obs"]), _host(snap["access"]), _host(snap["episode_running"]["env"]), steps)
    ComplianceTracker.check_state(snap["tracker"], steps)
    if memory is not None:
        Memory.of(cfg.ppo).check_state(memory, steps)


def _host(x) -> np.ndarray:
    """A saved array (a numpy array, or a tensor on whatever device the file was loaded to) as a numpy array."""
    return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


def check_like(name: str, value, ref, partial: bool = False) -> None:
    """``value`` has ``ref``'s structure: a mapping with its keys (``partial``: a subset of them), or an array
    (tensor or numpy) of its shape and kind of dtype, finite if floating."""
    if isinstance(ref, dict):
        if not isinstance(value, dict):
            raise ValueError(f"{name} is not a mapping")
        for k in ref:
            if k in value:
                check_like(f"{name}.{k}", value[k], ref[k])
            elif not partial:
                raise ValueError(f"{name}.{k} is missing")
        return
    if isinstance(value, torch.Tensor):
        shape, kind = tuple(value.shape), _kind(value)
    elif isinstance(value, np.ndarray):
        shape, kind = value.shape, _kind(value)
    else:
        raise ValueError(f"{name} is not an array (got {type(value).__name__})")
    want = tuple(ref.shape)
    if shape != want or kind != _kind(ref):
        raise ValueError(f"{name} has shape {shape} ({kind}), this run's has {want} ({_kind(ref)})")
    if kind == "float" and not bool(torch.isfinite(torch.as_tensor(value)).all()):
        raise ValueError(f"{name} holds values that are not finite")


def _kind(a) -> str:
    if isinstance(a, torch.Tensor):
        return "bool" if a.dtype == torch.bool else "float" if a.dtype.is_floating_point else "int"
    return {"b": "bool", "f": "float"}.get(a.dtype.kind, "int" if a.dtype.kind in "iu" else a.dtype.kind)
