"""``workflow-rl evaluate``: an agent or a scripted baseline under the CAGE2 protocol.

A checkpoint, a shipped agent or a scripted baseline, on the native engine and/or real CybORG.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

from workflow_rl.files import check_out_files

from workflow_rl.resources import check_memory
from workflow_rl.cli.numbers import episode_count, episode_length, positive_int, seed_int, worker_count
from workflow_rl.cli.plan import add_plan_flags, plan_settings
from workflow_rl.cli.train import add_cyborg_flags
from workflow_rl.runs.engines import engine_device, engine_opts
from workflow_rl.runs.evaluate import evaluation_markdown
from workflow_rl.envs.names import ENGINES

BASELINES = ("sleep", "random", "greedy_workflow", "restore_compromised")
DEVICE_HELP = ("where the agent and the native engine run: cpu or cuda (cuda:N); the agent is loaded onto it "
               "(rl.pretrained.load_agent); --plan plans on a CPU copy of the agent; the cyborg engine runs on the "
               "CPU whatever the device")
"""``--device`` of the commands that play an agent (``evaluate``, ``replay``)."""


def _typed_none(args) -> bool:
    """Whether ``--workflow none`` was typed: an agent trained across workflows then plays unconstrained (a zero
    workflow encoding), as ``train --none-share`` trained it to."""
    return str(getattr(args, "workflow", None) or "").strip().lower() == "none"


def agent_policies(args, workflow, lengths: list[int], per_env: bool = False):
    """{mode: acting function}, the label, and the workflow (a checkpoint's own unless --workflow is given); with
    ``per_env`` (a list of workflows) each mode's value is ``act_for(encodings)`` instead, for
    ``evaluate_workflows``. The planned mode's value is {length: acting function}, one per episode length in
    ``lengths``: the planner is told each cell's length (``evaluate_cells`` plays each length's own episodes)."""
    from workflow_rl.rl.evaluate import greedy_workflow_act, scripted_act
    from workflow_rl.rl.planning.planner import make_act
    from workflow_rl.workflow import is_workflow_list

    plan = plan_settings(args)
    if plan is not None and args.checkpoint in BASELINES:
        raise ValueError(f"--plan searches with an agent's own policy: give a checkpoint or pretrained:NAME, not "
                         f"the baseline {args.checkpoint}")
    if plan is not None and per_env:
        raise ValueError("--plan evaluates one workflow at a time: give --workflow one workflow (or none)")
    if args.checkpoint in BASELINES:
        if per_env:
            if args.checkpoint == "greedy_workflow":
                raise ValueError("the greedy_workflow baseline is evaluated one workflow at a time: give --workflow "
                                 "one workflow")
            return {"greedy": lambda enc: scripted_act(args.checkpoint, args.seed)}, args.checkpoint, None
        if args.checkpoint == "greedy_workflow":
            if workflow is None:
                raise ValueError("the greedy_workflow baseline needs --workflow")
            return {"greedy": greedy_workflow_act(workflow)}, args.checkpoint, workflow
        return {"greedy": scripted_act(args.checkpoint, args.seed)}, args.checkpoint, workflow
    import torch

    from workflow_rl.rl.pretrained import PREFIX, load_agent
    from workflow_rl.workflow import Workflow

    if not args.checkpoint.startswith(PREFIX) and not Path(args.checkpoint).exists():
        raise ValueError(f"no checkpoint at {args.checkpoint} and no baseline of that name: pass a checkpoint "
                         f"file, pretrained:NAME or one of the baselines {', '.join(BASELINES)}")
    agent, ck = load_agent(args.checkpoint, args.device)
    if workflow is None and ck.get("workflow"):
        workflow = Workflow.parse(ck["workflow"])
    across = is_workflow_list(ck["config"].get("workflow"))
    if workflow is None and not per_env and across and not _typed_none(args):
        raise ValueError(f"{args.checkpoint} was trained across workflows: name the workflow(s) to evaluate it "
                         "under with --workflow (one, a ';'-separated list, all, or none: unconstrained play, what "
                         "an agent trained with --none-share also learned)")
    gen = torch.Generator().manual_seed(args.seed)   # on the CPU on any --device: the same draws (sample_actions)
    if per_env:
        modes = ["greedy", "sampled"] if args.mode == "both" else [args.mode]
        return {m: (lambda enc, m=m: make_act(agent, greedy=m == "greedy", generator=gen, encodings=enc))
                for m in modes}, args.checkpoint, None
    acts = {}
    if args.mode in ("greedy", "both"):
        acts["greedy"] = make_act(agent, workflow=workflow)
    if args.mode in ("sampled", "both"):
        acts["sampled"] = make_act(agent, workflow=workflow, greedy=False, generator=gen)
    if plan is not None:
        if agent.device.type != "cpu":
            print(f"note: --plan plans on a CPU copy of the agent (the planner's model is the native engine's CPU "
                  f"kernel); greedy and sampled run on {args.device}", flush=True)
        acts["planned"] = {L: make_act(agent, plan, args.seed, workflow, episode_length=L)
                           for L in lengths}
    return acts, args.checkpoint, workflow


def check_devices(device: str, engines) -> None:
    """``--device`` usable here and by the native engine where it is asked for (real CybORG runs on the CPU
    whatever the device: ``runs.engines.engine_device``), checked before anything loads or plays: one line naming the
    fix, not a CUDA traceback or a refusal halfway through."""
    from workflow_rl.rl.config import check_device_available, check_engine_device

    check_device_available(device)
    if "native" in ([engines] if isinstance(engines, str) else engines):
        check_engine_device("native", device)


def read_files(args) -> list[Path | None]:
    """The files an evaluation or a replay reads, which nothing it writes may be: the agent's checkpoint (a file
    or a shipped agent's), the ground truths, the CybORG scenario folder."""
    from workflow_rl.rl.pretrained import spec_file

    agent = None if args.checkpoint in BASELINES else spec_file(args.checkpoint)
    truths = getattr(args, "ground_truth", None) or []   # replay has none
    return [agent, *map(Path, truths), Path(args.scenario) if args.scenario else None]


