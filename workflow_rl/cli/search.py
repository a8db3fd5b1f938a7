"""``workflow-rl search``: the workflow search (GP-UCB by default, ``--strategy random`` the baseline; the main job)."""
from __future__ import annotations

import signal
from pathlib import Path

from workflow_rl import threads
from workflow_rl.files import check_out_dir
from workflow_rl.cli.flags import add_flags, inherit_settings, settings
from workflow_rl.cli.numbers import positive_float, positive_int
from workflow_rl.cli.train import add_training_flags
from workflow_rl.interrupt import Terminated
from workflow_rl.rl.config import flag
from workflow_rl.files import file_version
from workflow_rl.runs.rundir import check_run_folder, remove_run, RunDirLock
from workflow_rl.search.config import PER_WORKFLOW, SearchConfig
from workflow_rl.workflow import NAMED, Workflow, all_workflows


def add_search(sub) -> None:
    g = sub.add_parser("search", help="GP-UCB search for the best workflow (the main job)")
    defaults = SearchConfig().to_dict()
    names = add_flags(g.add_argument_group("search"), SearchConfig, defaults)
    names += add_training_flags(g, defaults, skip=PER_WORKFLOW)
    g.add_argument("--exhaustive", action="store_true", help="train all 120 workflows, or all those --workflows names (ground truth)")
    g.add_argument("--out", default="runs/search", help="run directory (RUN_DIR)")
    g.add_argument("--resume", default=None, metavar="RUN_DIR", help="continue the search saved in RUN_DIR")
    g.add_argument("--overwrite", action="store_true",
                   help="replace what --out holds (default: refuse a folder that is not empty): the files a train or "
                        "search run wrote there are deleted first, other files are left alone")
    g.add_argument("--no-progress", action="store_true")
    g.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS",
                   help="train several workflows at once as Ray tasks: no value starts Ray on this machine, "
                        "ADDRESS joins a cluster (e.g. ray://head:10001)")
    g.add_argument("--ray-workers", type=positive_int, default=2, help="workflows trained at once")
    g.add_argument("--ray-cpus-per-task", type=positive_float, default=1.0)
    g.set_defaults(func=cmd_search, config_names=names)


def _workflow_list(args) -> list[str] | None:
    """--workflows: the ones named (';'-separated or several arguments; 'named': the six); --exhaustive alone: all
    120 (with --workflows: every one named, a ground truth over that list, as benchmarks/studies/regret.py builds)."""
    if args.exhaustive and not args.workflows:
        return [w.codes for w in all_workflows()]
    if not args.workflows:
        return None
    items = args.workflows if len(args.workflows) > 1 else args.workflows[0].split(";")
    if items == ["named"]:
        items = list(NAMED)
    return [Workflow.parse(w).codes for w in items]


def _search(args):
    from workflow_rl.search.search import WorkflowSearch

    if args.resume:
        _check_resume_alone(args)
        check_run_folder(args.resume, "search", True, False)   # a run's files are plain files (a FIFO would block)
        return WorkflowSearch.resume(args.resume, progress=not args.no_progress)
    check_out_dir("--out", args.out)
    given = settings(args, args.config_names)
    given = inherit_settings(args, "search", given["init_checkpoint"], given)
    cfg = SearchConfig(**{**given, "workflows": _workflow_list(args)})
    search = WorkflowSearch(cfg, args.out, progress=not args.no_progress)
    check_run_folder(args.out, "search", False, args.overwrite, _inputs(cfg))
    return search


def _inputs(cfg: SearchConfig) -> list[Path | None]:
    """The files a search reads, which ``--overwrite`` must not delete: its starting checkpoint, its ground truth
    and the CybORG scenario folder."""
    from workflow_rl.rl.pretrained import spec_file

    scenario = cfg.train.scenario
    return [spec_file(cfg.init_checkpoint) if cfg.init_checkpoint else None,
            Path(cfg.ground_truth) if cfg.ground_truth else None, Path(scenario) if scenario else None]


