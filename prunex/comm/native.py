"""The one hand-written kernel: compress of fp32 weights on x86-64 CPUs with AVX-512F (``pack_rows.c``).

Why it exists: on a CPU no torch op gathers the kept filter x channel slices of eq. (15) in one pass
near memory speed. ``index_select`` over KH*KW rows moves 36-byte pieces one at a time, and for 1x1
convs needs two passes through a scratch buffer; ``python -m prunex.bench.shrink`` measured them at
0.2-0.3 of a same-run copy of the compact bytes (issue 18 asks for 0.5). The kernel reads each kept
filter's row once and packs its kept elements with ``vcompressps``, one 64-byte block at a time, on
``torch.get_num_threads()`` OpenMP threads. On a GPU `ShrinkPlan` keeps ``index_select`` (the device's
own gather kernel), and so does every CPU where the kernel cannot be used.

Built on first use with the C compiler ``$CC`` (default ``cc``): ``-O3 -fopenmp -shared -fPIC``, no
``-march``, so one cached library serves every x86-64 node that shares a home directory; the AVX-512
code is enabled per function and `available` asks the CPU before it is called. The library is cached
under ``$PRUNEX_NATIVE_DIR`` or ``${XDG_CACHE_HOME:-~/.cache}/prunex/native``, named by the hash of the
source, the compiler and the machine, and written to a temporary name then renamed, so that the ranks
of a node that start together can all build it without reading a half-written file. The process's
torch has already loaded its own ``libgomp.so.1``; the library's OpenMP resolves to that one, so there
is one thread pool, not two.

``PRUNEX_NATIVE_SHRINK=0`` turns it off (the bench's "torch" rows, or to rule it out). When it cannot
be built or loaded, or the CPU lacks AVX-512F, `available` is False and says why in `unavailable_reason`;
results do not depend on it: the bytes are the ones ``index_select`` writes (``tests/test_shrink.py``).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

__all__ = ["RowPacker", "available", "block_mask", "unavailable_reason"]

_SOURCE = Path(__file__).with_name("pack_rows.c")
_LOCK = threading.Lock()
_STATE: dict[str, object] = {}  # "fn": the ctypes function, or "reason": why there is none


def _cache_dir() -> Path:
    if os.environ.get("PRUNEX_NATIVE_DIR"):
        return Path(os.environ["PRUNEX_NATIVE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "prunex" / "native"


_FLAGS = ("-O3", "-fopenmp", "-shared", "-fPIC")


def _build(cc: str) -> Path:
    """The cached shared library, compiled now if this source/compiler/flags/machine has none yet."""
    version = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=60).stdout
    salt = f"{version}|{' '.join(_FLAGS)}|{platform.machine()}".encode()
    key = hashlib.sha256(_SOURCE.read_bytes() + salt).hexdigest()[:16]
    lib = _cache_dir() / f"pack_rows-{key}.so"
    if lib.exists():
        return lib
    lib.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=lib.name + ".", dir=lib.parent)
    os.close(fd)
    try:
        cmd = [cc, *_FLAGS, str(_SOURCE), "-o", tmp]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
            raise OSError(f"{' '.join(cmd)} failed: {last}")
        os.replace(tmp, lib)  # atomic: a rank building at the same time finds a whole file or none
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return lib


def _load() -> object:
    if os.environ.get("PRUNEX_NATIVE_SHRINK", "1") == "0":
        return "turned off by PRUNEX_NATIVE_SHRINK=0"
    if platform.machine() not in ("x86_64", "AMD64"):
        return f"no kernel for {platform.machine()} (x86-64 with AVX-512F only)"
    cc = os.environ.get("CC", "cc")
    if shutil.which(cc) is None:
        return f"no C compiler {cc!r} on PATH"
    try:
        lib = ctypes.CDLL(str(_build(cc)))
    except (OSError, subprocess.SubprocessError) as e:
        return f"could not build or load the kernel: {e}"
    if not lib.prunex_pack_rows_supported():
        return "this CPU has no AVX-512F"
    fn = lib.prunex_pack_rows
    fn.restype = None
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    fn.argtypes = [ptr, i64, ptr, i64, ptr, i64, ptr, ctypes.c_int]
    return fn


def _fn() -> Callable[..., None] | None:
    if _STATE:
        return _STATE.get("fn")
    with _LOCK:
        if not _STATE:
            got = _load()
            _STATE["reason" if isinstance(got, str) else "fn"] = got
    return _STATE.get("fn")  # type: ignore[return-value]


def available() -> bool:
    """Whether the kernel (`RowPacker`) can run here; builds and loads it on the first call."""
    return _fn() is not None


def unavailable_reason() -> str | None:
    """Why `available` is False, in one line; None when it is True."""
    _fn()
    return _STATE.get("reason")  # type: ignore[return-value]


def block_mask(in_idx: Tensor, c_in: int, kernel: int) -> np.ndarray:
    """The kept elements of one filter row (C_in * kernel floats; channel K_in[q]'s ``kernel`` floats),
    as one uint16 per 16-float block, bit j for element 16 b + j: what the kernel reads."""
    keep = np.zeros(c_in, dtype=bool)
    keep[in_idx.cpu().numpy()] = True
    elements = np.repeat(keep, kernel)
    blocks = np.zeros(-(-elements.size // 16) * 16, dtype=np.uint16)
    blocks[: elements.size] = elements
    return np.ascontiguousarray((blocks.reshape(-1, 16) << np.arange(16, dtype=np.uint16)).sum(1, dtype=np.uint16))


class RowPacker:
    """Compress of one layer's kept slices by the kernel: ``packer(t, out)`` writes, for every kept
    filter p, the kept elements of row ``out_idx[p]`` of ``t`` (C_out x C_in x ... viewed as C_out rows)
    to ``out[p]``, in the layout of eq. (15).

    Args:
        out_idx: kept filters K_out (CPU int64, each below C_out).
        in_idx: kept input channels K_in.
        shape: the full weight shape ``(C_out, C_in, ...)``.

    The caller (`ShrinkPlan.compress`) has checked that ``t`` is a contiguous fp32 CPU tensor of
    ``shape`` and ``out`` a contiguous fp32 CPU tensor of the compact shape; the pointers of the indices
    are taken once, so a call costs one ctypes call. Runs on ``torch.get_num_threads()`` threads.

    Raises:
        RuntimeError: if the kernel is not `available`.
    """

    def __init__(self, out_idx: Tensor, in_idx: Tensor, shape: tuple[int, ...]) -> None:
        fn = _fn()
        if fn is None:
            raise RuntimeError(f"the native compress kernel is not available: {unavailable_reason()}")
        kernel = 1
        for s in shape[2:]:
            kernel *= int(s)
        # the kernel packs channels in ascending order (a block mask), reads rows out_idx[p] unchecked and writes
        # kept_per_row floats per row: indices that are not ascending, unique and in range would pack otherwise
        # than the torch path or read out of bounds (masks come from nonzero(): they always are)
        for name, idx, bound in (("out_idx", out_idx, int(shape[0])), ("in_idx", in_idx, int(shape[1]))):
            i = idx.cpu()
            if i.numel() and (int(i.min()) < 0 or int(i.max()) >= bound or not bool((i[1:] > i[:-1]).all())):
                raise ValueError(
                    f"{name} must be ascending, unique and in [0, {bound}): the native kernel relies on it"
                )
        self._fn = fn
        self._rows = out_idx.to(device="cpu", dtype=torch.long).contiguous()  # kept alive: the kernel reads it
        self._mask = block_mask(in_idx, int(shape[1]), kernel)
        self._args = (
            int(shape[1]) * kernel,
            self._rows.data_ptr(),
            self._rows.numel(),
            self._mask.ctypes.data,
            in_idx.numel() * kernel,
        )

    def __call__(self, t: Tensor, out: Tensor) -> None:
        row_len, rows, n_rows, mask, kept_per_row = self._args
        self._fn(t.data_ptr(), row_len, rows, n_rows, mask, kept_per_row, out.data_ptr(), torch.get_num_threads())
