"""What Ctrl-C and SIGTERM mean to a launcher (`prunex.run`, `experiments.*`).

Inside `interruptible()` both signals raise `KeyboardInterrupt` in the main thread, once per
interrupt: a second delivery within `DEBOUNCE_S` is the same interrupt (Ctrl-C in a terminal
reaches the launcher directly and through `./run_all.sh`, which forwards what it receives). The
launcher then acts on its jobs (`prunex.cluster.launch`): by default it cancels them (a local job's
process group is signalled, a Slurm job is `scancel`ed), waits until they are gone, and ends with
one line, `Interrupted`'s message: "interrupted after iteration K; run the same command again to
resume from the checkpoint". With `--detach` a Slurm job is left running and the line says how to
reattach or cancel it. A further Ctrl-C while cancellation is under way stops waiting (a local
job is then killed at once; a cancelled Slurm job ends on its own).

Exit codes: 130 after SIGINT, 143 after SIGTERM (128 + the signal).
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Iterator

DEBOUNCE_S = 1.0


class Interrupted(Exception):
    """The launcher was interrupted and has acted on its jobs; str() is the one line to print."""

    def __init__(self, message: str, signum: int = signal.SIGINT) -> None:
        super().__init__(message)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + int(self.signum)


class _State:
    signum: int = signal.SIGINT
    last: float = float("-inf")
    deferring: int = 0  # depth of `deferred()` blocks
    pending: int | None = None  # a signal that came during one


STATE = _State()


def last_signal() -> int:
    """The signal of the latest interrupt (SIGINT when none came through `interruptible`)."""
    return STATE.signum


def _handler(signum: int, frame: object) -> None:
    now = time.monotonic()
    if now - STATE.last < DEBOUNCE_S:
        return
    STATE.last, STATE.signum = now, signum
    if STATE.deferring:
        STATE.pending = signum
        return
    raise KeyboardInterrupt(signal.Signals(signum).name)


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """SIGINT and SIGTERM raise KeyboardInterrupt (main thread only; elsewhere a no-op)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for s in previous:
        signal.signal(s, _handler)
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Hold an interrupt back for the block (a submission and its record must not be torn apart):
    one that comes meanwhile is raised when the block ends. A flag read by the handler, not a
    signal mask: the kernel may hand a process-directed signal to any thread (torch and gloo start
    some), and Python runs the handler in the main thread anyway."""
    STATE.deferring += 1
    try:
        yield
    finally:
        STATE.deferring -= 1
    if STATE.deferring == 0 and STATE.pending is not None:
        signum, STATE.pending = STATE.pending, None
        raise KeyboardInterrupt(signal.Signals(signum).name)


def resume_hint(iteration: int | None) -> str:
    """The sentence after an interrupt: where a re-run resumes."""
    if iteration is None:
        return "interrupted before its first checkpoint; run the same command again to start it over"
    return f"interrupted after iteration {iteration + 1}; run the same command again to resume from the checkpoint"
