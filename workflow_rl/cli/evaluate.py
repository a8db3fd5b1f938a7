"""``workflow-rl evaluate``: its flags, read into a :class:`~workflow_rl.runs.evaluate.EvaluateConfig`.

The job itself (an agent or a scripted baseline under the CAGE2 protocol, on the native engine and/or real CybORG)
is :func:`workflow_rl.runs.evaluate.evaluate`; each flag's help is its field's docstring there.
"""
from __future__ import annotations

import dataclasses

from workflow_rl.cli.flags import add_flags, config_from
from workflow_rl.cli.numbers import worker_count
from workflow_rl.cli.plan import add_plan_flags, plan_settings
from workflow_rl.cli.search import ray_address
from workflow_rl.cli.train import add_cyborg_flags
from workflow_rl.runs.evaluate import BASELINES, LIST_DEFAULTS, ONE_DEFAULTS, EvaluateConfig

AGENT_HELP = (f"a checkpoint file, pretrained:NAME (the shipped agent: pretrained:universal), or a baseline: "
              f"{', '.join(BASELINES)}")
"""The positional argument of the commands that play an agent (``evaluate``, ``replay``)."""
DEVICE_HELP = ("where the agent and the native engine run: cpu or cuda (cuda:N); the agent is loaded onto it "
               "(rl.pretrained.load_agent); --plan keeps its belief on a CPU copy of the agent (its rollouts go where "
               "--plan-device says); the cyborg engine runs on the CPU whatever the device")
"""``--device`` of the commands that play an agent (``evaluate``, ``replay``)."""
OWN = ("agent", "workers", "device", "vectorization", "parallel_start_method", "scenario", "plan", "ray")
"""EvaluateConfig's settings whose flags are not generated: the positional agent, and flags shared with other
commands."""


def evaluate_config(args) -> EvaluateConfig:
    """The parsed flags as an :class:`~workflow_rl.runs.evaluate.EvaluateConfig` (None where a flag was not
    typed and its kind of evaluation decides)."""
    return config_from(EvaluateConfig, args, args.config_names, agent=args.checkpoint, workers=args.workers,
                       device=args.device, vectorization=args.vectorization,
                       parallel_start_method=args.parallel_start_method, scenario=args.scenario,
                       plan=plan_settings(args), ray=args.ray)


def cmd_evaluate(args) -> int:
    from workflow_rl.runs.evaluate import evaluate

    return _shown(evaluate(evaluate_config(args)))


def cmd_join(args) -> int:
    from workflow_rl.runs.evaluate import join_evaluations

    return _shown(join_evaluations(args.parts, args.out, args.overwrite))


def _shown(result) -> int:
    """Print an evaluation's tables, the files it wrote and, if interrupted, how to play the rest; its exit status."""
    print(result.text)
    if result.written:
        print(f"wrote {', '.join(str(p) for p in result.written)}")
    if result.interrupted:
        print(result.hint)
    return result.exit_code


def _defaults(key: str) -> str:
    """The help's note of a setting's two defaults: one workflow, and a list of workflows."""
    show = (lambda v: " ".join(map(str, v)) if isinstance(v, tuple) else str(v))
    return f"; default {show(ONE_DEFAULTS[key])}; with a list of workflows {show(LIST_DEFAULTS[key])}"


def add_evaluate(sub) -> None:
    e = sub.add_parser("evaluate", help="CAGE2 evaluation of a checkpoint, a shipped agent or a baseline")
    e.add_argument("checkpoint", help=AGENT_HELP)
    names = add_flags(e, EvaluateConfig, dataclasses.asdict(EvaluateConfig("")), skip=OWN, check=True,
                      notes={k: _defaults(k) for k in ONE_DEFAULTS}, command="evaluate")
    e.add_argument("--workers", type=worker_count, default=None,
                   help="real CybORG: env processes playing episodes in parallel (default: the CPU cores)")
    e.add_argument("--device", default="cpu", help=DEVICE_HELP)
    e.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS", type=ray_address,
                   help="play the rounds of episodes as Ray tasks: no value starts Ray on this machine, ADDRESS joins "
                        "a cluster (e.g. ray://head:10001); the files are those of the same evaluation played here "
                        "(on real CybORG a round is --workers envs, default this machine's cores, on one node)")
    add_cyborg_flags(e, None)
    add_plan_flags(e)
    e.set_defaults(func=cmd_evaluate, config_names=names)

    j = sub.add_parser("join", help="evaluations of consecutive episodes (each `evaluate --after` the one before) "
                                    "as one evaluation of all their episodes")
    j.add_argument("parts", nargs="+", metavar="DIR",
                   help="evaluation folders (`evaluate ... --out DIR`), the first first, then each part evaluated "
                        "--after the one before (a red agent or engine may be continued by one part only)")
    j.add_argument("--out", default=None, help="folder for the joined evaluation.json, evaluation.md, episodes.csv "
                                                "(and cage2_submission.txt)")
    j.add_argument("--overwrite", action="store_true", help="replace the files an earlier evaluation wrote into --out")
    j.set_defaults(func=cmd_join)
