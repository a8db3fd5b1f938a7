"""``workflow-rl`` command line. Every bad input ends in one ``error: ...`` line naming the fix (exit status 2).

The flags of ``train`` and ``search`` are generated from the config dataclasses (``cli.flags``); each subcommand's
flags sit next to its command (``cli.train``, ``cli.evaluate``, ``cli.search``, ``cli.tools``).
"""
from __future__ import annotations

import argparse
import functools
import sys

from workflow_rl import __version__
from workflow_rl.cli.evaluate import add_evaluate
from workflow_rl.cli.flags import given
from workflow_rl.cli.replay import add_replay
from workflow_rl.cli.search import add_search
from workflow_rl.cli.tools import add_tools
from workflow_rl.cli.train import add_train


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, no usage dump
        self.exit(2, f"error: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="workflow-rl", description=__doc__.split("\n")[0].replace("``", ""))
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    add_train(sub)
    add_evaluate(sub)
    add_search(sub)
    add_tools(sub)
    add_replay(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    from workflow_rl.envs.cyborg import CybORGUnavailable
    from workflow_rl.rl.checkpoint import CheckpointError

    args = build_parser().parse_args(argv)
    typed = sys.argv[1:] if argv is None else list(argv)
    args.given = functools.partial(given, build_parser, typed)   # (command, dests) -> the options typed
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
