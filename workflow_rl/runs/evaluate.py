"""``runs.evaluate``: one evaluation job (``workflow-rl evaluate``), callable from Python.

An :class:`EvaluateConfig` in; the CAGE2 cells (or, for a list of workflows, one row per workflow) played, the
files written where ``out`` says, and an :class:`EvaluateResult` out. The agent is resolved here, once, for every
job that plays one (:func:`policies`: evaluate and replay).
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from workflow_rl import devices
from workflow_rl.checks import MAX_RECORDED_SECONDS, check_config, check_play_steps, check_same, no_constant, read_json
from workflow_rl.envs.names import ENGINES
from workflow_rl.files import check_out_files, staged_outputs
from workflow_rl.interrupt import GracefulInterrupt
from workflow_rl.resources import check_memory
from workflow_rl.runs.engines import engine_opts
from workflow_rl.sim import attackers

MODES = ("greedy", "sampled", "both")
"""How an evaluation plays the agent (``mode``): its greedy action, a sampled one, or both side by side."""
BASELINES = ("sleep", "random", "greedy_workflow", "restore_compromised")
"""The scripted defenders an evaluation or a replay plays by name instead of an agent."""
ONE_DEFAULTS = {"red_agents": attackers.cage2(), "lengths": (30, 50, 100),
                "episodes": 1000, "mode": "both"}
"""What an evaluation of one workflow (or none) uses where the setting is not given: CAGE2's protocol."""
LIST_DEFAULTS = {"red_agents": attackers.cage2(attacking=True), "lengths": (100,), "episodes": 100,
                 "mode": "greedy"}
"""What an evaluation across workflows uses where the setting is not given (per workflow, so fewer episodes)."""
CYBORG_ONLY = ("cyborg_episodes", "workers", "time_limit", "vectorization", "parallel_start_method", "scenario")
"""Settings that only real CybORG reads (an evaluation across workflows runs on the native engine)."""
_WORKFLOWS_BYTES = 3 * 8
"""Bytes an evaluation across workflows keeps per (workflow, episode, red agent, length, mode): its return and two
fix counts (float64, ``rl.evaluate.evaluate_workflows``), held until ``episodes.csv`` is written."""


@dataclass(frozen=True)
class EvaluateConfig:
    """One evaluation: what plays, under which workflow(s), where and how much (``workflow-rl evaluate``'s flags).
    A setting left None takes the default of its kind of evaluation (:data:`ONE_DEFAULTS`, :data:`LIST_DEFAULTS`,
    or real CybORG's own)."""

    agent: str
    """a checkpoint file, pretrained:NAME, one of :data:`BASELINES`, or any agent class with CybORG's agent
    interface (get_action, end_episode): module:Class or path/to/file.py:Class"""
    agent_kwargs: str | None = None
    """an agent class's constructor arguments, a JSON object (e.g. '{"seed": 1}')"""
    workflow: str | None = None
    """workflow for compliance (default: the checkpoint's); or several: 'all' (the 120), 'named' or a ';'-separated
    list, each evaluated in one batched env per red agent and written to --out as workflows.csv (compliance, return
    with its 95% CI and fixes per workflow and red agent) and workflows.png; there the defaults are --episodes 100
    per workflow, --red-agents B_lineAgent RedMeanderAgent, --lengths 100 and --mode greedy"""
    ground_truth: tuple[str, ...] = field(default=(), metadata={"metavar": "GT_CSV"})
    """with a list of workflows: ground_truth.csv file(s) of `search --exhaustive` (one per red agent) to compare
    with: per workflow the difference to its mean with a 95% CI, and how many eligibility calls (evaluated
    compliance >= its threshold) agree"""
    engines: tuple[str, ...] = field(default=("native",), metadata={"flag": "--engine", "choices": ENGINES})
    """one or both engines (e.g. --engine native cyborg)"""
    red_agents: tuple[str, ...] | None = None
    """the red agents played against, each its own cells"""
    lengths: tuple[int, ...] | None = None
    """the episode lengths reported, each a cell (one episode gives every length's running return)"""
    episodes: int | None = None
    """episodes per red agent, each giving every length's cell; at most 10,000,000 (checks.MAX_EPISODES: no
    evaluation needs more, and a mistyped count must not run forever)"""
    cyborg_episodes: int | None = None
    """episodes per red agent on real CybORG (default: --episodes)"""
    workers: int | None = None
    time_limit: int | None = field(default=None, metadata={"metavar": "SECONDS"})
    """real CybORG: start no new round of episodes after this many seconds (shared evenly by the modes); each cell
    reports the episodes it finished (at least one round)"""
    mode: str | None = field(default=None, metadata={"choices": MODES})
    """greedy, sampled or both"""
    device: str = "cpu"
    seed: int = 0
    """sampling seed (the evaluation episodes' seeds are fixed)"""
    episode_seed: int | None = None
    """seed of the evaluation episodes (default: the fixed held-out evaluation seed; another one gives a separate
    set, e.g. to select among agents before evaluating the chosen one)"""
    after: Path | None = field(default=None, metadata={"metavar": "DIR"})
    """continue the evaluation in DIR (an earlier --out): play the episodes that follow its episodes, per engine and
    mode (rounds as large as DIR's, or one smaller round for what is left; the cells continued ending on one round),
    then `workflow-rl join DIR THIS --out ALL` makes them one evaluation; with the same agent and settings, as
    --episode-seed cannot be given with it"""
    vectorization: str | None = None
    """real CybORG's (default shared_memory)"""
    parallel_start_method: str | None = None
    scenario: str | None = None
    plan: object | None = None
    """a :class:`~workflow_rl.rl.planning.planner.PlanConfig`: also play the agent planned"""
    plan_told_length: bool = False
    """tell the planner each cell's length (each --lengths value then plays its own episodes; mode
    planned_told_length). CAGE2's own evaluation loop tells an agent nothing, and the comparison with the CAGE2
    winner uses the length-unknown 'planned' numbers"""
    out: Path | None = None
    """folder for evaluation.json, evaluation.md and episodes.csv (every episode's return and fix counts, for
    `workflow-rl compare`)"""
    overwrite: bool = False
    """replace the files an earlier evaluation wrote into --out (refused without it)"""
    ray: str | None = None
    """play the rounds of episodes as Ray tasks (``runs.evaluate_ray``): 'local' starts Ray on this machine, an
    address joins that cluster (auto, ray://HOST:10001 or HOST:6379); the files are those of the same evaluation
    played here (None: play here)"""

    @property
    def across(self) -> bool:
        """Whether this evaluates a list of workflows (one row per workflow) rather than one."""
        from workflow_rl.workflow import is_workflow_list

        return is_workflow_list(self.workflow)

    def resolved(self) -> "EvaluateConfig":
        """This config with every None default of its kind filled in."""
        defaults = LIST_DEFAULTS if self.across else ONE_DEFAULTS
        return replace(self, **{k: v for k, v in defaults.items() if getattr(self, k) is None},
                       vectorization=self.vectorization or "shared_memory")

    def out_files(self) -> list[str]:
        """The files an evaluation writes into ``out``."""
        from workflow_rl.rl.episodes import FILE

        mine = (("workflows.csv", "workflows.png", "workflows.json") if self.across
                else ("evaluation.json", "evaluation.md"))
        cage2 = [] if self.across else [SUBMISSION_FILE]   # replaced, or removed by a run on the native engine only
        return [*mine, FILE, *cage2]

    def read_files(self) -> list[Path | None]:
        """The files the evaluation reads, which nothing it writes may be."""
        from workflow_rl.rl.episodes import episodes_file_read

        return read_files(self.agent, self.scenario, self.ground_truth) + ([episodes_file_read(self.after)]
                                                                            if self.after else [])


