"""Ctrl-C as a request to stop cleanly, shared by every long loop (training, batched training, search)."""
from __future__ import annotations

import signal
import threading


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
        print(f"\ninterrupt: finishing {self.unit}, then saving (Ctrl-C again to abort without saving)")

    def __exit__(self, *exc) -> bool:
        if self._old is not None:
            signal.signal(signal.SIGINT, self._old)
            self._old = None
        return False


def threading_is_main() -> bool:
    return threading.current_thread() is threading.main_thread()
