"""The ``workflow-rl`` command line.

Every bad input ends in one ``error: ...`` line naming the fix (exit status 2).

The settings' flags of every job are generated from its config dataclasses (``cli.flags``: a field's docstring is
its flag's help); each subcommand's flags sit next to its command (``cli.train``, ``cli.evaluate``, ``cli.search``, ``cli.tools``). The command line only
reads flags into typed configs and calls the job's function in ``workflow_rl.runs``; which failures are one line
is ``runs.failures``, and how a stop or a closed stdout ends it ``workflow_rl.interrupt``.
"""
from __future__ import annotations

import argparse
import signal
import sys
import typing

from workflow_rl import __version__
from workflow_rl.interrupt import Terminated, exit_on_interrupt, stdout_closed, stdout_reader_gone, stops_reported

# Nothing slow is imported at the top of this module (numpy, torch, the subcommands' modules load inside ``main``):
# ``import workflow_rl.cli`` takes milliseconds, so a Ctrl-C in the first second, while they load, reaches the
# handling in ``main`` instead of printing a traceback (tests/test_out_files.py checks it in a real process).


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, no usage dump
        self.exit(2, f"error: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    from workflow_rl.cli.evaluate import add_evaluate
    from workflow_rl.cli.expert import add_expert
    from workflow_rl.cli.numbers import bind_ranges, thread_count
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
    for name, parser in sub.choices.items():   # every numeric flag reads its range from workflow_rl/ranges.py
        bind_ranges(parser, name)
    return p


COMPUTING = ("train", "search", "evaluate", "replay", "demo", "parity", "curves", "bench", "expert-iterate")
"""The commands that compute (train, act, step engines): they take ``--threads`` (``workflow_rl.threads``)."""


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
    the interpreter's shutdown ends the process at once (``interrupt.exit_on_interrupt``). (Set here, not in
    :func:`main`, which tests call in-process.)"""
    try:
        code = main()
    except KeyboardInterrupt:
        code = 130
    exit_on_interrupt()
    sys.exit(code)


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
    """Parse ``argv`` and run its command: a stop as the stop (``interrupt.stops_reported``), a closed stdout
    quietly, and a failure that is no bug (``runs.failures.failure``) as one ``error:`` line."""
    from workflow_rl.runs.failures import failure, is_load_failure, load_failure

    try:
        args = parse(argv)   # loads the engines (numba) and torch: the first place a memory limit bites
    except (ImportError, OSError, MemoryError) as e:
        if not is_load_failure(e):
            raise
        print(f"error: {load_failure(e)}", file=sys.stderr)
        return 2
    try:
        with stops_reported():
            if args.command in COMPUTING:   # acting-sized first; train and search size up once configured
                from workflow_rl import threads

                threads.configure(threads.Work(), args.threads)
            return args.func(args)
    except Exception as e:
        if isinstance(e, BrokenPipeError) and stdout_reader_gone():
            return stdout_closed()
        known = failure(e)
        if known is None:
            raise
        print(f"error: {known[0]}", file=sys.stderr)
        return known[1]


if __name__ == "__main__":
    run()