@dataclass
class EvaluateResult:
    """What an evaluation ended with: the report (evaluation.json's content, or workflows.json's), the Markdown or
    summary lines it printed, and the files it wrote (none without ``out``)."""

    report: dict
    text: str
    written: list[Path] = field(default_factory=list)
    interrupted: bool = False
    """a Ctrl-C stopped it: the report holds the rounds of episodes it finished (``evaluate --after`` plays the rest)"""
    hint: str = ""
    """what an interrupted evaluation holds and how to play the rest (:func:`interrupted_hint`)"""

    @property
    def exit_code(self) -> int:
        return 130 if self.interrupted else 0


def read_files(agent: str, scenario: str | None, ground_truth=()) -> list[Path | None]:
    """The files an evaluation or a replay reads, which nothing it writes may be: the agent's checkpoint (a file or
    a shipped agent's), the ground truths, the CybORG scenario folder."""
    from workflow_rl.rl.pretrained import spec_file

    from workflow_rl.rl.interface import is_interface_agent

    if is_interface_agent(agent):   # module:Class reads no file of ours; file.py:Class reads that file
        where = agent.rpartition(":")[0]
        agent_file = Path(where) if where.endswith(".py") else None
    else:
        agent_file = None if agent in BASELINES else spec_file(agent)
    return [agent_file, *map(Path, ground_truth or ()), Path(scenario) if scenario else None]


