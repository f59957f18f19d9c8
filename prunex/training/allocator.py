"""glibc's allocator, told to keep the memory a training step frees, so that the next step reuses it.

A training step on the CPU allocates and frees the same activation, gradient and im2col buffers every
step. With glibc's defaults, a buffer above the mmap threshold (128 KiB at start, raised as buffers are
freed) is a fresh `mmap`, and a freed top of the heap beyond the trim threshold goes back to the kernel:
the next step page-faults those pages in again, zero-filled by the kernel. `python -m prunex.bench.allocator`
measures it: fresh processes with and without the settings, ResNet-20 at batch 32, one thread, 40 steps. On
this project's 2-core AMD EPYC VM (2026-11-27) the timed steps page-faulted 11,000-450,000 pages in with
glibc's defaults and next to none with the settings. Four processes at once (a 2 x 2 run's load on 2 cores)
stepped 1.20x faster (1.14x in a run of 30 steps); one process alone 1.19x in one run and 0.95x in
another (within its noise: the defaults' page faults vary from process to process). Intel's CPU tuning guide
for PyTorch recommends jemalloc or TCMalloc (`LD_PRELOAD`) for the same reason; `mallopt` needs nothing
installed.

`keep_freed_memory()` sets, with `mallopt(3)`: the mmap threshold to 32 MiB (glibc's upper limit on 64-bit
systems, so buffers up to that size come from the heap), the trim threshold to 2 GiB - 1 (the heap is not
given back) and a top pad of 64 MiB (the heap grows in steps of that much). Setting any of them turns off
glibc's dynamic adjustment. A process keeps its peak heap until it exits.

Values are untouched: torch's CPU allocator aligns every tensor to 64 bytes whatever `malloc` returns, so
the kernels, and the behaviour pins (`tests/test_golden_runs.py`), see the same arithmetic.

Every rank calls it at start (`prunex.training.train.train`), as do the regime probe's processes (which
must time the compute the runs will see), `python -m prunex.bench.inference` and the tests' process pools.
It does nothing where the C library is not glibc (musl, macOS), or with ``PRUNEX_MALLOC=default``.
"""

from __future__ import annotations

import ctypes
import os

# glibc's <malloc.h>
M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD = -1, -2, -3
SETTINGS = ((M_MMAP_THRESHOLD, 32 * 2**20), (M_TRIM_THRESHOLD, 2**31 - 1), (M_TOP_PAD, 64 * 2**20))
DESCRIPTION = "glibc mallopt: mmap threshold 32 MiB, trim threshold 2 GiB, top pad 64 MiB (prunex.training.allocator)"

_applied: str | None = None


def keep_freed_memory() -> str | None:
    """Apply the settings (module docstring) to this process; returns their description (what `meta.json`
    records), or None where they were not applied. Calling it again changes nothing."""
    global _applied
    if _applied is not None or os.environ.get("PRUNEX_MALLOC") == "default":
        return _applied
    try:
        if not os.confstr("CS_GNU_LIBC_VERSION"):
            return None
        mallopt = ctypes.CDLL(None).mallopt
    except (AttributeError, ValueError, OSError):  # no confstr name, no glibc, no mallopt
        return None
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    if all(mallopt(param, value) == 1 for param, value in SETTINGS):
        _applied = DESCRIPTION
    return _applied


def applied() -> str | None:
    """What `keep_freed_memory` applied to this process (its description), or None: without applying it."""
    return _applied
