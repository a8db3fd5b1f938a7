"""The subcommands around the main job: demo, parity, curves, bench, compare and cyborg-setup.

Each is its flags and one call: ``runs.demo.demo``, ``runs.reports.parity_report``, ``curves.run``, ``bench.run``,
``runs.reports.compare_report``, ``envs.cyborg.install_scenario``.
"""
from __future__ import annotations

from workflow_rl.cli.flags import add_flags, settings
from workflow_rl.cli.numbers import episode_count, ranged, seed_int
from workflow_rl.cli.train import add_cyborg_flags
from workflow_rl.sim import attackers


def cmd_demo(args) -> int:
    """Scripted defender on native envs against B_line and Meander: returns at 30/50/100 steps and throughput
    (:func:`workflow_rl.runs.demo.demo`)."""
    from workflow_rl.runs.demo import demo

    print(f"native engine, {args.n_envs} envs, defender '{args.policy}', {args.episodes} episodes per red agent")
    print(f"{'red agent':16s} {'30 steps':>18s} {'50 steps':>18s} {'100 steps':>18s} {'env-steps/s':>12s}")
    for row in demo(args.policy, args.red_agents, args.n_envs, args.episodes, args.seed, not args.no_progress,
                    args.threads):
        cells = [f"{m:9.2f} ± {se:5.2f}" for m, se in row.cells.values()]
        print(f"{row.red_agent:16s} {cells[0]:>18s} {cells[1]:>18s} {cells[2]:>18s} {row.steps_per_s:12,.0f}")
    print("(mean ± standard error of the blue return; real CybORG reference values are in tests/data)")
    return 0


def cmd_parity(args) -> int:
    """Scripted defenders on the native and the real CybORG engine, compared cell by cell
    (:func:`workflow_rl.runs.reports.parity_report`)."""
    from workflow_rl.runs.reports import parity_report

    return _shown(parity_report(args.red_agents, args.policies, args.episodes, args.native_episodes, args.seed,
                                args.vectorization, args.parallel_start_method, args.scenario, args.out,
                                cyborg_csv=args.cyborg_csv))


def _shown(report) -> int:
    """Print a report job's table and where it was written; its exit status."""
    print(report.text, end="")
    if report.written:
        print(f"wrote {report.written}")
    return report.exit_code


def cmd_curves(args) -> int:
    """Per-step, per-host red access, native vs real CybORG (:func:`workflow_rl.curves.run`)."""
    from workflow_rl.curves import CurvesConfig, run

    return run(CurvesConfig(**settings(args, args.config_names)))


def cmd_bench(args) -> int:
    """The engine benchmarks (:func:`workflow_rl.bench.run`; ``make bench`` runs this)."""
    from workflow_rl.bench import BenchConfig, run

    files = run(BenchConfig(**settings(args, args.config_names)), args.threads)
    print(f"wrote {', '.join(files)} in {args.out}")
    return 0


def cmd_compare(args) -> int:
    """Two evaluations of the same episodes, paired episode by episode
    (:func:`workflow_rl.runs.reports.compare_report`)."""
    from workflow_rl.runs.reports import compare_report

    return _shown(compare_report(args.a, args.b, args.modes, args.any_workflow, args.common, args.out))


# ---------------------------------------------------------------------------------------------------- cyborg-setup
def cmd_cyborg_setup(args) -> int:
    from workflow_rl.envs.cyborg import install_scenario, package_scenario_dir

    path = install_scenario(args.scenario)
    print(f"CybORG Scenario2 data ready: {path}")
    print(f"(csle-cyborg reads its scenarios from {package_scenario_dir()})")
    return 0


def add_tools(sub) -> None:
    """The subcommands around the main job: demo, parity, curves, bench, compare, cyborg-setup."""
    d = sub.add_parser("demo", help="scripted defender on native envs vs B_line and Meander (returns, speed)")
    d.add_argument("--n-envs", type=ranged("n_envs"), default=4096)
    d.add_argument("--episodes", type=episode_count, default=8192, help="episodes per red agent")
    d.add_argument("--policy", default="restore_compromised")
    d.add_argument("--red-agents", nargs="+", default=list(attackers.cage2(attacking=True)))
    d.add_argument("--seed", type=seed_int, default=0)
    d.add_argument("--no-progress", action="store_true", help="print a line per round instead of a progress bar")
    d.set_defaults(func=cmd_demo)

    q = sub.add_parser("parity", help="native vs real CybORG on the same scripted defenders")
    q.add_argument("--red-agents", nargs="+", default=list(attackers.cage2(attacking=True)))
    q.add_argument("--policies", nargs="+", default=None, help="default: all six reference policies")
    q.add_argument("--episodes", type=episode_count, default=200, help="CybORG episodes per cell")
    q.add_argument("--native-episodes", type=episode_count, default=20_000)
    q.add_argument("--seed", type=seed_int, default=0)
    add_cyborg_flags(q, "shared_memory")
    q.add_argument("--out", default=None, help="also write the Markdown table here")
    q.add_argument("--cyborg-csv", default=None, help="also write the CybORG episodes' returns here (a fidelity "
                                                       "reference: red,policy,episode,seed,length,total_reward)")
    q.set_defaults(func=cmd_parity)

    from dataclasses import asdict

    from workflow_rl.curves import CurvesConfig

    v = sub.add_parser("curves", help="per-step, per-host red access: native vs real CybORG (resumable shards)")
    v.set_defaults(func=cmd_curves, config_names=add_flags(v, CurvesConfig, asdict(CurvesConfig())))

    from workflow_rl.bench import BenchConfig

    b = sub.add_parser("bench", help="engine throughput: CybORG modes and native over n_envs (engines.*), and the "
                                     "native kernel over batch sizes, both red agents (native.*)")
    b.set_defaults(func=cmd_bench, config_names=add_flags(b, BenchConfig, asdict(BenchConfig()), check=True))

    m = sub.add_parser("compare", help="two evaluations of the same episodes, paired episode by episode: B - A per "
                                       "cell with its 95%% interval (from their episodes.csv)")
    m.add_argument("a", metavar="A", help="evaluation folder (`evaluate ... --out DIR`) or its episodes.csv")
    m.add_argument("b", metavar="B", help="the other evaluation, of the same episodes (the same --episode-seed); "
                                          "may be A itself with --modes")
    m.add_argument("--modes", nargs=2, metavar=("MODE_A", "MODE_B"), default=None,
                   help="pair A's cells of MODE_A with B's of MODE_B (e.g. greedy planned), instead of mode with "
                        "the same mode")
    m.add_argument("--any-workflow", action="store_true",
                   help="pair cells whatever their workflows (an agent under a workflow against an unconstrained "
                        "one: the price of compliance on the same episodes); one workflow per file")
    m.add_argument("--common", action="store_true",
                   help="where a cell's episode counts differ, pair the episodes both played (the first ones) "
                        "instead of refusing")
    m.add_argument("--out", default=None, help="also write the Markdown table here (FILE.md)")
    m.set_defaults(func=cmd_compare)

    c = sub.add_parser("cyborg-setup", help="install/check CybORG's Scenario2 data for the cyborg engine")
    c.add_argument("--scenario", default=None,
                   help="folder with Scenario2.yaml and images/ (default: $WORKFLOW_RL_CAGE2_SCENARIO)")
    c.set_defaults(func=cmd_cyborg_setup)