def policies(agent: str, workflow, *, modes=("greedy",), device: str = "cpu", seed: int = 0, plan=None,
             lengths=None, per_env: bool = False, none_typed: bool = False, lists: bool = True,
             agent_kwargs: str | None = None):
    """Resolve ``agent`` (a checkpoint, pretrained:NAME or a baseline) into ``({mode: acting function}, label,
    workflow)``: the workflow is the checkpoint's own unless ``workflow`` is given. With ``plan`` a 'planned' mode
    is added: one acting function for every length, or with ``lengths`` {length: acting function}, the planner told
    each length. With ``per_env`` each mode's value is ``act_for(encodings)`` instead, for
    ``rl.evaluate.evaluate_workflows``. ``none_typed``: ``--workflow none`` was asked for (an agent trained across
    workflows then plays unconstrained); ``lists``: whether the job takes a list of workflows (a replay does not,
    so its error does not suggest one). An agent class (``module:Class``, ``file.py:Class``: ``rl.interface``) is
    built with ``agent_kwargs`` (JSON) once per env and acts one way whatever the mode, as a baseline does."""
    from workflow_rl.rl import interface
    from workflow_rl.rl.evaluate import greedy_workflow_act, scripted_act
    from workflow_rl.rl.planning.planner import make_act

    if interface.is_interface_agent(agent):
        if plan is not None:
            raise ValueError(f"--plan searches with one of our agents' policies: {agent} is a class of its own; "
                             "drop --plan")
        build = interface.make_agents(agent, interface.parse_kwargs(agent_kwargs))
        if per_env:
            return {"greedy": lambda enc: interface.interface_act(build)}, agent, None
        return {"greedy": interface.interface_act(build)}, agent, workflow
    if agent_kwargs is not None:
        raise ValueError(f"--agent-kwargs are an agent class's constructor arguments; {agent} is not a class "
                         "(module:Class or path/to/file.py:Class): drop --agent-kwargs")

    if plan is not None and agent in BASELINES:
        raise ValueError(f"--plan searches with an agent's own policy: give a checkpoint or pretrained:NAME, not "
                         f"the baseline {agent}")
    if plan is not None and per_env:
        raise ValueError("--plan evaluates one workflow at a time: give --workflow one workflow (or none)")
    if agent in BASELINES:
        return _baseline(agent, workflow, seed, per_env, scripted_act, greedy_workflow_act)
    import torch

    from workflow_rl.rl.pretrained import PREFIX, load_agent
    from workflow_rl.workflow import Workflow, is_workflow_list

    if not agent.startswith(PREFIX) and not Path(agent).exists():
        raise ValueError(f"no checkpoint at {agent} and no baseline of that name: pass a checkpoint file, "
                         f"pretrained:NAME or one of the baselines {', '.join(BASELINES)}")
    net, ck = load_agent(agent, device)
    if plan is not None:
        from workflow_rl.rl.reward import check_valued

        check_valued(ck["config"], "--plan", agent)
    if workflow is None and ck.get("workflow"):
        workflow = Workflow.parse(ck["workflow"])
    if workflow is None and not per_env and is_workflow_list(ck["config"].get("workflow")) and not none_typed:
        which = ("the workflow(s) to evaluate it under with --workflow (one, a ';'-separated list, all, or none: "
                 if lists else "the workflow to play it under with --workflow (one, e.g. D,OS,E,OH,U, or none: ")
        raise ValueError(f"{agent} was trained across workflows: name {which}unconstrained play, what an agent "
                         "trained with --none-share also learned)")
    gen = torch.Generator().manual_seed(seed)   # on the CPU on any device: the same draws (choose_actions)
    if per_env:
        return {m: (lambda enc, m=m: make_act(net, greedy=m == "greedy", generator=gen, encodings=enc))
                for m in modes}, agent, None
    acts = {m: make_act(net, workflow=workflow, greedy=m == "greedy", generator=None if m == "greedy" else gen)
            for m in modes}
    if plan is not None:
        if net.device.type != "cpu":
            print(f"note: --plan keeps its belief and root choice on a CPU copy of the agent (its rollouts run "
                  f"where --plan-device says: {plan.device}); greedy and sampled run on {device}", flush=True)
        acts["planned"] = (make_act(net, plan, seed, workflow) if lengths is None else
                           {L: make_act(net, plan, seed, workflow, episode_length=L) for L in lengths})
    return acts, agent, workflow


def _baseline(name: str, workflow, seed: int, per_env: bool, scripted_act, greedy_workflow_act):
    """:func:`policies` for a scripted baseline: it acts one way whatever the mode."""
    if per_env:
        if name == "greedy_workflow":
            raise ValueError("the greedy_workflow baseline is evaluated one workflow at a time: give --workflow "
                             "one workflow")
        return {"greedy": lambda enc: scripted_act(name, seed)}, name, None
    if name == "greedy_workflow":
        if workflow is None:
            raise ValueError("the greedy_workflow baseline needs --workflow")
        return {"greedy": greedy_workflow_act(workflow)}, name, workflow
    return {"greedy": scripted_act(name, seed)}, name, workflow


SUBMISSION_REDS = attackers.cage2()
"""The red agents CAGE2's evaluation names, in its order."""


SUBMISSION_FILE = "cage2_submission.txt"
"""An evaluation on real CybORG's scores in CAGE2's submission format (:func:`submission_text`)."""


def submission_text(label: str, mode: str, cells: list) -> str:
    """One mode's real-CybORG cells (``EvalResult``) in CAGE2's submission format: per episode length (30, 50, 100)
    and red agent, the mean return and the sample standard deviation (what the challenge's evaluation script
    prints), so scores compare line by line with the leaderboard's files. The header says how the episodes were
    played: unless the agent is told the length (``planned_told_length``: each length its own episodes, as that
    script plays them), each length's cell is the first steps of the same episodes of the longest length, which for
    an agent not told the length is the same distribution."""
    how = ("each length played its own episodes, the planner told the length" if mode == "planned_told_length" else
           f"each length's cell is the first steps of the same {max(r.length for r in cells)}-step episodes")
    lines = ["CybORG (workflow-rl evaluate --engine cyborg), Scenario2",
             f"Author: workflow-rl, Team: workflow-rl, Technique: {label}, {mode}",
             f"Episodes: {', '.join(sorted({f'{r.red_agent} {r.episodes}' for r in cells}))} per cell; {how}"]
    order = {red: i for i, red in enumerate(SUBMISSION_REDS)}
    for r in sorted(cells, key=lambda r: (r.length, order.get(r.red_agent, len(order)), r.red_agent)):
        lines.append(f"Average reward for red agent {r.red_agent} and steps {r.length} is: {r.mean} with a standard "
                     f"deviation of {r.std}")
    return "\n".join(lines) + "\n"


def _modes(mode: str) -> tuple[str, ...]:
    return ("greedy", "sampled") if mode == "both" else (mode,)


def none_typed(workflow: str | None) -> bool:
    """Whether ``--workflow none`` was asked for: an agent trained across workflows then plays unconstrained."""
    return str(workflow or "").strip().lower() == "none"


