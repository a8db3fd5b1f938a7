"""Ctrl-C as a request to stop cleanly, SIGTERM as an abort that cleans up, a closed stdout as its reader's stop.

Shared by every long loop (training, batched training, search); SIGTERM cleans up like a second Ctrl-C. Whoever runs
a job (the command line, a script) reports a stop as that stop (:func:`stops_reported`), and a program ends quietly
when the reader of its output has gone (:func:`stdout_reader_gone`, :func:`stdout_closed`).
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


@contextmanager
def children_ignore_sigint():
    """Within the block (main thread only) this process ignores SIGINT, so the processes it starts inside are born
    ignoring it (an ignored signal stays ignored across fork and exec, and Python then installs no handler of its
    own): a terminal's Ctrl-C reaches the whole process group, and a worker that died of it while booting would
    abort its parent's clean stop. Keep the block to the starts themselves (milliseconds): a Ctrl-C the parent gets
    inside it is lost, not deferred (a signal mask would defer it, but spawn's fork-exec clears the mask)."""
    old = signal.signal(signal.SIGINT, signal.SIG_IGN) if threading_is_main() else None
    try:
        yield
    finally:
        if old is not None:
            signal.signal(signal.SIGINT, old)


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


def interrupt_behind(e: BaseException | None) -> KeyboardInterrupt | None:
    """The Ctrl-C or SIGTERM during whose handling ``e`` was raised, if any (its ``__context__`` chain)."""
    seen = set()
    while e is not None and id(e) not in seen:
        if isinstance(e, KeyboardInterrupt):
            return e
        seen.add(id(e))
        e = e.__context__
    return None


@contextmanager
def stops_reported():
    """Within the block, SIGTERM is an abort that cleans up (:func:`terminate_as_interrupt`), and a failure raised
    while a Ctrl-C or SIGTERM was being handled (a worker gone first, its pipe broken during the clean-up) is
    re-raised as that stop: whoever runs a job, the command line or a script, sees the stop it asked for rather than
    an error it caused."""
    with terminate_as_interrupt():
        try:
            yield
        except Exception as e:
            stop = interrupt_behind(e)
            if stop is None:
                raise
            raise stop from None


def stdout_reader_gone() -> bool:
    """Whether stdout is a pipe whose reader has gone (poll reports an error on its write end), as opposed to a
    worker's pipe breaking: the BrokenPipeError is then the reader's stop (``workflow-rl demo | head -1``), not a
    failure."""
    import select

    try:
        p = select.poll()
        p.register(sys.stdout.fileno(), select.POLLOUT)
        return any(ev & select.POLLERR for _, ev in p.poll(0))
    except (OSError, ValueError, AttributeError):   # not a real file (a test's capture)
        return True


def stdout_closed() -> int:
    """Whoever read stdout stopped: point stdout at /dev/null, so the interpreter's last flush at exit does not
    raise again, and return the status of a process ended by SIGPIPE (to end quietly, as Unix tools do)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):   # not a real file (a test's capture)
        pass
    return 128 + signal.SIGPIPE


def exit_on_interrupt() -> None:
    """From now on a Ctrl-C ends the process at once with the interrupt's status (130), saying ``interrupted``: for
    a program whose work is done, so that one during the interpreter's shutdown (worker pools, Ray, buffered output)
    prints no traceback from wherever the shutdown was."""
    signal.signal(signal.SIGINT, _exit_interrupted)


def _exit_interrupted(signum, frame) -> None:
    os.write(2, b"interrupted\n")
    os._exit(130)