def _out_files(args) -> list[str]:
    """The files ``evaluate --out DIR`` writes into DIR (one workflow, or a list of workflows)."""
    from workflow_rl.rl.episodes import FILE
    from workflow_rl.workflow import is_workflow_list

    mine = (("workflows.csv", "workflows.png", "workflows.json") if is_workflow_list(args.workflow)
            else ("evaluation.json", "evaluation.md"))
    return [*mine, FILE]


def cmd_evaluate(args) -> int:
    """CAGE2 protocol: red agents x lengths (one episode of the longest length per red agent gives every length's
    running return), per engine and mode; mean ± 95% CI, compliance, and the leaderboard winner's cells."""
    from workflow_rl import parse_red_agent
    from workflow_rl.rl.episodes import FILE as EPISODES
    from workflow_rl.rl.episodes import write_episodes
    from workflow_rl.rl.evaluate import EVAL_SEED, evaluate_cells, result_dict
    from workflow_rl.workflow import is_workflow_list, parse_workflow_arg

    check_devices(args.device, args.engine)
    if args.out:
        check_out_files("--out", args.out, _out_files(args), read_files(args))
    if is_workflow_list(args.workflow):
        return _evaluate_workflows(args)
    if args.ground_truth:
        raise ValueError("--ground-truth compares an evaluation across workflows: give --workflow a list (e.g. all)")
    reds = [parse_red_agent(r) for r in args.red_agents]
    lengths = sorted(set(args.lengths))
    engines = list(dict.fromkeys(args.engine))
    acts, label, workflow = agent_policies(args, parse_workflow_arg(args.workflow), lengths)
    results, played = [], []
    for engine in engines:
        episodes = args.cyborg_episodes if engine == "cyborg" and args.cyborg_episodes else args.episodes
        start = time.monotonic()
        for i, (mode, act) in enumerate(acts.items()):
            t0 = time.monotonic()   # the time limit is shared evenly by the modes: each gets its rounds
            deadline = (start + args.time_limit * (i + 1) / len(acts) if args.time_limit and engine == "cyborg"
                        else None)
            cells = evaluate_cells(act, reds, lengths, episodes, engine=engine, workflow=workflow,
                                   seed=EVAL_SEED if args.episode_seed is None else args.episode_seed,
                                   device=engine_device(engine, args.device), workers=args.workers,
                                   deadline=deadline,
                                   **engine_opts(args.vectorization, args.parallel_start_method, args.scenario,
                                                 engine))
            took = time.monotonic() - t0
            results += [{"engine": engine, "mode": mode, **result_dict(r), "seconds": took} for r in cells]
            played += [(engine, mode, workflow.codes if workflow else None, r) for r in cells]
            print(f"{engine} {mode}: {len(cells)} cells, {took:.1f} s", flush=True)
    report = {"policy": label, "workflow": workflow.names if workflow else None, "engines": engines,
              "results": results}
    md = evaluation_markdown(label, workflow, results)
    print(md)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "evaluation.json").write_text(json.dumps(report, indent=2))
        (out / "evaluation.md").write_text(md)
        write_episodes(out / EPISODES, played)
        print(f"wrote {out / 'evaluation.json'}, {out / 'evaluation.md'} and {out / EPISODES}")
    return 0


