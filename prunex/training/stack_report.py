"""A rank that has not joined the others says where it is: every thread's Python stack to its log, once.

`report_after(delay_s)` starts it (`prunex.cluster.task.TrainJob`, as the task starts), `cancel()` stops it
(`prunex.training.train.train`, once every rank has joined). It is a Python timer thread that prints with
`faulthandler.dump_traceback` while it holds the GIL, so the other threads stand still at a safe point.
`faulthandler.dump_traceback_later`, used before, reads the other threads' frames from its watchdog thread
without the GIL: a rank still importing 30 s after its start, on a loaded 2-core VM, segfaulted in that dump
mid-line (2026-11-27, the mini cluster's cancelled run, in a suite under `tests/cpu_sampler.py`; CPython
issues 116008 and 131580: `dump_frame` reading a frame that the running thread changes). The price:
a rank stuck in native code that holds the GIL prints nothing (the collective timeout still ends it).
"""

from __future__ import annotations

import faulthandler
import sys
import threading

HEADER = "prunex: this rank has not joined the others {delay:g} s after its task started; every thread's stack:"

_timer: threading.Timer | None = None


def _report(delay_s: float) -> None:
    print(HEADER.format(delay=delay_s), file=sys.stderr, flush=True)
    faulthandler.dump_traceback(file=sys.stderr, all_threads=True)


def report_after(delay_s: float) -> None:
    """Print every thread's stack to stderr once, `delay_s` from now, unless `cancel` comes first."""
    global _timer
    cancel()
    _timer = threading.Timer(delay_s, _report, args=(delay_s,))
    _timer.daemon = True  # never keeps the process alive
    _timer.name = "prunex-stack-report"
    _timer.start()


def cancel() -> None:
    """No report (a no-op when none is due)."""
    global _timer
    if _timer is not None:
        _timer.cancel()
        _timer = None