def evaluate(cfg: EvaluateConfig) -> EvaluateResult:
    """Run the evaluation ``cfg`` describes: every check (devices, the output folder, the settings of its kind)
    before anything loads or plays; then CAGE2's cells (red agents x lengths, per engine and mode: mean ± 95% CI,
    compliance, the leaderboard winner's cells), or with a list of workflows one row per workflow."""
    check_config("cfg", cfg, EvaluateConfig, str)   # one ValueError naming the setting, not a crash deep inside
    if cfg.mode is not None and cfg.mode not in MODES:
        raise ValueError(f"mode {cfg.mode!r}: use one of {', '.join(MODES)}")
    devices.check_play_devices(cfg.device, cfg.engines)
    if cfg.ray is not None:
        _check_ray(cfg)
    if cfg.out is not None:
        check_out_files("--out", cfg.out, cfg.out_files(), cfg.read_files(), replace=cfg.overwrite)
    if cfg.across:
        if cfg.after is not None:
            raise ValueError("--after continues an evaluation of one workflow (or none), not one across workflows")
        if cfg.ray is not None:
            raise ValueError("--ray plays an evaluation of one workflow (or none) round by round; one across "
                             "workflows is one batched run per red agent: drop --ray")
        return _evaluate_workflows(cfg)
    if cfg.ground_truth:
        raise ValueError("--ground-truth compares an evaluation across workflows: give --workflow a list (e.g. all)")
    if cfg.after is not None and cfg.episode_seed is not None:
        raise ValueError("--after sets the episode seed (the episodes that follow the evaluation it names): drop "
                         "--episode-seed")
    return _evaluate_one(cfg.resolved())


def _check_ray(cfg: EvaluateConfig) -> None:
    """``--ray``'s address in one of its forms, and an evaluation its workers can play as here: on their CPUs (an
    agent or planner on a GPU here may choose otherwise than on a CPU there, and the files would not be this
    evaluation's)."""
    from workflow_rl.search.ray_executor import check_ray_address

    check_ray_address(cfg.ray)
    gpu = [f for f, d in (("--device", cfg.device), ("--plan-device", getattr(cfg.plan, "device", "cpu")))
           if not str(d).startswith("cpu")]
    if gpu:
        raise ValueError(f"--ray plays its rounds on the Ray workers' CPUs: drop {gpu[0]} (real CybORG runs on the "
                         "CPU whatever the device), or --ray")


def acts_for(cfg: EvaluateConfig) -> tuple[dict, str, object]:
    """:func:`policies` of an evaluation of one workflow (or none): ({mode: acting function}, label, workflow), the
    planned mode named ``planned_told_length`` where the planner is told each length. Wherever it is called (here,
    or on a Ray worker from the same settings: ``runs.evaluate_ray``) it builds the same acting functions."""
    from workflow_rl.workflow import parse_workflow_arg

    acts, label, workflow = policies(cfg.agent, parse_workflow_arg(cfg.workflow), modes=_modes(cfg.mode),
                                     device=cfg.device, seed=cfg.seed, plan=cfg.plan,
                                     lengths=sorted(set(cfg.lengths)) if cfg.plan_told_length else None,
                                     none_typed=none_typed(cfg.workflow), agent_kwargs=cfg.agent_kwargs)
    if "planned" in acts and cfg.plan_told_length:
        acts["planned_told_length"] = acts.pop("planned")
    return acts, label, workflow


def _seeds(cfg: EvaluateConfig, label: str, workflow, cells: list[tuple]) -> dict[tuple, int]:
    """The episode seed of each (engine, mode) of ``cells`` (the (engine, mode, red agent, length) this evaluation
    plays): ``--episode-seed`` (default the held-out evaluation seed), or with ``--after`` the seed of the episodes
    that follow that evaluation's (``rl.episodes.next_seed``), refused before anything plays where it evaluated
    another agent or workflow, lacks a cell this one plays, or played rounds of another size."""
    from workflow_rl.rl.evaluate import EVAL_SEED, round_size
    from workflow_rl.rl.episodes import NO_WORKFLOW, next_seed, read_episodes

    pairs = list(dict.fromkeys((e, m) for e, m, _, _ in cells))
    if cfg.after is None:
        return {p: EVAL_SEED if cfg.episode_seed is None else cfg.episode_seed for p in pairs}
    where = str(cfg.after)
    try:
        done, report = read_episodes(cfg.after), read_report(cfg.after)
    except ValueError as e:
        raise ValueError(f"--after {where}: {e}") from None
    names = workflow.names if workflow else None
    if (report["policy"], report["workflow"]) != (label, names):
        raise ValueError(f"--after {where}: it evaluated {report['policy']} under workflow "
                         f"{report['workflow'] or 'none'}, this evaluation plays {label} under {names or 'none'}: "
                         "continue an evaluation with the same agent and workflow")
    codes = workflow.codes if workflow else NO_WORKFLOW
    size = {e: round_size(e, _episodes(cfg, e), cfg.workers) for e, _ in pairs}
    seeds = {(e, m): next_seed(done, [(e, m, red, L, codes) for e2, m2, red, L in cells if (e2, m2) == (e, m)],
                               size[e], where, one_round=size[e] == _episodes(cfg, e)) for e, m in pairs}
    check_same_play(f"--after {where}: it", report.get("settings"), play_settings(cfg), {m for _, m in pairs})
    return seeds


def _episodes(cfg: EvaluateConfig, engine: str) -> int:
    """The episodes per red agent ``cfg`` plays on ``engine``."""
    return cfg.cyborg_episodes if engine == "cyborg" and cfg.cyborg_episodes else cfg.episodes


