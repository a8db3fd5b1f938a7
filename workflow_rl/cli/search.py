"""``workflow-rl search``: the workflow search (GP-UCB by default, ``--strategy random`` the baseline; the main job)."""
from __future__ import annotations

import dataclasses
from pathlib import Path

from workflow_rl.cli.flags import OVERWRITE_HELP, add_flags, config_from, settings
from workflow_rl.cli.numbers import checked_by
from workflow_rl.cli.train import add_training_flags
from workflow_rl.files import check_out_dir
from workflow_rl.rl.config import flag
from workflow_rl.runs.search import SearchRun, search
from workflow_rl.runs.settings import inherit_settings, search_workflows
from workflow_rl.search.config import PER_WORKFLOW, SearchConfig


def add_search(sub) -> None:
    g = sub.add_parser("search", help="GP-UCB search for the best workflow (the main job)")
    defaults = SearchConfig().to_dict()
    names = add_flags(g.add_argument_group("search"), SearchConfig, defaults)
    names += add_training_flags(g, defaults, skip=PER_WORKFLOW)
    g.add_argument("--exhaustive", action="store_true", help="train all 120 workflows, or all those --workflows names (ground truth)")
    g.add_argument("--out", default="runs/search", help="run directory (RUN_DIR)")
    g.add_argument("--resume", default=None, metavar="RUN_DIR", help="continue the search saved in RUN_DIR")
    g.add_argument("--no-progress", action="store_true")
    g.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS", type=ray_address,
                   help="train several workflows at once as Ray tasks: no value starts Ray on this machine, "
                        "ADDRESS joins a cluster (e.g. ray://head:10001)")
    run = add_flags(g, SearchRun, dataclasses.asdict(SearchRun()), skip=("out", "resume", "progress", "ray", "threads"),
                    check=True, notes={"overwrite": OVERWRITE_HELP.format(out="--out")})
    g.set_defaults(func=cmd_search, config_names=names, run_names=run)


def ray_address(text: str) -> str:
    """argparse type of ``--ray``: ``search.ray_executor.check_ray_address``."""
    from workflow_rl.search.ray_executor import check_ray_address

    return checked_by(check_ray_address, "--ray ")(text)


def _check_resume_alone(args) -> None:
    """``--resume`` continues a search with the settings it started with (its workflows are measured alike), so a
    setting given beside it would be ignored: refused instead, naming it."""
    typed = [n for n in (*args.config_names, "exhaustive", "out", "overwrite") if n in args.typed]
    if typed:
        names = ", ".join(flag(n) for n in typed)
        raise ValueError(f"--resume continues {args.resume} with the settings it started with: drop {names} (a "
                         "search's settings cannot change once it ran; start a new search with --out to change them)")


def cmd_search(args) -> int:
    """GP-UCB workflow search with policy inheritance under an exact episode budget; one process per RUN_DIR."""
    return search(*search_job(args)).exit_code


def search_job(args) -> tuple[SearchConfig | None, SearchRun]:
    """The parsed flags as the ``(SearchConfig, SearchRun)`` that ``runs.search.search`` takes (no config on
    ``--resume``: the search continues with its own); a starting checkpoint's settings where a flag was not typed."""
    run = config_from(SearchRun, args, args.run_names, out=Path(args.resume or args.out), resume=bool(args.resume),
                      progress=not args.no_progress, ray=args.ray, threads=args.threads)
    if args.resume:
        _check_resume_alone(args)
        return None, run
    check_out_dir("--out", args.out)
    given = settings(args, args.config_names)
    given = inherit_settings(args.typed, given["init_checkpoint"], given)
    return SearchConfig(**{**given, "workflows": search_workflows(args.workflows, args.exhaustive)}), run