LIST_DEFAULTS = {"red_agents": ["B_lineAgent", "RedMeanderAgent"], "lengths": [100], "episodes": 100,
                 "mode": "greedy"}
"""What an evaluation across workflows uses where the flag is not given (per workflow, so fewer episodes)."""


_WORKFLOWS_BYTES = 3 * 8
"""Bytes an evaluation across workflows keeps per (workflow, episode, red agent, length, mode): its return and two
fix counts (float64, ``rl.evaluate.evaluate_workflows``), held until ``episodes.csv`` is written."""


def _evaluate_workflows(args) -> int:
    """``evaluate AGENT --workflow LIST``: every listed workflow in one batched vector env per red agent (each env
    its own workflow); workflows.csv, workflows.md and workflows.png, with ``--ground-truth`` compared."""
    from workflow_rl import parse_red_agent
    from workflow_rl.rl.episodes import FILE as EPISODES
    from workflow_rl.rl.episodes import write_episodes
    from workflow_rl.rl.evaluate import EVAL_SEED, evaluate_workflows
    from workflow_rl.search import feasible
    from workflow_rl.workflow import parse_workflow_list

    workflows = parse_workflow_list(args.workflow)
    typed = set(args.given("evaluate", list(LIST_DEFAULTS)))
    for name, value in LIST_DEFAULTS.items():
        if name not in typed:
            setattr(args, name, value)
    cyborg_only = args.given("evaluate", ["cyborg_episodes", "workers", "time_limit", "vectorization",
                                          "parallel_start_method", "scenario"])
    if args.engine != ["native"] or cyborg_only:
        raise ValueError("an evaluation across workflows runs on the native engine: drop "
                         f"{', '.join('--' + n.replace('_', '-') for n in cyborg_only) or '--engine'}, or evaluate "
                         "real CybORG one workflow at a time")
    truths = feasible.ground_truths(args.ground_truth or [])
    reds = [parse_red_agent(r) for r in args.red_agents]
    lengths = sorted(set(args.lengths))
    makers, label, _ = agent_policies(args, None, lengths, per_env=True)
    check_memory(f"{len(workflows)} workflows x {args.episodes} episodes", _WORKFLOWS_BYTES * len(workflows)
                 * args.episodes * len(reds) * len(lengths) * len(makers), "evaluate fewer --episodes per workflow")
    rows, played = [], []
    for mode, act_for in makers.items():
        t0 = time.monotonic()
        results = evaluate_workflows(act_for, list(workflows), reds, lengths, args.episodes,
                                     seed=EVAL_SEED if args.episode_seed is None else args.episode_seed,
                                     device=args.device)
        rows += feasible.workflow_rows(results, "native", mode)
        played += [("native", mode, w, r) for w, r in results]
        print(f"native {mode}: {len(workflows)} workflows x {len(reds)} red agent(s) x {args.episodes} episodes, "
              f"{time.monotonic() - t0:.1f} s", flush=True)
    feasible.compare(rows, truths)
    lines = feasible.summary_lines(feasible.summarise(rows))
    print("\n".join(lines))
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        feasible.write_csv(rows, out / "workflows.csv")
        feasible.plot(rows, out / "workflows.png", label)
        write_episodes(out / EPISODES, played)
        (out / "workflows.json").write_text(json.dumps({
            "policy": label, "workflows": [w.codes for w in workflows], "episodes": args.episodes,
            "ground_truth": [str(p) for p in args.ground_truth or []], "summary": feasible.summarise(rows)},
            indent=2))
        print(f"wrote {out / 'workflows.csv'}, workflows.png, workflows.json and {EPISODES}")
    return 0