def check_steps(cfg: EvaluateConfig, reds: list, lengths: list[int], engines: list[str], modes: list[str],
                workflows: int = 1) -> None:
    """The env-steps the evaluation will play in all, at most ``checks.MAX_PLAY_STEPS`` (each flag in its range
    is not enough: ``--episodes 10000000 --lengths 2147483647`` runs for ever), refused before anything plays in one
    line saying the product. An episode plays the longest of ``lengths`` (each shorter cell is its first steps),
    or with ``planned_told_length`` each length its own episodes."""
    per_mode = {m: sum(lengths) if m == "planned_told_length" else max(lengths) for m in modes}
    steps = sum(_episodes(cfg, e) * workflows * len(reds) * per_mode[m] for e in engines for m in modes)
    counts = {_episodes(cfg, e) for e in engines}
    episodes = f"{counts.pop():,} episodes" if len(counts) == 1 else "--episodes / --cyborg-episodes"
    told = " (each of --lengths its own: told the length)" if "planned_told_length" in modes else ""
    product = (f"{episodes}{f' x {workflows} workflows' if workflows > 1 else ''} x {len(reds)} red agent(s) x "
               f"{max(per_mode.values()):,} steps{told} x {len(modes)} mode(s)"
               + (f" x {len(engines)} engines" if len(engines) > 1 else ""))
    check_play_steps(product, steps, "lower --episodes or --lengths" + (" or evaluate fewer workflows" if
                                                                        workflows > 1 else ""))


def _evaluate_one(cfg: EvaluateConfig) -> EvaluateResult:
    from workflow_rl import parse_red_agent
    from workflow_rl.envs.names import check_engine_plays
    from workflow_rl.rl.evaluate import result_dict

    reds = [parse_red_agent(r) for r in cfg.red_agents]
    lengths = sorted(set(cfg.lengths))
    engines = list(dict.fromkeys(cfg.engines))
    for engine in engines:
        for red in reds:
            check_engine_plays(red, engine)
    acts, label, workflow = acts_for(cfg)
    check_steps(cfg, reds, lengths, engines, list(acts))
    seeds = _seeds(cfg, label, workflow, [(e, m, red, L) for e in engines for m in acts for red in reds
                                          for L in lengths])
    results, played = [], []
    # Ctrl-C: keep the rounds played, write them (a native round is a whole run of up to 4,096 episodes)
    unit = ("the rounds of episodes in play on the Ray cluster" if cfg.ray is not None else
            "the round of episodes in play (on the native engine up to 4,096 episodes)")
    with GracefulInterrupt(unit) as stop:
        if cfg.ray is not None:
            from workflow_rl.runs.evaluate_ray import RayPlay

            streams = RayPlay(cfg, acts_for, acts, _ray_agent_file(cfg), reds, lengths, engines, seeds,
                              {e: _episodes(cfg, e) for e in engines}, workflow).run(stop)
        else:
            streams = _play_here(cfg, acts, workflow, seeds, reds, lengths, engines, stop)
        for engine, mode, cells, took in streams:
            results += [{"engine": engine, "mode": mode, **result_dict(r), "seconds": took} for r in cells]
            played += [(engine, mode, workflow.codes if workflow else None, r) for r in cells]
        asked = {(e, m): _episodes(cfg, e) for e in engines for m in acts}
        got = {(e, m): min(r.episodes for e2, m2, _, r in played if (e2, m2) == (e, m)) for e, m, _, _ in played}
        interrupted = stop.requested and got != asked   # a Ctrl-C in the last round stopped nothing
    result = _finish(label, workflow, list(dict.fromkeys(e for e, _, _, _ in played)), results, played, cfg.out,
                     play_settings(cfg))
    result.interrupted = interrupted
    result.hint = interrupted_hint(cfg, asked, got) if interrupted else ""
    return result


def _play_here(cfg: EvaluateConfig, acts: dict, workflow, seeds: dict, reds: list[str], lengths: list[int],
               engines: list[str], stop) -> list[tuple]:
    """Every (engine, mode) played on this machine, one after another: (engine, mode, its cells, seconds) each,
    until a Ctrl-C (``stop``) leaves the rest unplayed."""
    from workflow_rl.rl.evaluate import evaluate_cells

    streams = []
    for engine, (i, (mode, act)) in ((e, m) for e in engines for m in enumerate(acts.items())):
        if stop.requested:
            break
        if i == 0:
            start = time.monotonic()
        t0 = time.monotonic()   # the time limit is shared evenly by the modes: each gets its rounds
        deadline = (start + cfg.time_limit * (i + 1) / len(acts) if cfg.time_limit and engine == "cyborg"
                    else None)
        cells = evaluate_cells(act, reds, lengths, _episodes(cfg, engine), engine=engine, workflow=workflow,
                               seed=seeds[(engine, mode)],
                               device=devices.engine_device(engine, cfg.device), workers=cfg.workers,
                               deadline=deadline, stop=lambda: stop.requested,
                               **engine_opts(cfg.vectorization, cfg.parallel_start_method, cfg.scenario, engine))
        took = time.monotonic() - t0
        streams.append((engine, mode, cells, took))
        print(f"{engine} {mode}: {len(cells)} cells, {took:.1f} s", flush=True)
    return streams


def _ray_agent_file(cfg: EvaluateConfig) -> Path | None:
    """The file a Ray worker needs to build the agent from, which the driver sends it (a worker on another machine
    has none of this one's files): a checkpoint, or an agent class's ``file.py``; None for a shipped agent
    (``pretrained:NAME``: the package's own), a baseline or an importable ``module:Class``."""
    from workflow_rl.rl.interface import is_interface_agent
    from workflow_rl.rl.pretrained import PREFIX

    if cfg.agent in BASELINES or cfg.agent.startswith(PREFIX):
        return None
    if is_interface_agent(cfg.agent):
        where = cfg.agent.rpartition(":")[0]
        return Path(where) if where.endswith(".py") else None
    return Path(cfg.agent)


