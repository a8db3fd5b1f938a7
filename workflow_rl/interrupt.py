"""Ctrl-C as a request to stop cleanly, SIGTERM as an abort that cleans up.

Shared by every long loop (training, batched training, search); SIGTERM cleans up like a second Ctrl-C.
"""
from __future__ import annotations

import os
import signal
import sys
import threading
from contextlib import contextmanager


class GracefulInterrupt:
    """Ctrl-C as a request to stop cleanly: the first one sets ``requested`` (the loop finishes its unit of work,
    saves and stops); a second one raises KeyboardInterrupt (abort without saving). A context manager that installs
    the handler only in the main thread (signals cannot be handled elsewhere)."""

    def __init__(self, unit: str):
        self.unit = unit
        self.requested = False
        self._old = None

    def __enter__(self) -> "GracefulInterrupt":
        if threading_is_main():
            self._old = signal.getsignal(signal.SIGINT)
            signal.signal(signal.SIGINT, self._handle)
        return self

    def _handle(self, signum, frame) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        say_from_handler(f"\ninterrupt: finishing {self.unit}, then saving (Ctrl-C again to abort without saving)")

    def __exit__(self, *exc) -> bool:
        if self._old is not None:
            signal.signal(signal.SIGINT, self._old)
            self._old = None
        return False


def say_from_handler(text: str) -> None:
    """Print ``text`` from a signal handler. The handler runs wherever the main thread was, possibly inside a write
    to stdout (a run printing its log rows, blocked on a full pipe): there ``print`` raises "reentrant call inside
    <_io.BufferedWriter>", which would end a run that asked to stop cleanly with a traceback and status 1. Then the
    line goes straight to the file descriptor instead, or, if even that fails, is dropped: the stop itself is the
    flag, not the message."""
    try:
        print(text, flush=True)
    except RuntimeError:
        try:
            os.write(sys.stdout.fileno(), (text + "\n").encode())
        except (OSError, ValueError, AttributeError):   # closed, or not a real file
            pass
    except (OSError, ValueError):   # stdout closed or gone: nothing to tell
        pass


def threading_is_main() -> bool:
    return threading.current_thread() is threading.main_thread()


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived (``kill``, ``timeout``, a scheduler stopping the job): a KeyboardInterrupt, so every abort
    path that handles Ctrl-C (stopping worker processes, removing temporary files) handles it too."""


@contextmanager
def terminate_as_interrupt():
    """Within the block, SIGTERM raises :class:`Terminated` in this process instead of killing it on the spot. A
    process killed outright leaves its worker processes reading a closed pipe, each printing a traceback (or
    waiting forever on a queue); raised, the abort stops them quietly, as after Ctrl-C. The run's files are those
    of its last checkpoint either way. A worker forked inside the block inherits the handler: there it restores the
    default and dies of the signal, as before. Installs nothing outside the main thread."""
    if not threading_is_main():
        yield
        return
    owner = os.getpid()

    def handle(signum, frame):
        if os.getpid() != owner:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        raise Terminated

    old = signal.signal(signal.SIGTERM, handle)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)
