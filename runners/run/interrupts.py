"""Ctrl-C and SIGTERM set one cancellation flag; they never raise into the main thread.

A KeyboardInterrupt raised by a signal lands wherever the main thread happens to be. Inside a
DuckDB statement the Python client turns it into `RuntimeError: Query interrupted`: inside a tool
that became a FAILED tool call (a case run stored FALLBACK instead of SUCCESS — a fake regression),
inside a metrics write a traceback and a sweep marked failed; elsewhere it was swallowed by a
catch-all and the interrupt was ignored. Here the handler only sets a flag shared by every case
run (`run_bench(..., cancellation=)` → `RunContext.cancellation`): every DuckDB statement and HTTP call
completes, the bench starts no new case run, the case run in flight ends CANCELLED and is discarded
(`--resume` re-runs it), finished ones are flushed and the run is marked `interrupted`. The command
exits 130 (SIGINT) or 143 (SIGTERM). A second signal exits at once, without waiting for the case
run in flight: its bench run stays `running` until the next writer marks it `interrupted`.

`raising` is for the commands that only read or write whole files (a signal raises KeyboardInterrupt), and
`HeldInterrupts` holds signals back over a last step that must finish once begun (an import's commit).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator
from enum import Enum
from types import FrameType

from harness import CancellationToken


class InterruptSignal(Enum):
    """The signals that interrupt a bench run or sweep."""

    SIGINT = signal.SIGINT
    """Ctrl-C (or `kill -INT`)."""
    SIGTERM = signal.SIGTERM
    """`kill`, a process manager, a CI runner's cancel."""

    @property
    def exit_code(self) -> int:
        """The shell's convention for a process ended by this signal: 128 + its number (130, 143)."""
        return 128 + int(self.value)


class Interrupts:
    """The installed handlers' state: one token for every case run, and the first signal received."""

    def __init__(self, token: CancellationToken | None = None) -> None:
        self.token: CancellationToken = token or CancellationToken()
        """Set by the first signal; shared by every case run of the command."""
        self.received: InterruptSignal | None = None
        """The first signal received (its exit code is the command's), None while uninterrupted."""
        self.exit_note: str = ""
        """Printed after "second SIGINT: exiting at once" when a second signal ends the process (what is left
        and how to continue)."""

    @property
    def exit_code(self) -> int | None:
        """130 or 143 once interrupted, else None."""
        return self.received.exit_code if self.received else None

    def handle(self, signum: int, frame: FrameType | None) -> None:
        """The signal handler: first signal sets the flag, second exits at once. Never raises."""
        sig = InterruptSignal(signum)
        if self.received is not None:
            _write_stderr(f"\nsecond {sig.name}: exiting at once{'; ' if self.exit_note else ''}{self.exit_note}\n")
            os._exit(sig.exit_code)  # no cleanup wait: finally blocks, flushes and thread joins are skipped
        self.received = sig
        self.token.cancel()
        key = "Ctrl-C" if sig is InterruptSignal.SIGINT else "SIGTERM"
        _write_stderr(
            f"\n{sig.name}: stopping — the case run in flight is discarded, finished ones are kept"
            f" ({key} again to exit at once)\n"
        )


def _write_stderr(text: str) -> None:
    # os.write, not sys.stderr: the handler may run while the main thread is inside a write to
    # sys.stderr (the progress bar), and the buffered stream is not reentrant.
    with contextlib.suppress(OSError):
        os.write(2, text.encode("utf-8", "replace"))


@contextlib.contextmanager
def _routed(state: Interrupts, handle: Callable[[int, FrameType | None], None]) -> Iterator[Interrupts]:
    """Route SIGINT and SIGTERM to `handle` and restore the previous handlers on exit. Outside the main thread no
    handler can be installed: the state never fires."""
    if threading.current_thread() is not threading.main_thread():
        yield state
        return
    previous = {s: signal.signal(s.value, handle) for s in InterruptSignal}
    try:
        yield state
    finally:
        for s, handler in previous.items():
            signal.signal(s.value, signal.SIG_DFL if handler is None else handler)  # None: set outside Python


@contextlib.contextmanager
def installed(interrupts: Interrupts | None = None) -> Iterator[Interrupts]:
    """Route SIGINT and SIGTERM to `interrupts` (a fresh one by default): the flag is set, nothing raises."""
    state = interrupts or Interrupts()
    with _routed(state, state.handle):
        yield state


@contextlib.contextmanager
def raising() -> Iterator[Interrupts]:
    """For the commands that only read, or write their files whole (`gate`, `export`, `show`, `report`, …): Ctrl-C
    and SIGTERM raise KeyboardInterrupt, as Python's own SIGINT handler does, and are recorded — so that the
    `RuntimeError: Query interrupted` DuckDB makes of a KeyboardInterrupt inside a statement is known for the
    interrupt it is, and the exit code says which signal it was. Outside the main thread: nothing installed."""
    state = Interrupts()

    def handle(signum: int, frame: FrameType | None) -> None:
        if state.received is None:
            state.received = InterruptSignal(signum)
            state.token.cancel()
        raise KeyboardInterrupt

    with _routed(state, handle):
        yield state


class HeldInterrupts:
    """SIGINT and SIGTERM held back between `hold()` and `release()`: recorded, never raised — for a last step that
    must not be cut once begun (an import's COMMIT and the checkpoint that closes its file: interrupted there, a
    KeyboardInterrupt would report "interrupted" over an import already stored). A second signal exits at once."""

    def __init__(self) -> None:
        self.received: InterruptSignal | None = None
        """The first signal received while held, None when none came."""
        self._stack: contextlib.ExitStack | None = None

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        sig = InterruptSignal(signum)
        if self.received is not None:
            _write_stderr(f"\nsecond {sig.name}: exiting at once\n")
            os._exit(sig.exit_code)
        self.received = sig
        _write_stderr(f"\n{sig.name}: letting the commit finish ({sig.name} again to exit at once)\n")

    def hold(self) -> None:
        """From now on a signal is recorded (the handlers before are restored by `release`)."""
        if self._stack is None:
            self._stack = contextlib.ExitStack()
            self._stack.enter_context(_routed(Interrupts(), self._handle))

    def release(self) -> None:
        """The handlers as they were before `hold` (nothing when it was not called)."""
        if self._stack is not None:
            stack, self._stack = self._stack, None
            stack.close()