def interrupted_hint(cfg: EvaluateConfig, asked: dict[tuple, int], got: dict[tuple, int]) -> str:
    """What an interrupted evaluation says: what each (engine, mode) holds of what it was to play (``asked``,
    ``got``; absent from ``got``: not started) and, with ``out``, the command that plays the rest. Engines and modes
    play one after another, so one of them at most stopped part-way; ``--after`` continues what ``--engine`` and
    ``--mode`` pick, and a planned mode plays beside a greedy one (those extra greedy episodes join the greedy
    cells)."""
    lines = ["interrupted: the cells hold the rounds of episodes finished ("
             + ", ".join(f"{e} {m} {got[(e, m)]:,} of {n:,}" if (e, m) in got else f"{e} {m} not started"
                         for (e, m), n in asked.items()) + ")"]
    if cfg.out is None:
        return lines[0]
    parts = " ".join(map(str, [*([cfg.after] if cfg.after else []), cfg.out, "OTHER"]))
    before = f" (and every part before {cfg.after}, first first)" if cfg.after else ""
    for (e, m), n in asked.items():
        if (e, m) in got and got[(e, m)] < n:
            count = f"--{'cyborg-' if e == 'cyborg' and cfg.cyborg_episodes else ''}episodes {n - got[(e, m)]}"
            mode = (f"--mode {m} and no --plan" if m in MODES else
                    f"--mode greedy and its --plan flags: the {n - got[(e, m)]} greedy episodes it plays beside join "
                    "the greedy cells")
            lines.append(f"the rest of {e} {m}: the same command with --engine {e} {count} --after {cfg.out} --out "
                         f"OTHER ({mode}), then `workflow-rl join {parts} --out ALL`{before}")
    later = [f"{e} {m}" for e, m in asked if (e, m) not in got]
    if later:
        lines.append(f"not started ({', '.join(later)}): evaluate them on their own (--engine, --mode), a separate "
                     "evaluation")
    return "\n".join(lines)


def play_settings(cfg: EvaluateConfig) -> dict:
    """The settings of ``cfg`` that decide how the agent plays an episode (not which episodes, nor how many): the
    seed a sampled or planned mode (or the random baseline) draws from, the planner's settings and whether it is
    told the length. evaluation.json keeps them, so that
    ``--after`` and ``join`` refuse to continue an evaluation with other ones."""
    from dataclasses import asdict

    kwargs = {"agent_kwargs": cfg.agent_kwargs} if cfg.agent_kwargs is not None else {}   # only where given
    return {"seed": cfg.seed, "plan": asdict(cfg.plan) if cfg.plan is not None else None,
            "plan_told_length": cfg.plan_told_length, **kwargs}


def check_same_play(where: str, settings: dict | None, mine: dict | None, modes,
                    other: str = "this evaluation") -> None:
    """One ValueError naming the first setting in which two evaluations' :func:`play_settings` differ for the
    ``modes`` continued (``checks.check_same``, the resume-identity rule of every job): the seed always (a sampled
    or planned mode and the random baseline draw from it; greedy parts must simply be given the same ``--seed``),
    an agent class's ``--agent-kwargs``, the planner's settings where one of them plans (but ``--plan-device``: CPU
    and CUDA rollouts choose alike). An evaluation.json written before they were kept has none: nothing to
    compare."""
    if settings is None or mine is None:
        return
    was, now = _play_compared(settings), _play_compared(mine)
    names = ["seed", "agent_kwargs"]
    if any(m.startswith("planned") for m in modes):
        names += sorted(n for n in set(was) | set(now) if n.startswith("plan_") and n != "plan_told_length")
        names.append("plan_told_length")
    check_same(was, now, names, where, "continue an evaluation with the same settings", verb="played with",
               this=f"{other} with")


def _play_compared(settings: dict) -> dict:
    """:func:`play_settings` flat, as :func:`check_same_play` compares them: each of the planner's settings one of
    its own (``plan_particles``, spelt ``--plan-particles``), but its device (CPU and CUDA rollouts choose alike)."""
    plan = settings.get("plan")
    flat = {k: v for k, v in settings.items() if k != "plan"}
    if isinstance(plan, dict):
        flat.update({f"plan_{k}": v for k, v in plan.items() if k != "device"})
    return flat


def _finish(label: str, workflow, engines: list[str], results: list[dict], played: list,
            out: Path | None, settings: dict | None) -> EvaluateResult:
    """An evaluation's report, its Markdown and its files (:func:`_write_evaluation`) from its cells: ``results``
    (evaluation.json's rows) and ``played`` (engine, mode, workflow codes, ``EvalResult``) in the same order;
    ``settings``: its :func:`play_settings` (None: not known)."""
    report = {"policy": label, "workflow": workflow.names if workflow else None, "engines": engines,
              "settings": settings, "results": results}
    md = evaluation_markdown(label, workflow, results)
    modes = list(dict.fromkeys(m for e, m, _, _ in played if e == "cyborg"))   # one block per mode
    cage2 = {SUBMISSION_FILE: "\n".join(submission_text(label, mode, [r for e, m, _, r in played
                                                                      if (e, m) == ("cyborg", mode)])
                                         for mode in modes)} if modes else {}
    return EvaluateResult(report, md, _write_evaluation(out, report, md, played, cage2))


