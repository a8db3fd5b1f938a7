"""``runs.replay``: one replay job (``workflow-rl replay``), callable from Python.

A :class:`ReplayConfig` in; a few episodes of an agent or a baseline (resolved as an evaluation resolves them:
``runs.evaluate.policies``) played and written as one self-contained HTML page (``rl.viewer``); a
:class:`ReplayResult` out.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from workflow_rl import devices
from workflow_rl.checks import check_config, check_replay_steps
from workflow_rl.envs.names import ENGINES
from workflow_rl.files import atomic_write, check_out_file
from workflow_rl.runs.engines import engine_opts
from workflow_rl.runs.evaluate import BASELINES, none_typed, policies, read_files

MODES = ("greedy", "sampled", "planned")
"""How a trained agent acts in a replay (a baseline acts one way whatever the mode)."""


@dataclass(frozen=True)
class ReplayConfig:
    """One replay page: what plays, against which red agent, how many episodes of how many steps, and where the page
    goes (``workflow-rl replay``'s flags)."""

    agent: str
    """a checkpoint file, pretrained:NAME, one of ``runs.evaluate.BASELINES`` or an agent class with CybORG's agent
    interface (module:Class or path/to/file.py:Class)"""
    agent_kwargs: str | None = None
    """an agent class's constructor arguments, a JSON object"""
    workflow: str | None = None
    """workflow for compliance (default: the checkpoint's)"""
    red_agent: str = "B_lineAgent"
    """red agent or mixture (e.g. meander, mix)"""
    engine: str = field(default="native", metadata={"choices": ENGINES})
    """where the episodes are played: the native engine or real CybORG"""
    episodes: int = 3
    """episodes in the page (a chooser picks one)"""
    length: int = 100
    """steps per episode"""
    mode: str = field(default="greedy", metadata={"choices": MODES})
    """how a trained agent acts (planned: with the planner, settings --plan-*)"""
    seed: int = 0
    """seed of the episodes (and of sampling)"""
    device: str = "cpu"
    vectorization: str = "sync"
    parallel_start_method: str | None = None
    scenario: str | None = None
    plan: object | None = None
    """a :class:`~workflow_rl.rl.planning.planner.PlanConfig` (``mode='planned'`` uses the default one without it)"""
    out: Path = Path("runs/replay.html")
    """the HTML file to write"""


@dataclass
class ReplayResult:
    """The page written and the episodes in it (each ``rl.viewer`` episode dict: its steps and its summary)."""

    out: Path
    episodes: list[dict]

    @property
    def text(self) -> str:
        """One line per episode: its return and its compliance (n/a without a workflow)."""
        lines = []
        for ep in self.episodes:
            s = ep["summary"]
            comp = "n/a" if s["compliance"] is None else f"{s['compliance']:.3f}"
            lines.append(f"episode {ep['index'] + 1}: return {s['return']:.2f}, compliance {comp}")
        return "\n".join(lines)


def replay(cfg: ReplayConfig) -> ReplayResult:
    """Play ``cfg``'s episodes and write them as one HTML page (replacing only a page ``replay`` wrote); every check
    before anything plays."""
    from workflow_rl import parse_red_agent
    from workflow_rl.rl import viewer
    from workflow_rl.rl.planning.planner import PlanConfig
    from workflow_rl.workflow import parse_workflow_arg

    check_config("cfg", cfg, ReplayConfig, str)   # one ValueError naming the setting, not a crash deep inside
    if cfg.mode not in MODES:
        raise ValueError(f"unknown --mode {cfg.mode!r}: use one of {', '.join(MODES)}")
    check_replay_steps(cfg.episodes, cfg.length)
    out = check_out_file("--out", cfg.out, read_files(cfg.agent, cfg.scenario), mine="replay")
    red = parse_red_agent(cfg.red_agent)
    devices.check_play_devices(cfg.device, cfg.engine)
    plan = (cfg.plan or PlanConfig()) if cfg.mode == "planned" else None
    modes = ("greedy",) if cfg.mode == "planned" else (cfg.mode,)
    acts, label, workflow = policies(cfg.agent, parse_workflow_arg(cfg.workflow), modes=modes, device=cfg.device,
                                     seed=cfg.seed, plan=plan, none_typed=none_typed(cfg.workflow), lists=False,
                                     agent_kwargs=cfg.agent_kwargs)
    act = acts.get(cfg.mode) or acts["greedy"]   # a baseline acts one way whatever the mode
    episodes = viewer.record_episodes(act, red, cfg.episodes, cfg.length, engine=cfg.engine, seed=cfg.seed,
                                      workflow=workflow, device=devices.engine_device(cfg.engine, cfg.device),
                                      **engine_opts(cfg.vectorization, cfg.parallel_start_method, cfg.scenario,
                                                    cfg.engine))
    meta = {"agent": label, "workflow": workflow.codes if workflow else None, "red_agent": red,
            "engine": cfg.engine, "mode": "scripted" if cfg.agent in BASELINES else cfg.mode,
            "seed": cfg.seed, "length": cfg.length}
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(out, "w", encoding="utf-8") as f:   # replaces the file (checked above), never writes through it
        f.write(viewer.html(episodes, meta))
    return ReplayResult(out, episodes)
