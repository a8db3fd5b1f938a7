"""Episode recordings for ``workflow-rl replay``, written as one self-contained HTML page.

Play whole episodes of an agent and keep, step by step, what a person needs to see what the defender does (red's true
access per host, both sides' actions, the reward, the workflow's target type and how blue's fix is classed), then write
them as one self-contained HTML page.

Everything is read through the env contract (``make_vector_env``: ``info["red_access"]``, ``info["red_action"]``)
and the compliance rule is :mod:`workflow_rl.rl.compliance`'s (its tracker counts, :func:`target_types` names the
target), so the page shows what training and evaluation count, on either engine.
"""
from __future__ import annotations

import json
from importlib import resources

import numpy as np
import torch

from workflow_rl.envs.factory import make_vector_env, parse_red_agent
from workflow_rl.rl.actor import ActFn, start_round
from workflow_rl.rl.compliance import ComplianceTracker, ratio, target_types
from workflow_rl.sim import tables as T
from workflow_rl.workflow import Workflow

ACCESS = ("none", "user", "privileged")
FIX_CLASSES = ("compliant", "violation", "neutral")


def _at(info: dict, key: str, truncated: np.ndarray) -> np.ndarray:
    """``info[key]`` of the step just taken in every env: for an env whose episode just ended, the value of its
    last step from ``final_info`` (same-step autoreset puts the new episode's in ``info``)."""
    final = info.get("final_info") or {}
    now = np.array(info[key] if key in info else final[key])   # CybORG's vector envs: only the reset's info
    if truncated.any() and key in final:
        mask = np.asarray(final.get(f"_{key}", truncated)) & truncated
        now[mask] = np.asarray(final[key])[mask]
    return now


def record_episodes(act: ActFn, red_agent: str, episodes: int, length: int = 100, engine: str = "native",
                    seed: int = 0, workflow: Workflow | None = None, device: str = "cpu",
                    **engine_options) -> list[dict]:
    """Play ``episodes`` episodes of ``length`` steps side by side (env i: episode i of ``reset(seed)``) and return
    one dict per episode (see :func:`_episode`). ``workflow`` (or None) is the order compliance is judged by.
    ``device``: where the engine runs and ``act`` is handed the observations (the native engine's CPU or CUDA
    build, as in ``evaluate``); what the page records is read back on the CPU."""
    red = parse_red_agent(red_agent)
    env = make_vector_env(episodes, red, engine=engine, episode_length=length, seed=seed, device=device,
                          **engine_options)
    rank = torch.as_tensor(workflow.rank if workflow else np.arange(5))
    tracker = ComplianceTracker(episodes)
    try:
        obs, info = env.reset(seed=seed)
        start_round(act, seed)
        access = np.asarray(info["red_access"]).copy()
        rows = {k: [] for k in ("access", "red", "blue", "reward", "target", "fix", "compliance")}
        start_access = access.copy()
        for t in range(length):
            a = act(torch.as_tensor(np.asarray(obs), dtype=torch.float32, device=device), t).to(torch.int64).cpu()
            before = torch.as_tensor(access)   # blue's fix is judged on the state it acted in
            target, any_comp = target_types(before, rank)
            counts = (tracker.compliant.clone(), tracker.violations.clone(), tracker.neutral.clone())
            tracker.step(a, before, rank, 0.0)
            delta = torch.stack([tracker.compliant - counts[0], tracker.violations - counts[1],
                                 tracker.neutral - counts[2]], 1) > 0
            obs, reward, _, truncated, info = env.step(a.numpy())
            truncated = np.asarray(truncated)
            access = _at(info, "red_access", truncated)
            rows["access"].append(access.copy())
            rows["red"].append(_at(info, "red_action", truncated))
            rows["blue"].append(a.numpy())
            rows["reward"].append(np.asarray(reward, np.float64))
            rows["target"].append(np.where(any_comp.numpy(), target.numpy(), -1))
            rows["fix"].append(np.where(delta.any(1).numpy(), delta.to(torch.int64).argmax(1).numpy(), -1))
            rows["compliance"].append(ratio(tracker.compliant, tracker.violations).numpy())
    finally:
        env.close()
    arrays = {k: np.stack(v, 1) for k, v in rows.items()}   # (episodes, length, ...)
    return [_episode(i, seed, red, workflow, start_access[i], {k: v[i] for k, v in arrays.items()},
                     (float(tracker.compliant[i]), float(tracker.violations[i]), float(tracker.neutral[i])))
            for i in range(episodes)]