def join_evaluations(parts: list[str | Path], out: Path | None = None, overwrite: bool = False) -> EvaluateResult:
    """``workflow-rl join``: evaluations of consecutive episodes (the first, then each ``--after`` the one before)
    as the one evaluation of all their episodes: every cell's episodes joined in order (``rl.episodes.join``, which
    refuses a part that does not continue a cell), its statistics computed again from them, the time it took
    summed; the same files ``evaluate --out`` writes. The parts must be one agent under one workflow, played with
    the same settings (:func:`play_settings`: the planner's, ``--seed``; an evaluation.json older than them has
    none, and is taken at the caller's word). A planned or sampled mode draws its own stream in each
    part: on real CybORG its joined episodes are one long run's episodes, played with other draws."""
    from workflow_rl.rl.episodes import NO_WORKFLOW, episodes_file, join, read_episodes
    from workflow_rl.rl.evaluate import cell_result, result_dict
    from workflow_rl.workflow import parse_workflow_arg

    if len(parts) < 2:
        raise ValueError("join takes two or more evaluation folders (the first, then each evaluated --after the "
                         "one before)")
    if out is not None:
        check_out_files("--out", out, EvaluateConfig("").out_files(), [episodes_file(p) for p in parts]
                        + [Path(p) / "evaluation.json" for p in parts], replace=overwrite)
    reports = [read_report(p) for p in parts]
    for p, r in zip(parts[1:], reports[1:]):
        for what in ("policy", "workflow"):
            if r[what] != reports[0][what]:
                raise ValueError(f"{p} evaluated {what} {r[what]!r} and {parts[0]} {reports[0][what]!r}: join "
                                 "evaluations of one agent under one workflow")
    joined = join([read_episodes(p) for p in parts], [str(p) for p in parts])
    seconds = {}
    for r in reports:
        for row in r["results"]:
            key = (row["engine"], row["mode"], row["red_agent"], row["length"])
            seconds[key] = seconds.get(key, 0.0) + row.get("seconds", 0.0)
    results, played = [], []
    for (engine, mode, red, length, codes), episodes in joined.items():
        cell = cell_result(red, length, episodes)
        results.append({"engine": engine, "mode": mode, **result_dict(cell),
                        "seconds": seconds.get((engine, mode, red, length), 0.0)})
        played.append((engine, mode, None if codes == NO_WORKFLOW else codes, cell))
    codes = {c for _, _, c, _ in played}
    workflow = parse_workflow_arg(codes.pop()) if codes != {None} and len(codes) == 1 else None
    engines = list(dict.fromkeys(e for r in reports for e in r["engines"]))
    known = [(p, r["settings"], {row["mode"] for row in r["results"]}) for p, r in zip(parts, reports)
             if r.get("settings") is not None]
    for p, settings, modes in known[1:]:
        check_same_play(str(p), settings, known[0][1], modes & known[0][2], str(known[0][0]))
    return _finish(reports[0]["policy"], workflow, engines, results, played, out, known[0][1] if known else None)


def read_report(part: str | Path) -> dict:
    """An evaluation folder's evaluation.json, or one ValueError saying what is wrong with it (a missing folder or
    file, a file that is not an evaluation's report: its agent, workflow, engines and cells)."""
    f = Path(part) / "evaluation.json"
    if not Path(part).exists():
        raise ValueError(f"{part} does not exist: give an evaluation folder (`workflow-rl evaluate ... --out DIR`)")
    try:
        report = read_json(f.read_text(), parse_constant=no_constant)   # too deep: damage, not a RecursionError
    except FileNotFoundError:
        raise ValueError(f"{part} has no evaluation.json: give a folder `workflow-rl evaluate ... --out` wrote for one "
                         "workflow (or none), not one across workflows") from None
    except (OSError, ValueError) as e:
        raise ValueError(f"{f} is damaged ({e}): evaluate that part again") from None
    if not _is_report(report):
        raise ValueError(f"{f} is not the report of `workflow-rl evaluate` (its policy, workflow, engines and "
                         "results, each cell's engine, mode, red agent, length and seconds, 0 to "
                         f"{MAX_RECORDED_SECONDS:,}): evaluate that part again")
    return report


def _is_report(report) -> bool:
    """Whether ``report`` has the shape :func:`_finish` writes."""
    def cell(r) -> bool:
        seconds = r.get("seconds", 0.0) if isinstance(r, dict) else None
        return (isinstance(r, dict) and all(isinstance(r.get(k), str) for k in ("engine", "mode", "red_agent"))
                and isinstance(r.get("length"), int) and isinstance(seconds, (int, float))
                and not isinstance(seconds, bool) and 0 <= seconds <= MAX_RECORDED_SECONDS)

    return (isinstance(report, dict) and isinstance(report.get("policy"), str)
            and (report.get("workflow") is None or isinstance(report.get("workflow"), list))
            and isinstance(report.get("engines"), list) and all(isinstance(e, str) for e in report["engines"])
            and (report.get("settings") is None or isinstance(report["settings"], dict))
            and isinstance(report.get("results"), list) and all(map(cell, report["results"])))


def _write_evaluation(out: Path | None, report: dict, md: str, played: list, texts: dict[str, str]) -> list[Path]:
    """evaluation.json, evaluation.md, episodes.csv and the ``texts`` (name: text; the CAGE2-format scores) into
    ``out``, all or none (``files.staged_outputs``)."""
    from workflow_rl.rl.episodes import FILE, write_episodes

    if out is None:
        return []
    out = Path(out)
    stale = [] if SUBMISSION_FILE in texts else [SUBMISSION_FILE]   # an earlier CybORG run's scores are not this run's
    with staged_outputs(out, remove=stale) as stage:
        (stage / "evaluation.json").write_text(json.dumps(report, indent=2))   # the staging folder makes it whole
        (stage / "evaluation.md").write_text(md)
        write_episodes(stage / FILE, played)
        for name, text in texts.items():
            (stage / name).write_text(text)
    return [out / "evaluation.json", out / "evaluation.md", out / FILE, *(out / name for name in texts)]


