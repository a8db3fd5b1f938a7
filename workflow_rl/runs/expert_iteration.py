"""``runs.expert_iteration``: one expert-iteration job (``workflow-rl expert-iterate``), callable from Python.

A validated :class:`~workflow_rl.rl.expert_iteration.ExpertConfig` and an :class:`ExpertRun` (where it writes,
whether it continues) in; the run folder written and an :class:`ExpertResult` out. The folder:

- ``expert_iteration.json``: the settings (written first; a resume must match them, ``--rounds`` aside);
- ``rounds.csv``: one row per finished round (``rl.expert_iteration.round_row``: mean planned return, compliance,
  how often the planner overrode the greedy choice, agreement with the planner before/after training on the training
  and held-out episodes, the losses, seconds);
- ``checkpoints/round_K.pt`` and ``checkpoints/latest.pt``: the network after round K, in the training checkpoint
  format (``workflow-rl evaluate RUN/checkpoints/latest.pt`` loads it; the starting agent's config and counters, with
  the rounds' log under ``counters["expert_iteration"]``), each written atomically.

``--resume`` continues after the last finished round (the one ``latest.pt`` holds); a round killed midway is
redone from its start, and since a round is a pure function of its starting weights, the settings and (seed,
round), the resumed run ends with the weights of a run never stopped. As with ``train`` and ``search``, an ``--out``
that is not empty is refused unless ``--resume`` continues the run there or ``--overwrite`` replaces it (the files a
run wrote, ``runs.rundir.RUN_FILES``, are deleted first; other files stay).
"""
from __future__ import annotations

import csv
import dataclasses
import io
import json
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from workflow_rl import threads
from workflow_rl.checks import check_same, read_json
from workflow_rl.files import atomic_write, check_out_dir
from workflow_rl.rl.checkpoint import agent_from_checkpoint, atomic_save, load_checkpoint
from workflow_rl.rl.reward import check_valued
from workflow_rl.rl.expert_iteration import (RANDOM_INIT, ExpertConfig, finite_or_none, play_round, round_row,
                                             train_round)
from workflow_rl.runs.rundir import RunDirLock, check_run_folder, remove_run

COMMAND = "expert-iterate"
"""The command's name in the run folders' rules (``runs.rundir.RUN_FILES``)."""
SETTINGS = "expert_iteration.json"
LOG = "rounds.csv"
KEY = "expert_iteration"
"""Where a checkpoint of this job keeps its rounds: ``counters[KEY]`` = {rounds_done, settings, log}."""


@dataclass(frozen=True)
class ExpertRun:
    """How an expert-iteration job runs beside its settings: where it writes, whether it continues."""

    out: Path = Path("runs/expert-iterate")
    """run folder: expert_iteration.json, rounds.csv, checkpoints/round_K.pt and latest.pt"""
    resume: bool = False
    """continue the run in --out after its last finished round (a killed round is redone)"""
    overwrite: bool = False
    threads: int | str | None = None


@dataclass
class ExpertResult:
    """What the job ended with: the log rows of every finished round and the last checkpoint."""

    out: Path
    rows: list[dict]
    checkpoint: Path

    exit_code: int = 0


