"""`prunex.training.allocator.keep_freed_memory`: memory a process frees is reused, not page-faulted in again,
and training computes the same values with it as without it."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from prunex.bench.allocator import run_once

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="mallopt is glibc's (Linux)")

# In a fresh process (the settings are process-wide and cannot be undone): 4 rounds of malloc, write and free of
# 20 MiB, with the page faults of each round.
ROUNDS = """
import ctypes, json, resource
from prunex.training.allocator import keep_freed_memory
applied = keep_freed_memory()
libc = ctypes.CDLL(None)
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, (ctypes.c_size_t,)
libc.free.argtypes = (ctypes.c_void_p,)
size = 20 * 2**20
faults = []
for _ in range(4):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    p = libc.malloc(size)
    ctypes.memset(p, 1, size)
    libc.free(p)
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(json.dumps({"applied": applied, "faults": faults}))
"""


def _child(code: str, **env: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=dict(os.environ, **env), capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_freed_memory_is_reused_not_faulted_in_again() -> None:
    kept, default = _child(ROUNDS), _child(ROUNDS, PRUNEX_MALLOC="default")
    assert kept["applied"] and default["applied"] is None
    pages = 20 * 2**20 // os.sysconf("SC_PAGE_SIZE")
    # glibc's defaults: the first 20 MiB is an mmap, given back when freed; the second comes from the heap, fresh
    # pages again (measured: 5121, 5120, 0, 0 pages). With the settings the heap keeps it: 5120, 0, 0, 0.
    assert kept["faults"][0] >= pages // 2 and max(kept["faults"][1:]) < pages // 100, kept["faults"]
    assert default["faults"][1] >= pages // 2, default["faults"]  # what the settings remove


def test_training_computes_the_same_values() -> None:
    # python -m prunex.bench.allocator's processes: ResNet-20 at batch 16, one thread, 6 SGD steps (1 + 5 timed)
    (kept,) = run_once("resnet20", 16, 1, 5, kept=True)
    (default,) = run_once("resnet20", 16, 1, 5, kept=False)
    assert kept["applied"] and default["applied"] is None
    assert kept["losses"] == default["losses"]  # where a buffer lives does not change what is computed