def _evaluate_workflows(cfg: EvaluateConfig) -> EvaluateResult:
    """Every listed workflow in one batched vector env per red agent (each env its own workflow): workflows.csv,
    workflows.png and workflows.json, with ``ground_truth`` compared."""
    from workflow_rl import parse_red_agent
    from workflow_rl.rl.episodes import FILE, write_episodes
    from workflow_rl.rl.evaluate import EVAL_SEED, evaluate_workflows
    from workflow_rl.search import feasible
    from workflow_rl.workflow import parse_workflow_list

    cyborg_only = [n for n in CYBORG_ONLY if getattr(cfg, n) is not None]
    if list(cfg.engines) != ["native"] or cyborg_only:
        raise ValueError("an evaluation across workflows runs on the native engine: drop "
                         f"{', '.join('--' + n.replace('_', '-') for n in cyborg_only) or '--engine'}, or evaluate "
                         "real CybORG one workflow at a time")
    cfg = cfg.resolved()
    workflows = parse_workflow_list(cfg.workflow)
    truths = feasible.ground_truths(list(cfg.ground_truth))
    reds = [parse_red_agent(r) for r in cfg.red_agents]
    lengths = sorted(set(cfg.lengths))
    makers, label, _ = policies(cfg.agent, None, modes=_modes(cfg.mode), device=cfg.device, seed=cfg.seed,
                                plan=cfg.plan, per_env=True, agent_kwargs=cfg.agent_kwargs)
    check_memory(f"{len(workflows)} workflows x {cfg.episodes} episodes", _WORKFLOWS_BYTES * len(workflows)
                 * cfg.episodes * len(reds) * len(lengths) * len(makers), "evaluate fewer --episodes per workflow")
    check_steps(cfg, reds, lengths, ["native"], list(makers), len(workflows))
    rows, played = [], []
    for mode, act_for in makers.items():
        t0 = time.monotonic()
        results = evaluate_workflows(act_for, list(workflows), reds, lengths, cfg.episodes,
                                     seed=EVAL_SEED if cfg.episode_seed is None else cfg.episode_seed,
                                     device=cfg.device)
        rows += feasible.workflow_rows(results, "native", mode)
        played += [("native", mode, w, r) for w, r in results]
        print(f"native {mode}: {len(workflows)} workflows x {len(reds)} red agent(s) x {cfg.episodes} episodes, "
              f"{time.monotonic() - t0:.1f} s", flush=True)
    feasible.compare(rows, truths)
    summary = feasible.summarise(rows)
    report = {"policy": label, "workflows": [w.codes for w in workflows], "episodes": cfg.episodes,
              "ground_truth": [str(p) for p in cfg.ground_truth], "summary": summary}
    written = []
    if cfg.out is not None:
        out = Path(cfg.out)
        with staged_outputs(out) as stage:   # all four or none
            feasible.write_csv(rows, stage / "workflows.csv")
            feasible.plot(rows, stage / "workflows.png", label)
            write_episodes(stage / FILE, played)
            (stage / "workflows.json").write_text(json.dumps(report, indent=2))
        written = [out / "workflows.csv", out / "workflows.png", out / "workflows.json", out / FILE]
    return EvaluateResult(report, "\n".join(feasible.summary_lines(summary)), written)


def evaluation_markdown(label: str, workflow, results: list[dict]) -> str:
    """Two tables: every cell (engine, mode, red agent, length) with its episodes, mean, 95% CI and compliance; and
    the CAGE2 cells side by side per engine and mode, with the CAGE2 winner's agent measured on the same CybORG
    (``workflow_rl.anchors``)."""
    from workflow_rl import anchors
    from workflow_rl.rl.evaluate import CAGE2_WINNER

    lines = [f"# Evaluation of {label}", "", f"workflow {workflow.codes if workflow else 'none'}; fixed evaluation "
             "seeds; each length's return is the running return of the same episodes (see evaluate_cells)", "",
             "| engine | mode | red agent | length | episodes | mean | 95% CI | compliance |",
             "|---|---|---|---:|---:|---:|---:|---:|"]
    for r in results:
        comp = "n/a" if r["compliance"] is None else f"{r['compliance']:.3f}"
        lines.append(f"| {r['engine']} | {r['mode']} | {r['red_agent']} | {r['length']} | {r['episodes']} | "
                     f"{r['mean']:.2f} | ± {r['ci95']:.2f} | {comp} |")
    cells = [c for c in CAGE2_WINNER if any((r["red_agent"], r["length"]) == c for r in results)]
    if cells:
        heads = " | ".join(f"{attackers.get(red).label} {n}" for red, n in cells)
        lines += ["", f"| engine | mode | {heads} | sum |",
                  "|---|---|" + "---:|" * (len(cells) + 1)]
        for engine, mode in dict.fromkeys((r["engine"], r["mode"]) for r in results):
            row = {(r["red_agent"], r["length"]): r for r in results if (r["engine"], r["mode"]) == (engine, mode)}
            vals = [row.get(c) for c in cells]
            total = sum(v["mean"] for v in vals) if all(vals) else float("nan")
            lines.append(f"| {engine} | {mode} | " + " | ".join(
                f"{v['mean']:.2f} ± {v['ci95']:.2f} (n={v['episodes']})" if v else "" for v in vals)
                + f" | {total:.2f} |")
        w = anchors.winner()
        total, ci = anchors.winner_sum(cells)
        lines.append("| CAGE2 winner's agent, same CybORG | | " + " | ".join(
            f"{w[c].mean:.2f} ± {w[c].ci95:.2f} (n={w[c].episodes})" for c in cells) + f" | {total:.2f} ± {ci:.2f} |")
        lines += ["", f"The winner's row: {anchors.WINNER_SOURCE}, the game `--engine cyborg` plays (the CAGE2 "
                  "leaderboard's numbers were measured on CybORG 2.1 before two August-2022 fixes: another game)."]
    return "\n".join(lines) + "\n"