def _episode(index: int, seed: int, red: str, workflow: Workflow | None, start_access: np.ndarray, r: dict,
             counts: tuple[float, float, float]) -> dict:
    """One episode as plain JSON data: per step (t = 1..length; ``access0`` is the state after reset) red's true
    access after the step, both actions (names, targets, red's success), the reward and running return, the target
    type blue's fix is judged against (from the access before blue acted) and how the fix is classed; and a
    summary: return, compliance, and for each host the steps red held user and privileged access and when red
    first held it privileged."""
    ret = np.cumsum(r["reward"])
    steps = []
    for t in range(len(ret)):
        kind, target, ok = (int(x) for x in r["red"][t])
        blue = int(r["blue"][t])
        tt = int(r["target"][t])
        steps.append({
            "access": [int(x) for x in r["access"][t]],
            "red": T.red_action_name(kind, target, ok), "red_kind": T.RED_ACTIONS[kind],
            "red_host": target if target >= 0 and kind != T.R_DRS else -1, "red_ok": bool(ok),
            "blue": T.blue_action_name(blue), "blue_host": T.blue_action_host(blue),
            "reward": round(float(r["reward"][t]), 4), "return": round(float(ret[t]), 4),
            "target": T.UNIT_TYPES[tt] if tt >= 0 else None,
            "fix": FIX_CLASSES[int(r["fix"][t])] if workflow is not None and r["fix"][t] >= 0 else None,
            "compliance": round(float(r["compliance"][t]), 4) if workflow is not None else None,
        })
    acc = r["access"]
    held = []
    for h in range(T.N_HOSTS):
        priv = np.flatnonzero(acc[:, h] == T.ACCESS_PRIVILEGED)
        held.append({"host": T.HOSTS[h], "user_steps": int((acc[:, h] == T.ACCESS_USER).sum()),
                     "privileged_steps": len(priv), "first_privileged": int(priv[0]) + 1 if len(priv) else None})
    compliant, violations, neutral = counts
    return {
        "index": index, "seed": seed, "env": index, "red_agent": red,
        "workflow": workflow.codes if workflow else None,
        "access0": [int(x) for x in start_access],
        "steps": steps,
        "summary": {"return": round(float(ret[-1]), 4) if len(ret) else 0.0,
                    "compliance": (compliant / (compliant + violations)
                                   if workflow is not None and compliant + violations > 0 else None),
                    "compliant": int(compliant), "violations": int(violations), "neutral": int(neutral),
                    "held": held},
    }


def layout() -> dict:
    """The network the page draws: hosts (name, subnet, unit type) and subnets in the engine's order."""
    return {"hosts": [{"name": h, "subnet": int(T.HOST_SUBNET[i]), "type": T.UNIT_TYPES[T.HOST_UNIT_TYPE[i]]}
                      for i, h in enumerate(T.HOSTS)],
            "subnets": list(T.SUBNETS), "access": list(ACCESS)}


SCRIPT_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
"""JSON escapes of the characters that mean something to an HTML parser inside a ``<script>`` element: ``</script``
ends it, ``<!--`` (then ``<script``) switches it into a state where the real ``</script>`` no longer ends it, so the
page's own code is swallowed and the page comes up empty. As ``\\u003c`` and so on, the same strings come out of
``JSON.parse`` and the HTML parser sees no markup. (U+2028 and U+2029 are escaped for older JavaScript engines.)"""


def script_json(obj) -> str:
    """``obj`` as JSON that can sit inside a ``<script>`` element whatever its strings hold (a checkpoint path with
    ``<!--<script>`` in it included): every character of :data:`SCRIPT_ESCAPES` escaped."""
    text = json.dumps(obj, separators=(",", ":"))
    return text.translate(str.maketrans(SCRIPT_ESCAPES))


def html(episodes: list[dict], meta: dict) -> str:
    """One self-contained page (no network): ``viewer.html`` with the recordings inlined as JSON."""
    data = script_json({"meta": meta, "layout": layout(), "episodes": episodes})
    page = resources.files("workflow_rl.rl").joinpath("viewer.html").read_text(encoding="utf-8")
    return page.replace("/*DATA*/null", data, 1)
