"""Triton kernels that pack and unpack one whole communication bucket (eq. (15), sec. 4.4.3) on a GPU.

`prunex.comm.shrink.BucketShrinkPlan` runs them on CUDA tensors where Triton is installed; elsewhere it
gathers and scatters with torch's index ops over a precomputed flat element index. Both move the same
bytes (`tests/test_bucket_shrink.py` runs these kernels in Triton's interpreter against the torch path;
`tests/gpu/` on a GPU).

Why kernels: the torch path reads an index of one int32 per packed element (as many bytes as the data)
to gather, and an int64 one to scatter after zero-filling the whole stage. Here positions are computed
from the layers' kept index lists, a few KB that stay in cache:

- `pack`: blocks of `PACK_BLOCK` consecutive packed elements of one tensor per program, each program
  writing one contiguous run of the bucket and computing each element's stage position from the layer's
  kept index lists (`unpack` mirrored); a dense tensor is copied straight.
- `unpack`: every stage element once (the kept value, or 0 off the support, so no separate zero fill),
  from the layer's position tables (index of each output and input channel among the kept ones, -1 if
  pruned), in blocks of `BLOCK` elements that never straddle two tensors.

Positions within a tensor are int32; only the stage and bucket offsets are int64 (64-bit division is
emulated on GPUs: the first version, which divided by runtime sizes in int64 per element, packed at
0.24 of a contiguous copy on an H100, 2026-11-27).

What they gave on one H100 (`python -m prunex.bench.shrink --device cuda`, ResNet-152 shapes, keep 0.5,
58 MB packed, 232 MB full-size): unpack 0.23-0.24 ms, 0.76 of one contiguous copy of the full-size bytes
(`saved-logs/gpu/h100-2026-11-27`, `saved-logs/gpu/h100-2026-11-28`). The pack was first one program per
packed row (a kept filter; one launch per kernel size): 0.21-0.24 ms, 0.26-0.31 of one contiguous copy of the
packed bytes, slower than `index_select` over a flat index (0.37). The block-wise pack measured 0.13 ms (0.45)
in the same run (2026-11-28) and replaced it; `--sweep` times its block sizes and warps: with a cold L2, 0.07 ms
(0.70) at the default setting and no setting clearly faster, though the bench's "compress [bucket]" row, the
same launch, measured 0.27-0.34 in those runs (`saved-logs/gpu/h100-2026-11-28/`): its launch, inside the span.
With the host's launches hidden (the bench's "device s" column, since 2026-11-28) the pack measured
0.68-0.69 and the unpack 0.71-0.83 on two H200s (`saved-logs/gpu/h200-2026-11-28/`), and a launch cost the
host 19-28 us with the tables of `BucketKernels` against 29-38 us with the 16 and 15 arguments the kernels
had before (Triton's launcher calls ``data_ptr()`` and `cuPointerGetAttribute` for every pointer argument,
and its binder specialises on each one's alignment). The pack is a kernel
rather than `index_select` also because it adds v_i to z_i on the kept elements (`pack`'s ``plus``), where
the torch path needs a second gather and an add. A pack reads whole 32-byte sectors of the stage around
the kept elements it gathers, about twice the packed bytes at keep 0.5 (an estimate from the access
pattern: runs of K contiguous elements per kept input channel), which holds it below a copy's rate.
"""

from __future__ import annotations

import os

import torch
from torch import Tensor

try:
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - CPU-only installs without triton: the torch path is used
    triton = None

BLOCK = 1024  # unpack: elements per program


def _launch_setting(name: str, default: int, allowed: tuple[int, ...]) -> int:
    """An integer launch setting from the environment (one-line error when it is not one of ``allowed``)."""
    raw = os.environ.get(name, str(default))
    if not raw.isdigit() or int(raw) not in allowed:
        raise ValueError(f"{name}={raw!r}: expected one of {', '.join(map(str, allowed))}")
    return int(raw)


# pack: packed elements and warps per program. Another GPU may prefer others: `python -m prunex.bench.shrink
# --device cuda --sweep` times them, and PRUNEX_PACK_BLOCK / PRUNEX_PACK_WARPS set them (the same bytes either way)
PACK_BLOCK = _launch_setting("PRUNEX_PACK_BLOCK", 1024, (64, 128, 256, 512, 1024, 2048, 4096))
PACK_WARPS = _launch_setting("PRUNEX_PACK_WARPS", 4, (1, 2, 4, 8, 16))


def available() -> bool:
    """Whether the kernels can run (Triton importable)."""
    return triton is not None