def add_evaluate(sub) -> None:
    e = sub.add_parser("evaluate", help="CAGE2 evaluation of a checkpoint, a shipped agent or a baseline")
    e.add_argument("checkpoint", help=f"a checkpoint file, pretrained:NAME (the shipped agent: pretrained:universal), "
                                      f"or a baseline: {', '.join(BASELINES)}")
    e.add_argument("--workflow", default=None,
                   help="workflow for compliance (default: the checkpoint's); or several: 'all' (the 120), 'named' "
                        "or a ';'-separated list, each evaluated in one batched env per red agent and written to "
                        "--out as workflows.csv (compliance, return with its 95%% CI and fixes per workflow and red "
                        "agent) and workflows.png; there the defaults are --episodes 100 per workflow, --red-agents "
                        "B_lineAgent RedMeanderAgent, --lengths 100 and --mode greedy")
    e.add_argument("--ground-truth", nargs="+", default=None, metavar="GT_CSV",
                   help="with a list of workflows: ground_truth.csv file(s) of `search --exhaustive` (one per red "
                        "agent) to compare with: per workflow the difference to its mean with a 95%% CI, and how "
                        "many eligibility calls (evaluated compliance >= its threshold) agree")
    e.add_argument("--engine", nargs="+", default=["native"], choices=ENGINES,
                   help="one or both engines (e.g. --engine native cyborg)")
    e.add_argument("--red-agents", nargs="+", default=["B_lineAgent", "RedMeanderAgent", "SleepAgent"])
    e.add_argument("--lengths", nargs="+", type=episode_length, default=[30, 50, 100])
    e.add_argument("--episodes", type=episode_count, default=1000,
                   help="episodes per red agent (each gives every length's cell); at most 10,000,000 "
                        "(checks.MAX_EPISODES: no evaluation needs more, and a mistyped count must not run forever)")
    e.add_argument("--cyborg-episodes", type=episode_count, default=None,
                   help="episodes per red agent on real CybORG (default: --episodes)")
    e.add_argument("--workers", type=worker_count, default=None,
                   help="real CybORG: env processes playing episodes in parallel (default: the CPU cores)")
    e.add_argument("--time-limit", type=positive_int, default=None, metavar="SECONDS",
                   help="real CybORG: start no new round of episodes after this many seconds (shared evenly by "
                        "the modes); each cell reports the episodes it finished (at least one round)")
    e.add_argument("--mode", default="both", choices=["greedy", "sampled", "both"])
    e.add_argument("--device", default="cpu", help=DEVICE_HELP)
    e.add_argument("--seed", type=seed_int, default=0, help="sampling seed (the evaluation episodes' seeds are fixed)")
    e.add_argument("--episode-seed", type=seed_int, default=None,
                   help="seed of the evaluation episodes (default: the fixed held-out evaluation seed; another one "
                        "gives a separate set, e.g. to select among agents before evaluating the chosen one)")
    add_cyborg_flags(e, "shared_memory")
    add_plan_flags(e)
    e.add_argument("--out", default=None,
                   help="folder for evaluation.json, evaluation.md and episodes.csv (every episode's return and fix "
                        "counts, for `workflow-rl compare`)")
    e.set_defaults(func=cmd_evaluate)
