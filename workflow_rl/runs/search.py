"""``runs.search``: one workflow search (``workflow-rl search``), callable from Python.

A :class:`~workflow_rl.search.config.SearchConfig` (None to resume) and a :class:`SearchRun` in, the run folder written
and a :class:`SearchResult` out.
"""
from __future__ import annotations

import signal
from dataclasses import dataclass
from pathlib import Path

from workflow_rl import threads
from workflow_rl.checks import check_config
from workflow_rl.files import check_out_dir, file_version
from workflow_rl.interrupt import Terminated
from workflow_rl.ranges import check_fields
from workflow_rl.runs.rundir import RunDirLock, check_run_folder, remove_run
from workflow_rl.search.config import SearchConfig


@dataclass(frozen=True)
class SearchRun:
    """How a search runs beside its settings: its folder, whether it continues the search saved there or
    replaces what the folder holds, and where its workflows train (here, or as Ray tasks)."""

    out: Path = Path("runs/search")
    resume: bool = False
    """Continue the search saved in ``out`` with the settings it started with (the config is then None)."""
    overwrite: bool = False
    progress: bool = True
    ray: str | None = None
    """None: train here; 'local': start Ray on this machine; an address: join that cluster."""
    ray_workers: int = 2
    """workflows trained at once"""
    ray_cpus_per_task: float = 1.0
    threads: int | str | None = None


@dataclass
class SearchResult:
    """What a search ended with: its summary (None when stopped) and the exit status the command reports."""

    out: Path
    summary: dict | None
    exit_code: int = 0


def report_line(out: Path) -> str:
    """Where the search's report is, or that it was not written (never a file that is not there)."""
    report = out / "report.md"
    if report.is_file():
        return f"report: {report}"
    return f"no report (see the warning above); summary: {out / 'summary.json'}"


def search(cfg: SearchConfig | None, run: SearchRun) -> SearchResult:
    """Run (or with ``run.resume`` continue) a search: every setting and the state file checked before the folder
    is touched, then the search under the folder's lock, one process per folder."""
    if cfg is not None:
        check_config("cfg", cfg, SearchConfig)
    check_config("run", run, SearchRun)
    check_fields(run)   # --ray-workers, --ray-cpus-per-task (workflow_rl/ranges.py)
    name = "--resume" if run.resume else "--out"
    if run.resume:
        check_out_dir(name, run.out)
        read = file_version(Path(run.out) / "search_state.json")   # taken before the read it vouches for
    found = _open(cfg, run)
    with RunDirLock(run.out):
        # again under the lock: what another process left is what counts. A state file another process changed
        # since it was read is read (and its settings validated) again; an unchanged one is not, but the folder
        # and the checkpoints it names are checked again (a search killed between writing a checkpoint and its
        # state leaves the one changed and the other not). A new search's settings, validated once above, do not
        # depend on the folder: only the folder is checked again.
        if not run.resume:
            check_run_folder(run.out, "search", False, run.overwrite, search_inputs(found.cfg))
        elif file_version(Path(run.out) / "search_state.json") != read:
            found = _open(cfg, run)
        else:
            from workflow_rl.search.search import check_run_files

            check_run_folder(run.out, "search", True, False)
            check_run_files(found.out, found.cfg, found.state)
        threads.configure(found.cfg.thread_work(), run.threads)
        executor = _ray_executor(run, found.cfg)
        if run.overwrite:
            remove_run(run.out)
        return _run(found, executor, fresh=not run.resume)


def _open(cfg: SearchConfig | None, run: SearchRun):
    """The search to run: the one saved in ``run.out`` (resume), or a new one of ``cfg`` there."""
    from workflow_rl.search.search import WorkflowSearch

    if run.resume:
        check_run_folder(run.out, "search", True, False)   # a run's files are plain files (a FIFO would block)
        return WorkflowSearch.resume(run.out, progress=run.progress)
    check_out_dir("--out", run.out)
    found = WorkflowSearch(cfg, run.out, progress=run.progress)
    check_run_folder(run.out, "search", False, run.overwrite, search_inputs(found.cfg))
    return found


def search_inputs(cfg: SearchConfig) -> list[Path | None]:
    """The files a search reads, which ``--overwrite`` must not delete: its starting checkpoint, its ground truth
    and the CybORG scenario folder."""
    from workflow_rl.rl.pretrained import spec_file

    scenario = cfg.train.scenario
    return [spec_file(cfg.init_checkpoint) if cfg.init_checkpoint else None,
            Path(cfg.ground_truth) if cfg.ground_truth else None, Path(scenario) if scenario else None]


def _ray_executor(run: SearchRun, cfg: SearchConfig):
    if run.ray is None:
        return None
    if cfg.batch_workflows > 1 or cfg.seeds_per_workflow > 1:
        raise ValueError("--ray trains one run per task: drop --batch-workflows/--seeds-per-workflow, or --ray "
                         "(use one)")
    from workflow_rl.search.ray_executor import RayExecutor

    executor = RayExecutor(run.ray, run.ray_workers, run.ray_cpus_per_task)
    print(f"Ray: {run.ray_workers} workflows at a time ({run.ray})")
    return executor


def _run(search, executor, fresh: bool) -> SearchResult:
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
        return SearchResult(search.out, None, 128 + signal.SIGTERM if isinstance(e, Terminated) else 130)
    except Exception:
        if fresh and not search.state.iterations:   # the folder held no run before (or --overwrite cleared it)
            remove_run(search.out, "search")
        raise
    print(f"{summary['workflows_evaluated']} workflows, {summary['episodes_used']:,} / {summary['total_episodes']:,} "
          f"episodes, {summary['wall_time_s']:.0f} s; " + report_line(search.out))
    if "ground_truth_statement" in summary:
        print(f"ground truth: {search.out / 'ground_truth.csv'}. {summary['ground_truth_statement']}")
    from workflow_rl.search.outputs import answer_line, mode_line  # here: scipy costs other commands ~0.7 s

    mode = mode_line(summary)
    if mode:
        print(mode)
    print(answer_line(summary))
    return SearchResult(search.out, summary)
