"""The ``workflow-rl`` command line.

Every bad input ends in one ``error: ...`` line naming the fix (exit status 2).

The flags of ``train`` and ``search`` are generated from the config dataclasses (``cli.flags``); each subcommand's
flags sit next to its command (``cli.train``, ``cli.evaluate``, ``cli.search``, ``cli.tools``).
"""
from __future__ import annotations

import argparse
import errno
import functools
import os
import signal
import sys
import typing

from workflow_rl import __version__
from workflow_rl.interrupt import Terminated, terminate_as_interrupt

# Nothing slow is imported at the top of this module (numpy, torch, the subcommands' modules load inside ``main``):
# ``import workflow_rl.cli`` takes milliseconds, so a Ctrl-C in the first second, while they load, reaches the
# handling in ``main`` instead of printing a traceback (tests/test_out_files.py checks it in a real process).


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, no usage dump
        self.exit(2, f"error: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    from workflow_rl.cli.evaluate import add_evaluate
    from workflow_rl.cli.expert import add_expert
    from workflow_rl.cli.replay import add_replay
    from workflow_rl.cli.search import add_search
    from workflow_rl.cli.tools import add_tools
    from workflow_rl.cli.train import add_train

    p = _Parser(prog="workflow-rl", description=__doc__.split("\n")[0].replace("``", ""))
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    add_train(sub)
    add_evaluate(sub)
    add_search(sub)
    add_tools(sub)
    add_replay(sub)
    add_expert(sub)
    for name in COMPUTING:
        sub.choices[name].add_argument(
            "--threads", type=thread_count, default=None, metavar="N",
            help="threads torch and numba compute with: a count, 'auto' (default: from the work and the cores this "
                 "process may use; 1 for small networks and batches, so a busy machine does not slow the run "
                 "several-fold) or 'off' (the libraries' own: one per core); also $WORKFLOW_RL_THREADS")
    from workflow_rl.cli.numbers import bind_ranges

    for name, parser in sub.choices.items():   # every numeric flag reads its range from workflow_rl/ranges.py
        bind_ranges(parser, name)
    return p


COMPUTING = ("train", "search", "evaluate", "replay", "demo", "parity", "curves", "bench", "expert-iterate")
"""The commands that compute (train, act, step engines): they take ``--threads`` (``workflow_rl.threads``)."""


def thread_count(text: str):   # its range: ranges.RANGES["threads"], read by parse_threads
    """argparse type of ``--threads``: ``threads.parse_threads``, its message as argparse's."""
    from workflow_rl.threads import parse_threads

    try:
        return parse_threads(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix("threads ")) from None


thread_count.range_key = "threads"


def main(argv: list[str] | None = None) -> int:
    """Run the command line ``argv`` (default: this process's) and return its exit status. A Ctrl-C at any moment,
    the first second's imports included, ends it with one ``interrupted`` line (130); SIGTERM while a command runs
    with ``terminated`` (143)."""
    try:
        return _main(argv)
    except Terminated:
        print("terminated", file=sys.stderr)
        return 128 + signal.SIGTERM
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def run() -> typing.NoReturn:
    """The ``workflow-rl`` program (its console script, ``python -m workflow_rl.cli``): :func:`main`, then exit
    with its status. A second Ctrl-C while the first is reported still ends in 130, and from then on one during
    the interpreter's shutdown (worker pools, Ray, buffered output) ends the process at once: no traceback from
    wherever the shutdown was. (Set here, not in :func:`main`, which tests call in-process.)"""
    try:
        code = main()
    except KeyboardInterrupt:
        code = 130
    signal.signal(signal.SIGINT, _exit_interrupted)
    sys.exit(code)


def _exit_interrupted(signum, frame) -> None:
    """A Ctrl-C once :func:`main` has returned: end now, with the interrupt's status."""
    os.write(2, b"interrupted\n")
    os._exit(130)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line ``argv`` parsed, with ``args.typed``: the options it typed (a recipe's or a starting
    checkpoint's setting fills the others)."""
    from workflow_rl.cli.flags import typed_options

    args = build_parser().parse_args(argv)
    args.typed = typed_options(build_parser, sys.argv[1:] if argv is None else list(argv), args.command)
    return args


def job(argv: list[str]):
    """What a ``train``, ``search``, ``evaluate``, ``replay`` or ``expert-iterate`` command line stands for, without
    running it: the arguments of the ``workflow_rl.runs`` function that runs it (``(TrainConfig, TrainRun)``,
    ``(SearchConfig, SearchRun)``, ``(EvaluateConfig,)``, ``(ReplayConfig,)``, ``(ExpertConfig, ExpertRun)``), for
    scripts that build runs from flags (benchmarks/studies) and call the job functions themselves."""
    from workflow_rl.cli.evaluate import evaluate_config
    from workflow_rl.cli.expert import expert_job
    from workflow_rl.cli.replay import replay_config
    from workflow_rl.cli.search import search_job
    from workflow_rl.cli.train import train_job

    args = parse(argv)
    jobs = {"train": train_job, "search": search_job, "evaluate": lambda a: (evaluate_config(a),),
            "replay": lambda a: (replay_config(a),), "expert-iterate": expert_job}
    if args.command not in jobs:
        raise ValueError(f"{args.command} is no job of workflow_rl.runs: use one of {', '.join(jobs)}")
    return jobs[args.command](args)


def _main(argv: list[str] | None) -> int:
    from workflow_rl.envs.cyborg import CybORGUnavailable
    from workflow_rl.rl.checkpoint import CheckpointError

    args = parse(argv)
    try:
        with terminate_as_interrupt():
            try:
                if args.command in COMPUTING:   # acting-sized first; train and search size up once configured
                    from workflow_rl import threads

                    threads.configure(threads.Work(), args.threads)
                return args.func(args)
            except Exception as e:
                stop = _interrupt_behind(e)
                if stop is None:
                    raise
                raise stop from None   # a failure while stopping (a worker gone first) reports the stop
    except BrokenPipeError as e:
        if _stdout_widowed():
            return _stdout_closed()
        print(f"error: {os_error_line(e)}", file=sys.stderr)
        return 2
    except (ValueError, CybORGUnavailable, FileNotFoundError, CheckpointError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:   # the disk is full, a file grew past a limit, a folder vanished: the machine, not a bug
        print(f"error: {os_error_line(e)}", file=sys.stderr)
        return 2
    except RuntimeError as e:   # a worker process or Ray task failed: its own traceback is in the message
        from workflow_rl.envs.cyborg_vector import EngineWorkerError
        from workflow_rl.search.ray_executor import SearchWorkerError

        if isinstance(e, (EngineWorkerError, SearchWorkerError)):
            print(f"error: {e}", file=sys.stderr)
            return 1
        raise


FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
"""The errors of a write that ran out of room: the disk or quota is full, or a file reached the size limit."""


def os_error_line(e: OSError) -> str:
    """One line for an OSError that ends a command: what failed, on which file, and what to do. Every file a run
    writes is written whole or not at all (``files.atomic_write``), so a run stopped this way continues from its
    last checkpoint."""
    where = f" writing {e.filename}" if e.filename else ""
    if e.errno in FULL:
        return (f"{e.strerror}{where}: make room (free disk space, or raise the quota or file-size limit) and run "
                "the command again; a train or search run continues from its last checkpoint with --resume")
    return f"{e.strerror or e}{' (' + str(e.filename) + ')' if e.filename else ''}: check the path and run again"


def _interrupt_behind(e: BaseException) -> KeyboardInterrupt | None:
    """The Ctrl-C or SIGTERM during whose handling ``e`` was raised, if any (its ``__context__`` chain)."""
    seen = set()
    while e is not None and id(e) not in seen:
        if isinstance(e, KeyboardInterrupt):
            return e
        seen.add(id(e))
        e = e.__context__
    return None


def _stdout_widowed() -> bool:
    """Whether stdout is a pipe whose reader has gone (poll reports an error on its write end), as opposed to a
    worker's pipe breaking."""
    import select

    try:
        p = select.poll()
        p.register(sys.stdout.fileno(), select.POLLOUT)
        return any(ev & select.POLLERR for _, ev in p.poll(0))
    except (OSError, ValueError, AttributeError):   # not a real file (a test's capture)
        return True


def _stdout_closed() -> int:
    """Whoever read stdout stopped (``workflow-rl demo | head -1``): end quietly, as Unix tools do, with the status
    of a process ended by SIGPIPE. Stdout is pointed at /dev/null first, so the interpreter's last flush at exit
    does not raise again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):   # not a real file (a test's capture)
        pass
    return 128 + signal.SIGPIPE


if __name__ == "__main__":
    run()