def expert_iterate(cfg: ExpertConfig, run: ExpertRun) -> ExpertResult:
    """Run ``cfg``'s rounds into ``run.out`` (module docstring): every check before anything is written, then the
    rounds under the folder's lock."""
    cfg.validate()
    out = check_out_dir("--out", run.out)
    threads.configure(threads.Work(), run.threads)
    ckpts = out / "checkpoints"
    latest = ckpts / "latest.pt"
    start = _check_folder(cfg, out, run, latest)
    ck = load_checkpoint(latest) if start else initial_checkpoint(cfg)
    check_valued(ck["config"], "expert iteration", cfg.init)   # its planner and value targets, before any write
    rows = list(ck["counters"][KEY]["log"]) if start else []
    with RunDirLock(out):
        if not run.resume:
            check_run_folder(out, COMMAND, False, run.overwrite, inputs(cfg))   # again: what another process left
            if run.overwrite:
                remove_run(out)
        if not start:
            with atomic_write(out / SETTINGS, "w") as f:
                json.dump(cfg.to_dict(), f, indent=2)
        if start >= cfg.rounds:
            print(f"{out} has finished its {start} rounds (--rounds {cfg.rounds}): raise --rounds to go on")
        elif start:
            print(f"resumed {out} after round {start}")
        for r in range(start, cfg.rounds):
            t0 = time.perf_counter()
            agent = agent_from_checkpoint(ck, "cpu")
            ppo = ck["config"]["ppo"]
            data = play_round(agent, cfg, r, float(ppo["gamma"]), float(ppo["reward_scale"]))
            stats = train_round(agent, data, cfg, r)
            row = {k: finite_or_none(v) for k, v in round_row(r, data, stats).items()}
            row["seconds"] = round(time.perf_counter() - t0, 3)
            rows.append(row)
            ck = with_weights(ck, agent, cfg, rows)
            atomic_save(ck, ckpts / f"round_{r + 1}.pt")
            atomic_save(ck, latest)
            _write_log(out / LOG, rows)
            print(_line(row, cfg.rounds))
        if rows:
            _write_log(out / LOG, rows)
    return ExpertResult(out, rows, latest)


def initial_checkpoint(cfg: ExpertConfig) -> dict:
    """The checkpoint round 1 starts from: ``cfg.init``'s (a shipped agent or a file, read and checked as
    ``evaluate`` reads it), or with ``--init none`` random weights (seeded by ``--seed``) in the network of the
    universal recipe, with that recipe's settings as its config."""
    if cfg.init.strip().lower() != RANDOM_INIT:
        from workflow_rl.rl.pretrained import read_spec

        return read_spec(cfg.init)   # shared: never changed here (with_weights makes a new dict)
    from workflow_rl.envs.names import parse_red_agent
    from workflow_rl.rl.checkpoint import RunState
    from workflow_rl.rl.config import TrainConfig
    from workflow_rl.rl.memory import Memory
    from workflow_rl.rl.ppo import Agent
    from workflow_rl.rl.recipes import recipe

    flat = {**TrainConfig().flat(), **recipe("universal").for_device("cpu")}
    tc = TrainConfig.from_flat({**flat, "red_agent": parse_red_agent(flat["red_agent"])})
    with torch.random.fork_rng():
        torch.manual_seed(cfg.seed)
        agent = Agent(tc.ppo.hidden, Memory.of(tc.ppo), tc.ppo.opening)
    return RunState(tc.n_envs).to_checkpoint(tc, None, agent.state_dict(), None)


def with_weights(ck: dict, agent, cfg: ExpertConfig, rows: list[dict]) -> dict:
    """A new checkpoint: ``ck`` with ``agent``'s weights, no optimizer or engine state (each round's Adam starts
    fresh), and this job's rounds under ``counters[KEY]``."""
    new = {k: v for k, v in ck.items()}
    new["agent"] = {k: v.detach().clone() for k, v in agent.state_dict().items()}
    for k in ("optimizer", "rng", "env_state", "obs", "access", "tracker", "episode_running", "memory"):
        new[k] = None
    new["counters"] = {**ck["counters"], KEY: {"rounds_done": len(rows), "settings": cfg.to_dict(),
                                                "log": [dict(r) for r in rows]}}
    return new


def inputs(cfg: ExpertConfig) -> list[Path]:
    """The files the run reads, which ``--overwrite`` must not delete: its starting checkpoint."""
    from workflow_rl.rl.pretrained import spec_file

    return [] if cfg.init.strip().lower() == RANDOM_INIT else [spec_file(cfg.init)]