def _check_resume_alone(args) -> None:
    """``--resume`` continues a search with the settings it started with (its workflows are measured alike), so a
    setting given beside it would be ignored: refused instead, naming it."""
    typed = args.given("search", [*args.config_names, "exhaustive", "out", "overwrite"])
    if typed:
        names = ", ".join(flag(n) for n in typed)
        raise ValueError(f"--resume continues {args.resume} with the settings it started with: drop {names} (a "
                         "search's settings cannot change once it ran; start a new search with --out to change them)")


def _ray_executor(args, cfg: SearchConfig):
    if args.ray is None:
        return None
    if cfg.batch_workflows > 1 or cfg.seeds_per_workflow > 1:
        raise ValueError("--ray trains one run per task: drop --batch-workflows/--seeds-per-workflow, or --ray "
                         "(use one)")
    from workflow_rl.search.ray_executor import RayExecutor

    executor = RayExecutor(args.ray, args.ray_workers, args.ray_cpus_per_task)
    print(f"Ray: {args.ray_workers} workflows at a time ({args.ray})")
    return executor


def cmd_search(args) -> int:
    """GP-UCB workflow search with policy inheritance under an exact episode budget; one process per RUN_DIR."""
    if args.resume:
        check_out_dir("--resume", args.resume)
        read = file_version(Path(args.resume) / "search_state.json")   # taken before the read it vouches for
    search = _search(args)   # every flag and the state file checked before the folder is touched
    with RunDirLock(args.resume or args.out):
        # again under the lock: what another process left is what counts. A state file another process changed
        # since it was read is read (and its settings validated) again; an unchanged one is not, but the folder
        # and the checkpoints it names are checked again (a search killed between writing a checkpoint and its
        # state leaves the one changed and the other not). A new search's settings, validated once above, do not
        # depend on the folder: only the folder is checked again.
        if not args.resume:
            check_run_folder(args.out, "search", False, args.overwrite, _inputs(search.cfg))
        elif file_version(Path(args.resume) / "search_state.json") != read:
            search = _search(args)
        else:
            from workflow_rl.search.search import check_run_files

            check_run_folder(args.resume, "search", True, False)
            check_run_files(search.out, search.cfg, search.state)
        threads.configure(search.cfg.thread_work(), args.threads)
        executor = _ray_executor(args, search.cfg)
        if args.overwrite:
            remove_run(args.out)
        return _run(search, executor, fresh=not args.resume)


def _run(search, executor, fresh: bool) -> int:
    """Run the search and report; a new search that fails before its first workflow is recorded removes what it
    wrote, so the folder does not then demand a ``--resume`` that would repeat the failure."""
    from workflow_rl.search.search import SearchInterrupted

    c, t = search.cfg, search.cfg.train
    print(f"workflow search vs {t.red_agent} on {t.engine}: budget {c.total_episodes:,} training episodes, "
          f"{t.n_envs} envs, <= {c.workflow_cap:,} episodes per workflow"
          + (f" ({c.seeds_per_workflow} seeds)" if c.seeds_per_workflow > 1 else "") + f" -> {search.out}")
    if c.batch_slots < c.batch_workflows:
        print(f"--batch-workflows {c.batch_workflows}: training {c.batch_slots} at a time, the most that can train "
              f"at once here ({c.most_at_once()[1]}); more slots would only step envs for nothing")
    try:
        summary = search.run(executor)
    except (SearchInterrupted, KeyboardInterrupt) as e:
        print(f"{'terminated' if isinstance(e, Terminated) else 'interrupted'}: state saved; continue with "
              f"`workflow-rl search --resume {search.out}`")
        return 128 + signal.SIGTERM if isinstance(e, Terminated) else 130
    except Exception:
        if fresh and not search.state.iterations:   # the folder held no run before (or --overwrite cleared it)
            remove_run(search.out, "search")
        raise
    print(f"{summary['workflows_evaluated']} workflows, {summary['episodes_used']:,} / {summary['total_episodes']:,} "
          f"episodes, {summary['wall_time_s']:.0f} s; report: {search.out / 'report.md'}")
    if "ground_truth_statement" in summary:
        print(f"ground truth: {search.out / 'ground_truth.csv'}. {summary['ground_truth_statement']}")
    from workflow_rl.search.outputs import answer_line, mode_line  # here: scipy costs other commands ~0.7 s

    mode = mode_line(summary)
    if mode:
        print(mode)
    print(answer_line(summary))
    return 0
