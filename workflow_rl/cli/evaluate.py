"""``workflow-rl evaluate``: its flags, read into a :class:`~workflow_rl.runs.evaluate.EvaluateConfig`.

The job itself (an agent or a scripted baseline under the CAGE2 protocol, on the native engine and/or real CybORG)
is :func:`workflow_rl.runs.evaluate.evaluate`.
"""
from __future__ import annotations

from pathlib import Path

from workflow_rl.cli.numbers import episode_count, episode_length, positive_int, seed_int, worker_count
from workflow_rl.cli.plan import add_plan_flags, plan_settings
from workflow_rl.cli.train import add_cyborg_flags
from workflow_rl.envs.names import ENGINES
from workflow_rl.runs.evaluate import BASELINES, LIST_DEFAULTS, MODES, ONE_DEFAULTS

DEVICE_HELP = ("where the agent and the native engine run: cpu or cuda (cuda:N); the agent is loaded onto it "
               "(rl.pretrained.load_agent); --plan plans on a CPU copy of the agent; the cyborg engine runs on the "
               "CPU whatever the device")
"""``--device`` of the commands that play an agent (``evaluate``, ``replay``)."""


def evaluate_config(args):
    """The parsed flags as an :class:`~workflow_rl.runs.evaluate.EvaluateConfig` (None where a flag was not
    typed and its kind of evaluation decides)."""
    from workflow_rl.runs.evaluate import EvaluateConfig

    tup = (lambda v: None if v is None else tuple(v))
    return EvaluateConfig(
        agent=args.checkpoint, workflow=args.workflow, engines=tuple(args.engine), red_agents=tup(args.red_agents),
        lengths=tup(args.lengths), episodes=args.episodes, cyborg_episodes=args.cyborg_episodes,
        workers=args.workers, time_limit=args.time_limit, mode=args.mode, device=args.device, seed=args.seed,
        episode_seed=args.episode_seed, vectorization=args.vectorization,
        parallel_start_method=args.parallel_start_method, scenario=args.scenario, plan=plan_settings(args),
        plan_told_length=args.plan_told_length, ground_truth=tuple(args.ground_truth or ()),
        out=None if args.out is None else Path(args.out), overwrite=args.overwrite)


def cmd_evaluate(args) -> int:
    from workflow_rl.runs.evaluate import evaluate

    result = evaluate(evaluate_config(args))
    print(result.text)
    if result.written:
        print(f"wrote {', '.join(str(p) for p in result.written)}")
    return 0


def _defaults(key: str) -> str:
    """The help's note of a setting's two defaults: one workflow, and a list of workflows."""
    show = (lambda v: " ".join(map(str, v)) if isinstance(v, tuple) else str(v))
    return f"default {show(ONE_DEFAULTS[key])}; with a list of workflows {show(LIST_DEFAULTS[key])}"


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
    e.add_argument("--red-agents", nargs="+", default=None, help=_defaults("red_agents"))
    e.add_argument("--lengths", nargs="+", type=episode_length, default=None, help=_defaults("lengths"))
    e.add_argument("--episodes", type=episode_count, default=None,
                   help=f"episodes per red agent (each gives every length's cell; {_defaults('episodes')}); at most "
                        "10,000,000 "
                        "(checks.MAX_EPISODES: no evaluation needs more, and a mistyped count must not run forever)")
    e.add_argument("--cyborg-episodes", type=episode_count, default=None,
                   help="episodes per red agent on real CybORG (default: --episodes)")
    e.add_argument("--workers", type=worker_count, default=None,
                   help="real CybORG: env processes playing episodes in parallel (default: the CPU cores)")
    e.add_argument("--time-limit", type=positive_int, default=None, metavar="SECONDS",
                   help="real CybORG: start no new round of episodes after this many seconds (shared evenly by "
                        "the modes); each cell reports the episodes it finished (at least one round)")
    e.add_argument("--mode", default=None, choices=MODES, help=_defaults("mode"))
    e.add_argument("--device", default="cpu", help=DEVICE_HELP)
    e.add_argument("--seed", type=seed_int, default=0, help="sampling seed (the evaluation episodes' seeds are fixed)")
    e.add_argument("--episode-seed", type=seed_int, default=None,
                   help="seed of the evaluation episodes (default: the fixed held-out evaluation seed; another one "
                        "gives a separate set, e.g. to select among agents before evaluating the chosen one)")
    add_cyborg_flags(e, None)
    add_plan_flags(e)
    e.add_argument("--plan-told-length", action="store_true",
                   help="tell the planner each cell's length (each --lengths value then plays its own episodes; mode "
                        "planned_told_length). CAGE2's own evaluation loop tells an agent nothing, and the "
                        "comparison with the CAGE2 winner uses the length-unknown 'planned' numbers")
    e.add_argument("--out", default=None,
                   help="folder for evaluation.json, evaluation.md and episodes.csv (every episode's return and fix "
                        "counts, for `workflow-rl compare`)")
    e.add_argument("--overwrite", action="store_true",
                   help="replace the files an earlier evaluation wrote into --out (refused without it)")
    e.set_defaults(func=cmd_evaluate)