def _check_folder(cfg: ExpertConfig, out: Path, run: ExpertRun, latest: Path) -> int:
    """The round the run starts after (0: a new run), or one ValueError: a new run needs an empty or new folder, or
    ``--overwrite`` to replace the run there (``runs.rundir.check_run_folder``, as ``train`` and ``search``); a
    resume, a folder of this job with the same settings (``--rounds`` may differ) whose checkpoint, if any, is its
    own."""
    if run.resume and run.overwrite:
        raise ValueError("--resume continues the run in --out, --overwrite replaces it: use one")
    check_run_folder(out, COMMAND, run.resume, run.overwrite, inputs(cfg))
    if not run.resume:
        return 0
    if not (out / SETTINGS).is_file():
        raise ValueError(f"--resume: {out} holds no expert-iteration run ({SETTINGS} missing): drop --resume to "
                         "start one, or choose its folder")
    try:
        saved = read_json((out / SETTINGS).read_text())
    except (OSError, ValueError):
        saved = None
    if not isinstance(saved, dict) or not isinstance(saved.get("plan", {}), dict):
        raise ValueError(f"{out / SETTINGS} is damaged: start a new run in another --out")
    saved, mine_now = _as_compared(saved), _as_compared(cfg.to_dict())
    was, now = _flat(saved), _flat(mine_now)
    check_same(was, now, sorted(set(was) | set(now)), f"--resume: {out}", "resume with its settings, or choose "
               "another --out", verb="was run with", spell=lambda n: "--" + n.replace("_", "-"))
    if not latest.exists():
        return 0   # killed in round 1: it is redone
    ck = load_checkpoint(latest)
    counters = ck.get("counters")
    mine = counters.get(KEY) if isinstance(counters, dict) else None
    if not isinstance(mine, dict) or not isinstance(mine.get("settings"), dict) or \
            _as_compared(mine["settings"]) != mine_now:
        raise ValueError(f"{latest} is not this expert-iteration run's checkpoint: choose its folder")
    done, log = mine.get("rounds_done"), mine.get("log")
    if isinstance(done, bool) or not isinstance(done, int) or not isinstance(log, list) or done != len(log):
        held = len(log) if isinstance(log, list) else "unreadable"
        raise ValueError(f"{latest} is damaged (rounds_done {done!r} is not the {held} rounds its log holds): "
                         "start a new run in another --out")
    return done


def _flat(settings: dict) -> dict:
    """A run's settings with the planner's as ``plan_<field>`` (named as their ``--plan-*`` flags)."""
    out = {k: v for k, v in settings.items() if k != "plan"}
    out.update({f"plan_{k}": v for k, v in (settings.get("plan") or {}).items()})
    return out


def _as_compared(settings: dict) -> dict:
    """A run's settings as a resume compares them: ``rounds`` aside (a resume may raise it), the planner's settings
    an older run did not record at their defaults (each arrived later, its default the behaviour before it), and
    where the rollouts run (``plan.device``) left out: it changes nothing they compute."""
    from workflow_rl.rl.planning.planner import PlanConfig

    plan = settings.get("plan")
    if isinstance(plan, dict):
        plan = {k: v for k, v in {**dataclasses.asdict(PlanConfig()), **plan}.items() if k != "device"}
    return {**{k: v for k, v in settings.items() if k != "rounds"}, "plan": plan}


def _write_log(path: Path, rows: list[dict]) -> None:
    """``rounds.csv`` rewritten whole (atomically) from the rows the checkpoint holds."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0]))
    w.writeheader()
    w.writerows(rows)
    with atomic_write(path, "w") as f:
        f.write(buf.getvalue())


def _fmt(v, spec: str) -> str:
    return "n/a" if v is None else format(v, spec)


def _line(row: dict, rounds: int) -> str:
    return (f"round {row['round']}/{rounds}: {row['episodes']} episodes, {row['decisions']} decisions, mean return "
            f"{row['mean_return']:.2f}, planner overrode greedy {_fmt(row['planner_overrides'], '.1%')}; agreement "
            f"train {_fmt(row['agree_train_before'], '.3f')} -> {_fmt(row['agree_train_after'], '.3f')}, held-out "
            f"{_fmt(row['agree_held_out_before'], '.3f')} -> {_fmt(row['agree_held_out_after'], '.3f')} "
            f"({row['seconds']:.1f} s)")