# the columns of the per-tensor table (`BucketKernels.meta`: int64, one row per tensor of the bucket), in the
# order `_tensor_row` loads them (a kernel reads no Python global that is not a Triton constexpr)
_COLUMNS = ("base", "dst", "numel", "full", "dense", "cin", "k", "nq", "opos", "ipos", "oidx", "iidx")

if triton is not None:

    @triton.jit
    def _tensor_row(meta_ptr, t):
        # tensor t's row of `_COLUMNS` (12 columns); the offsets into the stage and the bucket stay int64, sizes
        # and positions within a tensor are int32
        row = meta_ptr + t * 12
        base, dst = tl.load(row), tl.load(row + 1)
        numel, full = tl.load(row + 2).to(tl.int32), tl.load(row + 3).to(tl.int32)
        flag, cin = tl.load(row + 4).to(tl.int32), tl.load(row + 5).to(tl.int32)
        k, nq = tl.load(row + 6).to(tl.int32), tl.load(row + 7).to(tl.int32)
        opos, ipos = tl.load(row + 8).to(tl.int32), tl.load(row + 9).to(tl.int32)
        oidx, iidx = tl.load(row + 10).to(tl.int32), tl.load(row + 11).to(tl.int32)
        return base, dst, numel, full, flag, cin, k, nq, opos, ipos, oidx, iidx

    @triton.jit
    def _unpack_kernel(bucket_ptr, stage_ptr, blk_ptr, meta_ptr, idx_ptr, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        t = tl.load(blk_ptr + 2 * pid)
        e = tl.load(blk_ptr + 2 * pid + 1) + tl.arange(0, BLOCK)  # int32: within one tensor
        base, dst, _, full, flag, cin, k, nq, opos, ipos, _, _ = _tensor_row(meta_ptr, t)
        m = e < full
        dense = flag != 0
        r = e % k
        row = e // k
        ci = row % cin
        co = row // cin
        gm = m & (flag == 0)
        # the position tables: index of each output and input channel among the kept ones, -1 if pruned
        po = tl.load(idx_ptr + opos + co, mask=gm, other=-1)
        qi = tl.load(idx_ptr + ipos + ci, mask=gm, other=-1)
        kept = (po >= 0) & (qi >= 0)
        src = dst + tl.where(dense, e, (po * nq + qi) * k + r).to(tl.int64)
        v = tl.load(bucket_ptr + src, mask=m & (dense | kept), other=0.0)  # 0 off the support
        tl.store(stage_ptr + base + e, v, mask=m)

    @triton.jit
    def _pack_blocks_kernel(
        stage_ptr, plus_ptr, bucket_ptr, blk_ptr, meta_ptr, idx_ptr, ADD: tl.constexpr, BLOCK: tl.constexpr
    ):
        # `unpack` mirrored: `BLOCK` consecutive packed elements of one tensor per program, written contiguously;
        # packed element e = (p * |K_in| + q) * K + r of a constrained layer is stage element
        # (K_out[p] * C_in + K_in[q]) * K + r after the tensor's start; a dense tensor's is e itself
        pid = tl.program_id(0)
        t = tl.load(blk_ptr + 2 * pid)
        e = tl.load(blk_ptr + 2 * pid + 1) + tl.arange(0, BLOCK)  # int32: within one tensor
        base, dst, numel, _, flag, cin, k, nq, _, _, oidx, iidx = _tensor_row(meta_ptr, t)
        m = e < numel
        dense = flag != 0
        r = e % k
        row = e // k
        gm = m & (flag == 0)
        ko = tl.load(idx_ptr + oidx + row // nq, mask=gm, other=0)
        ki = tl.load(idx_ptr + iidx + row % nq, mask=gm, other=0)
        at = base + tl.where(dense, e, (ko * cin + ki) * k + r).to(tl.int64)
        v = tl.load(stage_ptr + at, mask=m)
        if ADD:  # c = z_i + v_i (Alg. 1 line 19), on the kept elements only
            v = v + tl.load(plus_ptr + at, mask=m)
        tl.store(bucket_ptr + dst + e, v, mask=m)


def _blocks(numels: list[int], device: torch.device, block: int) -> Tensor:
    """The block table over tensors of these sizes: per block of `block` elements, its tensor and its first
    element (int32, interleaved: one table, one kernel argument)."""
    counts = torch.tensor([-(-n // block) for n in numels], dtype=torch.int64)
    tensor = torch.repeat_interleave(torch.arange(len(numels)), counts)
    first = torch.cumsum(counts, 0) - counts  # each tensor's first block
    start = (torch.arange(int(counts.sum())) - first[tensor]) * block
    return torch.stack([tensor, start], 1).reshape(-1).to(device, torch.int32)


class BucketKernels:
    """The tables the two kernels read for one bucket, built once per plan on the data's device.

    Args:
        layers: per tensor of the bucket, in bucket order: ``(out_idx, in_idx, shape)`` of a constrained
            layer (sorted kept indices) or ``(None, None, shape)`` for a dense tensor.
        device: where the data lives.

    Three kinds of table, so that a launch passes few pointers: Triton's launcher checks every pointer argument
    with the driver, host time that a round spends while the GPU waits (issue 27; the kernels had 15 and
    16 arguments before). ``meta``: one int64 row per tensor (stage offset, bucket offset, packed and full
    sizes, dense flag, C_in, K, |K_in|, and where its four index lists start in ``idx``); ``idx``: every
    constrained layer's position tables and kept index lists, int32, back to back; the block tables
    (`_blocks`), one per block size.
    """

    def __init__(self, layers: list[tuple[Tensor | None, Tensor | None, tuple[int, ...]]], device: torch.device):
        rows: list[list[int]] = []
        lists: list[Tensor] = []  # the int32 index lists, back to back
        at = base = dst = 0
        numels, fulls = [], []
        for o, i, shape in layers:
            full = 1
            for s in shape:
                full *= int(s)
            if full >= 2**31:  # the kernels index within a tensor in int32
                raise ValueError(f"a tensor of {full} elements is beyond the bucket kernels' int32 indexing")
            dense = o is None
            k = 1 if dense else full // (int(shape[0]) * int(shape[1]))
            starts = [at] * 4
            if dense:
                numel, cin, nq = full, 1, 1
            else:
                o = o.to("cpu", torch.int64)
                i = i.to("cpu", torch.int64)
                cin, nq = int(shape[1]), i.numel()
                numel = o.numel() * nq * k
                op = torch.full((int(shape[0]),), -1, dtype=torch.int64)
                op[o] = torch.arange(o.numel())
                ip = torch.full((cin,), -1, dtype=torch.int64)
                ip[i] = torch.arange(nq)
                for j, x in enumerate((op, ip, o, i)):  # opos, ipos, oidx, iidx
                    starts[j] = at
                    lists.append(x)
                    at += x.numel()
            values = dict(base=base, dst=dst, numel=numel, full=full, dense=int(dense), cin=cin, k=k, nq=nq)
            values |= dict(zip(("opos", "ipos", "oidx", "iidx"), starts, strict=True))
            row = [values[c] for c in _COLUMNS]
            rows.append(row)
            numels.append(numel)
            fulls.append(full)
            base += full
            dst += numel
        if at >= 2**31:
            raise ValueError(f"{at} index entries are beyond the bucket kernels' int32 indexing")
        self.stage_numel, self.numel = base, dst
        self.meta = torch.tensor(rows if rows else [[0] * len(_COLUMNS)], dtype=torch.int64).reshape(-1).to(device)
        self.idx = (torch.cat(lists) if lists else torch.zeros(1, dtype=torch.int64)).to(device, torch.int32)
        self.unpack_blocks = _blocks(fulls, device, BLOCK)
        self.unpack_grid = self.unpack_blocks.numel() // 2
        self._numels, self._device = numels, device
        self._pack_tables: dict[int, Tensor] = {}  # per block size: `_blocks`

    def pack(
        self,
        stage: Tensor,
        out: Tensor,
        plus: Tensor | None = None,
        *,
        block: int = PACK_BLOCK,
        num_warps: int = PACK_WARPS,
    ) -> Tensor:
        """``out`` (the bucket's region, `numel`) = the kept elements of every tensor of the flat ``stage``
        (plus those of ``plus``, laid out alike, when given): one launch over blocks of ``block`` packed
        elements, ``num_warps`` warps each."""
        blocks = self._pack_tables.get(block)
        if blocks is None:
            blocks = self._pack_tables[block] = _blocks(self._numels, self._device, block)
        grid = blocks.numel() // 2
        if grid:
            _pack_blocks_kernel[(grid,)](
                stage,
                stage if plus is None else plus,
                out,
                blocks,
                self.meta,
                self.idx,
                ADD=plus is not None,
                BLOCK=block,
                num_warps=num_warps,
            )
        return out

    def unpack(self, bucket: Tensor, out: Tensor) -> Tensor:
        """Every element of the flat ``out`` stage: the bucket's value where kept, 0 off the support."""
        if self.unpack_grid:
            _unpack_kernel[(self.unpack_grid,)](bucket, out, self.unpack_blocks, self.meta, self.idx, BLOCK=BLOCK)
        return out
