"""``workflow-rl`` command line. Every bad input ends in one ``error: ...`` line naming the fix (exit status 2)."""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, no usage dump
        self.exit(2, f"error: {message} (see `{self.prog} --help`)\n")


def _number(cast, ok, requirement: str):
    """An argparse type: ``cast`` the text and check ``ok``, with one readable message for each failure."""
    def parse(text: str):
        try:
            v = cast(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {'an integer' if cast is int else 'a number'}") \
                from None
        if not ok(v):
            raise argparse.ArgumentTypeError(f"must be {requirement}, got {v}")
        return v

    return parse


_positive_int = _number(int, lambda v: v >= 1, ">= 1")
_unit_interval = _number(float, lambda v: 0.0 < v <= 1.0, "in (0, 1]")
_nonneg_float = _number(float, lambda v: v >= 0, ">= 0")


# ----------------------------------------------------------------------------------------------------------- demo
def cmd_demo(args) -> int:
    """Scripted defender on native envs against B_line and Meander: returns at 30/50/100 steps and throughput."""
    from workflow_rl import make_vector_env
    from workflow_rl.policies import POLICIES

    if args.policy not in POLICIES:
        raise ValueError(f"unknown policy {args.policy!r}: use one of {', '.join(POLICIES)}")
    policy = POLICIES[args.policy]
    from workflow_rl import parse_red_agent

    reds = [parse_red_agent(r) for r in args.red_agents]
    rng = np.random.default_rng(args.seed)
    print(f"native engine, {args.n_envs} envs, defender '{args.policy}', {args.episodes} episodes per red agent")
    print(f"{'red agent':16s} {'30 steps':>18s} {'50 steps':>18s} {'100 steps':>18s} {'env-steps/s':>12s}")
    for red in reds:
        env = make_vector_env(args.n_envs, red, seed=args.seed, copy=False)
        obs, _ = env.reset()
        rounds = -(-args.episodes // args.n_envs)
        totals = {30: [], 50: [], 100: []}
        stepped, t_env = 0, 0.0
        for _ in range(rounds):
            ret = np.zeros(args.n_envs)
            for t in range(100):
                act = policy(t, obs, rng)
                t0 = time.perf_counter()
                obs, r, _, _, _ = env.step(act)
                t_env += time.perf_counter() - t0
                stepped += args.n_envs
                ret += r
                if t + 1 in totals:
                    totals[t + 1].append(ret.copy())
        cells = []
        for length in (30, 50, 100):
            x = np.concatenate(totals[length])[: args.episodes]
            cells.append(f"{x.mean():9.2f} ± {x.std(ddof=1) / np.sqrt(len(x)):5.2f}")
        print(f"{red:16s} {cells[0]:>18s} {cells[1]:>18s} {cells[2]:>18s} {stepped / t_env:12,.0f}")
        env.close()
    print("(mean ± standard error of the blue return; real CybORG reference values are in tests/data)")
    return 0


# ----------------------------------------------------------------------------------------------------------- train
def _add_engine_flags(p, n_envs_default: int) -> None:
    p.add_argument("--red-agent", default="B_lineAgent", help="B_lineAgent, RedMeanderAgent, SleepAgent or an alias")
    p.add_argument("--engine", default="native", choices=["native", "cyborg"])
    p.add_argument("--n-envs", type=_positive_int, default=n_envs_default)
    p.add_argument("--device", default="cpu", help="cpu, cuda or mps")
    _add_cyborg_flags(p, "sync", episodes=True)
    p.add_argument("--n-workers", type=_positive_int, default=None,
                   help="episode workers (default: CPU cores, at most --n-envs)")


def _add_training_flags(p, update_every_steps: int) -> None:
    """How one workflow is trained (shared by `train` and `search`, which differ only in the update default)."""
    p.add_argument("--max-episodes", type=_positive_int, default=50, help="per env (and workflow, in a search)")
    p.add_argument("--min-episodes", type=int, default=5, help="per env, before the compliance gate applies")
    p.add_argument("--compliance-threshold", type=_unit_interval, default=0.95)
    p.add_argument("--min-fixes", type=int, default=50)
    p.add_argument("--alignment-lambda", type=_nonneg_float, default=30.0)
    p.add_argument("--update-every-steps", type=_positive_int, default=update_every_steps)
    p.add_argument("--learning-rate", type=float, default=5e-4)
    p.add_argument("--compile", action="store_true",
                   help="with --device cuda: torch.compile the engine step (fuses its many small GPU kernels)")


def _add_cyborg_flags(p, vectorization: str, episodes: bool = False) -> None:
    """How the real CybORG engine runs (ignored by the native engine)."""
    choices = ["sync", "pipes", "shared_memory"] + (["episodes"] if episodes else [])
    p.add_argument("--vectorization", default=vectorization, choices=choices,
                   help="cyborg engine: in-process, one process per env over pipes, or shared memory" + (
                       "; 'episodes': episode workers that play whole episodes with a CPU copy of the policy "
                       "(either engine)" if episodes else ""))
    p.add_argument("--parallel-start-method", default=None, choices=["spawn", "fork", "forkserver"],
                   help="cyborg engine worker start method")
    p.add_argument("--scenario", default=None, help="cyborg engine: folder with Scenario2.yaml and images/")


def _eval_block(agent, workflow, red, args) -> dict:
    from workflow_rl.rl.evaluate import agent_act, evaluate_policy

    r = evaluate_policy(agent_act(agent, workflow, greedy=not args.eval_sampled), red, args.eval_length,
                        args.eval_episodes, engine=args.eval_engine, workflow=workflow, device=args.device,
                        **_engine_opts(args, args.eval_engine))
    return {"length": r.length, "episodes": r.episodes, "mean": r.mean, "ci95": r.ci95, "std": r.std,
            "compliance": r.compliance, "engine": args.eval_engine,
            "mode": "sampled" if args.eval_sampled else "greedy"}


def _engine_opts(args, engine: str) -> dict:
    """Evaluation runs on a per-step vector env: episode workers fall back to shared memory there."""
    if engine == "cyborg":
        vec = "shared_memory" if args.vectorization == "episodes" else args.vectorization
        return {"vectorization": vec, "start_method": args.parallel_start_method, "scenario": args.scenario}
    return {}


def cmd_train(args) -> int:
    """Train a workflow-conditioned PPO policy; write logs, checkpoints, summary.json."""
    import json
    from pathlib import Path

    from workflow_rl import parse_red_agent
    from workflow_rl.rl.ppo import PPOConfig
    from workflow_rl.rl.checkpoint import load_checkpoint
    from workflow_rl.rl.config import TrainConfig
    from workflow_rl.rl.trainer import Trainer
    from workflow_rl.workflow import parse_workflow_arg

    workflow = parse_workflow_arg(args.workflow)
    red = parse_red_agent(args.red_agent)
    out = Path(args.out)
    ppo = PPOConfig(learning_rate=args.learning_rate, update_epochs=args.update_epochs,
                    num_minibatches=args.num_minibatches)
    cfg = TrainConfig(workflow=workflow.codes if workflow else None, red_agent=red, engine=args.engine,
                      n_envs=args.n_envs, episode_length=args.episode_length,
                      update_every_steps=args.update_every_steps, max_episodes=args.max_episodes,
                      min_episodes=args.min_episodes, num_episodes=args.num_episodes,
                      compliance_threshold=args.compliance_threshold, min_fixes=args.min_fixes,
                      alignment_lambda=args.alignment_lambda, device=args.device, seed=args.seed,
                      vectorization=args.vectorization, parallel_start_method=args.parallel_start_method,
                      scenario=args.scenario, tensorboard=args.tensorboard, ppo=ppo, n_workers=args.n_workers,
                      compile=args.compile)
    cfg.validate()
    if args.seeds > 1:
        return _train_seeds(cfg, workflow, red, out, args)
    ckpt_dir = Path(args.checkpoint_dir) if args.checkpoint_dir else out / "checkpoints"
    trainer = Trainer(cfg, out, ckpt_dir, progress=not args.no_progress)
    if args.resume:
        trainer.restore(load_checkpoint(ckpt_dir / "latest.pt", args.device))
        print(f"resumed from {ckpt_dir / 'latest.pt'} at update {trainer.update} "
              f"({trainer.total_episodes} episodes)")
    print(f"training {'workflow ' + workflow.codes if workflow else 'unconditioned PPO'} vs {red} on "
          f"{cfg.engine} with {cfg.n_envs} envs (budget {cfg.budget} episodes) -> {out}")
    summary = trainer.run()
    if summary["stop_reason"] == "interrupted":
        print(f"interrupted: saved {ckpt_dir / 'latest.pt'}; continue with the same command plus --resume")
        return 130
    summary["eval"] = _eval_block(trainer.agent, workflow, red, args) if args.eval_episodes > 0 else None
    summary["checkpoint"] = str(ckpt_dir / "latest.pt")
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    ev = summary["eval"]
    comp = "n/a" if summary["compliance"] is None else f"{summary['compliance']:.3f}"
    print(f"done: {summary['stop_reason']} after {summary['episodes']} episodes, compliance {comp}")
    if ev:
        print(f"held-out evaluation ({ev['episodes']} x {ev['length']} steps, {ev['mode']}, {ev['engine']}): "
              f"{ev['mean']:.2f} ± {ev['ci95']:.2f}")
    print(f"wrote {out / 'summary.json'}")
    return 0


def _train_seeds(cfg, workflow, red, out, args) -> int:
    """`train --seeds N`: N independent runs in one batch, each evaluated, and the spread across them."""
    import json

    from workflow_rl.rl.trainer import check_batchable, train_seeds
    from workflow_rl.rl.evaluate import across_seeds

    for flag, bad in (("--checkpoint-dir", args.checkpoint_dir), ("--tensorboard", args.tensorboard)):
        if bad:
            raise ValueError(f"{flag} applies to a single run: drop it, or drop --seeds (runs go to RUN_DIR/seed_i)")
    check_batchable(cfg)
    print(f"training {args.seeds} seeds of {'workflow ' + workflow.codes if workflow else 'unconditioned PPO'} vs "
          f"{red} in one batch ({cfg.n_envs} envs each, budget {cfg.budget} episodes each) -> {out}/seed_*")
    summaries, agents, interrupted = train_seeds(cfg, args.seeds, out, resume=args.resume,
                                                 progress=not args.no_progress)
    if interrupted:
        print(f"interrupted: every run saved under {out}/seed_*; continue with the same command plus --resume")
        return 130
    for i, (summary, agent) in enumerate(zip(summaries, agents)):
        summary["seed"] = cfg.seed + i
        summary["eval"] = _eval_block(agent, workflow, red, args) if args.eval_episodes > 0 else None
        summary["checkpoint"] = str(out / f"seed_{i}" / "checkpoints" / "latest.pt")
        (out / f"seed_{i}" / "summary.json").write_text(json.dumps(summary, indent=2))
        comp = "n/a" if summary["compliance"] is None else f"{summary['compliance']:.3f}"
        ev = summary["eval"]
        print(f"seed {summary['seed']}: {summary['stop_reason']} after {summary['episodes']} episodes, compliance "
              f"{comp}" + (f", held-out {ev['mean']:.2f} ± {ev['ci95']:.2f}" if ev else ""))
    result = {"seeds": summaries, "across_seeds": None}
    if args.eval_episodes > 0:
        result["across_seeds"] = across_seeds([s["eval"]["mean"] for s in summaries])
        a = result["across_seeds"]
        print(f"across {a['n']} seeds: held-out return {a['mean']:.2f} ± {a['ci95']:.2f} (95% t interval over "
              f"seeds; std {a['std']:.2f})")
    (out / "summary.json").write_text(json.dumps(result, indent=2))
    print(f"wrote {out / 'summary.json'}")
    return 0


# -------------------------------------------------------------------------------------------------------- evaluate
BASELINES = ("sleep", "random", "greedy_workflow", "restore_compromised")


def cmd_evaluate(args) -> int:
    """CAGE2 protocol for a checkpoint (or a baseline): lengths x red agents, mean ± 95% CI, compliance."""
    import json
    from pathlib import Path

    from workflow_rl import parse_red_agent
    from workflow_rl.rl.evaluate import (agent_act, evaluate_policy, greedy_workflow_act, result_dict,
                                         scripted_act)
    from workflow_rl.rl.checkpoint import agent_from_checkpoint, load_checkpoint
    from workflow_rl.workflow import Workflow, parse_workflow_arg

    reds = [parse_red_agent(r) for r in args.red_agents]
    lengths = args.lengths
    workflow = parse_workflow_arg(args.workflow) if args.workflow else None
    if args.checkpoint in BASELINES:
        if args.checkpoint == "greedy_workflow":
            if workflow is None:
                raise ValueError("the greedy_workflow baseline needs --workflow")
            acts = {"greedy": greedy_workflow_act(workflow)}
        else:
            acts = {"greedy": scripted_act(args.checkpoint, args.seed)}
        label = args.checkpoint
    else:
        ck = load_checkpoint(Path(args.checkpoint))
        agent = agent_from_checkpoint(ck)
        if workflow is None and ck.get("workflow"):
            workflow = Workflow.parse(ck["workflow"])
        import torch

        gen = torch.Generator().manual_seed(args.seed)
        acts = {}
        if args.mode in ("greedy", "both"):
            acts["greedy"] = agent_act(agent, workflow, greedy=True)
        if args.mode in ("sampled", "both"):
            acts["sampled"] = agent_act(agent, workflow, greedy=False, generator=gen)
        label = args.checkpoint
    results = []
    for mode, act in acts.items():
        for red in reds:
            for length in lengths:
                r = evaluate_policy(act, red, length, args.episodes, engine=args.engine, workflow=workflow,
                                    device=args.device, **_engine_opts(args, args.engine))
                results.append({"mode": mode, **result_dict(r)})
    report = {"policy": label, "workflow": workflow.names if workflow else None, "engine": args.engine,
              "results": results}
    lines = [f"# Evaluation of {label}", "",
             f"engine {args.engine}, {args.episodes} episodes per cell, workflow "
             f"{workflow.codes if workflow else 'none'}", "",
             "| mode | red agent | length | mean | 95% CI | compliance |", "|---|---|---:|---:|---:|---:|"]
    for r in results:
        comp = "n/a" if r["compliance"] is None else f"{r['compliance']:.3f}"
        lines.append(f"| {r['mode']} | {r['red_agent']} | {r['length']} | {r['mean']:.2f} | ± {r['ci95']:.2f} | "
                     f"{comp} |")
    md = "\n".join(lines) + "\n"
    print(md)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "evaluation.json").write_text(json.dumps(report, indent=2))
        (out / "evaluation.md").write_text(md)
        print(f"wrote {out / 'evaluation.json'} and {out / 'evaluation.md'}")
    return 0


# ---------------------------------------------------------------------------------------------------------- search
def cmd_search(args) -> int:
    """GP-UCB workflow search with policy inheritance under an exact episode budget."""
    from workflow_rl.search.search import SearchConfig, SearchInterrupted, WorkflowSearch
    from workflow_rl.workflow import NAMED, Workflow, all_workflows

    if args.resume:
        search = WorkflowSearch.resume(args.resume, progress=not args.no_progress)
    else:
        workflows = None
        if args.exhaustive:
            workflows = [w.codes for w in all_workflows()]
        elif args.workflows:
            items = args.workflows if len(args.workflows) > 1 else args.workflows[0].split(";")
            if items == ["named"]:
                items = list(NAMED)
            workflows = [Workflow.parse(w).codes for w in items]
        cfg = SearchConfig(red_agent=args.red_agent, engine=args.engine, total_episodes=args.total_episodes,
                           n_envs=args.n_envs, max_episodes=args.max_episodes, min_episodes=args.min_episodes,
                           compliance_threshold=args.compliance_threshold, min_fixes=args.min_fixes,
                           alignment_lambda=args.alignment_lambda, update_every_steps=args.update_every_steps,
                           learning_rate=args.learning_rate, inherit=args.inherit, gp_beta=args.gp_beta,
                           n_init=args.n_init, eval_episodes=args.eval_episodes, eval_length=args.eval_length,
                           seed=args.seed, device=args.device, workflows=workflows,
                           max_iterations=args.max_iterations, vectorization=args.vectorization,
                           n_workers=args.n_workers, init_checkpoint=args.init_checkpoint,
                           batch_workflows=args.batch_workflows, seeds_per_workflow=args.seeds_per_workflow,
                           parallel_start_method=args.parallel_start_method, scenario=args.scenario,
                           compile=args.compile)
        search = WorkflowSearch(cfg, args.out, progress=not args.no_progress)
        if search.state_path.exists():
            raise ValueError(f"{args.out} already holds a search: continue it with --resume {args.out}, or "
                             "choose another --out")
    executor = None
    if args.ray is not None:
        if search.cfg.batch_workflows > 1 or search.cfg.seeds_per_workflow > 1:
            raise ValueError("--ray trains one run per task: drop --batch-workflows/--seeds-per-workflow, or --ray "
                             "(use one)")
        from workflow_rl.search.ray_executor import RayExecutor

        executor = RayExecutor(args.ray, args.ray_workers, args.ray_cpus_per_task)
        print(f"Ray: {args.ray_workers} workflows at a time ({args.ray})")
    c = search.cfg
    print(f"workflow search vs {c.red_agent} on {c.engine}: budget {c.total_episodes:,} training episodes, "
          f"{c.n_envs} envs, <= {c.workflow_cap:,} episodes per workflow"
          + (f" ({c.seeds_per_workflow} seeds)" if c.seeds_per_workflow > 1 else "") + f" -> {search.out}")
    try:
        summary = search.run(executor)
    except (SearchInterrupted, KeyboardInterrupt):
        print(f"interrupted: state saved; continue with `workflow-rl search --resume {search.out}`")
        return 130
    print(f"best workflow: {summary['best_workflow_codes']} ({' > '.join(summary['best_workflow'] or [])}) "
          f"return {summary['best_reward']:.2f} ± {summary['best_ci95']:.2f}"
          f"{'' if summary['best_is_compliant'] else ' (no workflow reached the compliance threshold)'}")
    print(f"{summary['workflows_evaluated']} workflows, {summary['episodes_used']:,} / {summary['total_episodes']:,} "
          f"episodes, {summary['wall_time_s']:.0f} s")
    print(f"report: {search.out / 'report.md'}")
    return 0


# --------------------------------------------------------------------------------------------------- parity / bench
def cmd_parity(args) -> int:
    """Scripted defenders on the native and the real CybORG engine, compared cell by cell."""
    from pathlib import Path

    from workflow_rl.parity import markdown, parity
    from workflow_rl.policies import POLICIES

    policies = args.policies or list(POLICIES)
    print(f"parity: {len(policies)} policies x {len(args.red_agents)} red agents, {args.episodes} CybORG episodes "
          f"and {args.native_episodes} native episodes per cell")
    cells = parity(args.red_agents, policies, args.episodes, args.native_episodes, args.seed, args.vectorization,
                   args.parallel_start_method, args.scenario)
    md = markdown(cells)
    print(md)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(md + "\n")
        print(f"wrote {args.out}")
    return 0 if all(c.equivalent for c in cells) else 1


def cmd_bench(args) -> int:
    """Transitions/s of every engine mode over n_envs; Markdown + CSV + PNG."""
    from workflow_rl.bench import run_bench

    run_bench(args.sizes, args.modes, args.red_agent, args.cyborg_steps, args.repeats, args.scenario, args.out,
              args.parallel_start_method)
    print(f"wrote {args.out}/engines.md, engines.csv and engines.png")
    return 0


# ---------------------------------------------------------------------------------------------------- cyborg-setup
def cmd_cyborg_setup(args) -> int:
    from workflow_rl.envs.cyborg import install_scenario, package_scenario_dir

    path = install_scenario(args.scenario)
    print(f"CybORG Scenario2 data ready: {path}")
    print(f"(csle-cyborg reads its scenarios from {package_scenario_dir()})")
    return 0


# ------------------------------------------------------------------------------------------------------------ main
def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="workflow-rl", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    d = sub.add_parser("demo", help="scripted defender on native envs vs B_line and Meander (returns, speed)")
    d.add_argument("--n-envs", type=_positive_int, default=4096)
    d.add_argument("--episodes", type=_positive_int, default=8192, help="episodes per red agent")
    d.add_argument("--policy", default="restore_compromised")
    d.add_argument("--red-agents", nargs="+", default=["B_lineAgent", "RedMeanderAgent"])
    d.add_argument("--seed", type=int, default=0)
    d.set_defaults(func=cmd_demo)

    t = sub.add_parser("train", help="train a workflow-conditioned PPO policy")
    t.add_argument("--workflow", default="critical_first",
                   help="named order, type names or codes D,E,OS,OH,U (e.g. 'D,OS,E,OH,U'), or 'none' for plain PPO")
    _add_engine_flags(t, 200)
    t.add_argument("--num-episodes", type=_positive_int, default=None,
                   help="total training episodes over all envs (never exceeded)")
    _add_training_flags(t, update_every_steps=100)
    t.add_argument("--episode-length", type=_positive_int, default=100)
    t.add_argument("--update-epochs", type=_positive_int, default=4)
    t.add_argument("--num-minibatches", type=_positive_int, default=8)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--seeds", type=_positive_int, default=1, metavar="N",
                   help="train N independent seeds (--seed, --seed+1, ...) in one batch; runs go to RUN_DIR/seed_i "
                        "and summary.json reports the spread across seeds")
    t.add_argument("--out", default="runs/train", help="run directory (RUN_DIR)")
    t.add_argument("--checkpoint-dir", default=None, help="default: RUN_DIR/checkpoints")
    t.add_argument("--resume", action="store_true", help="continue from the checkpoint in --checkpoint-dir")
    t.add_argument("--tensorboard", action="store_true", help="also write TensorBoard scalars to RUN_DIR/tb")
    t.add_argument("--no-progress", action="store_true", help="print a line per update instead of a progress bar")
    t.add_argument("--eval-episodes", type=int, default=1000, help="held-out evaluation episodes (0: skip)")
    t.add_argument("--eval-length", type=_positive_int, default=100)
    t.add_argument("--eval-engine", default="native", choices=["native", "cyborg"])
    t.add_argument("--eval-sampled", action="store_true", help="evaluate the sampled policy instead of greedy")
    t.set_defaults(func=cmd_train)

    e = sub.add_parser("evaluate", help="CAGE2 evaluation of a checkpoint or a baseline")
    e.add_argument("checkpoint", help=f"a checkpoint file, or a baseline: {', '.join(BASELINES)}")
    e.add_argument("--workflow", default=None, help="workflow for compliance (default: the checkpoint's)")
    e.add_argument("--engine", default="native", choices=["native", "cyborg"])
    e.add_argument("--red-agents", nargs="+", default=["B_lineAgent", "RedMeanderAgent", "SleepAgent"])
    e.add_argument("--lengths", nargs="+", type=_positive_int, default=[30, 50, 100])
    e.add_argument("--episodes", type=_positive_int, default=1000)
    e.add_argument("--mode", default="both", choices=["greedy", "sampled", "both"])
    e.add_argument("--device", default="cpu")
    e.add_argument("--seed", type=int, default=0)
    _add_cyborg_flags(e, "shared_memory")
    e.add_argument("--out", default=None, help="folder for evaluation.json and evaluation.md")
    e.set_defaults(func=cmd_evaluate)

    g = sub.add_parser("search", help="GP-UCB search for the best workflow (the main job)")
    _add_engine_flags(g, 200)
    g.add_argument("--total-episodes", type=_positive_int, default=100_000,
                   help="training episodes for the whole search (evaluation not counted); never exceeded")
    _add_training_flags(g, update_every_steps=25)
    g.add_argument("--inherit", default="nearest", choices=["nearest", "previous", "none"])
    g.add_argument("--gp-beta", type=float, default=None,
                   help="fixed UCB beta (default: Srinivas et al.'s finite-set schedule, delta 0.1)")
    g.add_argument("--n-init", type=_positive_int, default=3, help="initial design size (farthest-point)")
    g.add_argument("--eval-episodes", type=_positive_int, default=500)
    g.add_argument("--eval-length", type=_positive_int, default=100)
    g.add_argument("--max-iterations", type=_positive_int, default=None)
    g.add_argument("--exhaustive", action="store_true", help="train all 120 workflows (ground truth)")
    g.add_argument("--workflows", nargs="+", default=None,
                   help="train exactly these workflows (';'-separated or several arguments; 'named' = the six)")
    g.add_argument("--init-checkpoint", default=None,
                   help="start every workflow without a parent (all, with --exhaustive) from this checkpoint")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--out", default="runs/search", help="run directory (RUN_DIR)")
    g.add_argument("--resume", default=None, metavar="RUN_DIR", help="continue the search saved in RUN_DIR")
    g.add_argument("--no-progress", action="store_true")
    g.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS",
                   help="train several workflows at once as Ray tasks: no value starts Ray on this machine, "
                        "ADDRESS joins a cluster (e.g. ray://head:10001)")
    g.add_argument("--ray-workers", type=_positive_int, default=2, help="workflows trained at once")
    g.add_argument("--ray-cpus-per-task", type=float, default=1.0)
    g.add_argument("--batch-workflows", type=_positive_int, default=1, metavar="Q",
                   help="train Q workflows at once in this process, in one batch (one engine call and one PPO "
                        "update serve all Q; the way to fill a GPU); 1 = one at a time")
    g.add_argument("--seeds-per-workflow", type=_positive_int, default=1, metavar="K",
                   help="train K independent seeds of each workflow (in the same batch) and observe their mean "
                        "held-out return: averages out seed noise; each seed gets --max-episodes x --n-envs")
    g.set_defaults(func=cmd_search)

    q = sub.add_parser("parity", help="native vs real CybORG on the same scripted defenders")
    q.add_argument("--red-agents", nargs="+", default=["B_lineAgent", "RedMeanderAgent"])
    q.add_argument("--policies", nargs="+", default=None, help="default: all six reference policies")
    q.add_argument("--episodes", type=_positive_int, default=200, help="CybORG episodes per cell")
    q.add_argument("--native-episodes", type=_positive_int, default=20_000)
    q.add_argument("--seed", type=int, default=0)
    _add_cyborg_flags(q, "shared_memory")
    q.add_argument("--out", default=None, help="also write the Markdown table here")
    q.set_defaults(func=cmd_parity)

    b = sub.add_parser("bench", help="engine throughput: CybORG modes and native, over n_envs")
    b.add_argument("--sizes", nargs="+", type=_positive_int, default=[1, 2, 4, 8, 16])
    b.add_argument("--modes", nargs="+", default=None,
                   choices=["cyborg-sequential", "cyborg-sync", "cyborg-pipes", "cyborg-shm", "cyborg-episodes",
                            "native-cpu", "native-cuda"])
    b.add_argument("--red-agent", default="B_lineAgent")
    b.add_argument("--cyborg-steps", type=_positive_int, default=400, help="vector steps x n_envs per CybORG cell")
    b.add_argument("--repeats", type=_positive_int, default=3, help="native cells: median of this many runs")
    b.add_argument("--parallel-start-method", default=None, choices=["spawn", "fork", "forkserver"])
    b.add_argument("--scenario", default=None)
    b.add_argument("--out", default="benchmarks/results")
    b.set_defaults(func=cmd_bench)

    c = sub.add_parser("cyborg-setup", help="install/check CybORG's Scenario2 data for the cyborg engine")
    c.add_argument("--scenario", default=None,
                   help="folder with Scenario2.yaml and images/ (default: $WORKFLOW_RL_CAGE2_SCENARIO)")
    c.set_defaults(func=cmd_cyborg_setup)
    return p


def main(argv: list[str] | None = None) -> int:
    from workflow_rl.envs.cyborg import CybORGUnavailable
    from workflow_rl.rl.checkpoint import CheckpointError

    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, CybORGUnavailable, FileNotFoundError, CheckpointError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except RuntimeError as e:   # a worker process or Ray task failed: its own traceback is in the message
        from workflow_rl.envs.cyborg_vector import EngineWorkerError
        from workflow_rl.search.ray_executor import SearchWorkerError

        if isinstance(e, (EngineWorkerError, SearchWorkerError)):
            print(f"error: {e}", file=sys.stderr)
            return 1
        raise
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
