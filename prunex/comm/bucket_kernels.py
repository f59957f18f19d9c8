"""Triton kernels that pack and unpack one whole communication bucket (eq. (15), sec. 4.4.3) on a GPU.

`prunex.comm.shrink.BucketShrinkPlan` runs them on CUDA tensors where Triton is installed; elsewhere it
gathers and scatters with torch's index ops over a precomputed flat element index. Both move the same
bytes (`tests/test_bucket_shrink.py` runs these kernels in Triton's interpreter against the torch path;
`tests/gpu/` on a GPU).

Why kernels: the torch path reads an index of one int32 per packed element (as many bytes as the data)
to gather, and an int64 one to scatter after zero-filling the whole stage; on an H100 that was 0.36 and
0.13 of one contiguous copy of the same bytes (`python -m prunex.bench.shrink --device cuda`, 2026-11-27).
Here the source of packed element j of a constrained layer is computed from the layer's kept index lists,
which are a few KB and stay in cache: with r = j mod K, q = (j div K) mod |K_in|, p = j div (K |K_in|),

    src(j) = base + (K_out[p] * C_in + K_in[q]) * K + r          (the layer's full tensor at its stage offset)

`pack` writes every packed element once; `unpack` writes every stage element once (the kept value, or 0
off the support, so no separate zero fill), reading the layer's position tables (index of each output and
input channel among the kept ones, -1 if pruned). Dense tensors of the bucket are copied straight.

Positions within a tensor are int32 (64-bit division is emulated on GPUs and made the first version
compute-bound: 0.24 of a copy for `pack`, 2026-11-27 on an H100); only the stage and bucket offsets are
int64. Work is split in blocks of `BLOCK` elements that never straddle two tensors: a block table gives each
program its tensor and its first element.
"""

from __future__ import annotations

import torch
from torch import Tensor

try:
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - CPU-only installs without triton: the torch path is used
    triton = None

BLOCK = 1024


def available() -> bool:
    """Whether the kernels can run (Triton importable)."""
    return triton is not None


if triton is not None:

    @triton.jit
    def _pack_kernel(
        stage_ptr,
        bucket_ptr,
        blk_tensor_ptr,
        blk_start_ptr,
        base_ptr,
        dst_ptr,
        numel_ptr,
        dense_ptr,
        cin_ptr,
        k_ptr,
        nq_ptr,
        ooff_ptr,
        ioff_ptr,
        oidx_ptr,
        iidx_ptr,
        BLOCK: tl.constexpr,
    ):
        pid = tl.program_id(0)
        t = tl.load(blk_tensor_ptr + pid)
        j = tl.load(blk_start_ptr + pid) + tl.arange(0, BLOCK)  # int32: within one tensor
        m = j < tl.load(numel_ptr + t)
        base = tl.load(base_ptr + t)
        flag = tl.load(dense_ptr + t)
        dense = flag != 0
        k = tl.load(k_ptr + t)
        nq = tl.load(nq_ptr + t)
        cin = tl.load(cin_ptr + t)
        r = j % k
        pq = j // k
        q = pq % nq
        p = pq // nq
        gm = m & (flag == 0)
        o = tl.load(oidx_ptr + tl.load(ooff_ptr + t) + p, mask=gm, other=0)
        i = tl.load(iidx_ptr + tl.load(ioff_ptr + t) + q, mask=gm, other=0)
        src = base + tl.where(dense, j, (o * cin + i) * k + r).to(tl.int64)
        v = tl.load(stage_ptr + src, mask=m)
        tl.store(bucket_ptr + tl.load(dst_ptr + t) + j, v, mask=m)

    @triton.jit
    def _unpack_kernel(
        bucket_ptr,
        stage_ptr,
        blk_tensor_ptr,
        blk_start_ptr,
        base_ptr,
        dst_ptr,
        full_ptr,
        dense_ptr,
        cin_ptr,
        k_ptr,
        nq_ptr,
        opoff_ptr,
        ipoff_ptr,
        opos_ptr,
        ipos_ptr,
        BLOCK: tl.constexpr,
    ):
        pid = tl.program_id(0)
        t = tl.load(blk_tensor_ptr + pid)
        e = tl.load(blk_start_ptr + pid) + tl.arange(0, BLOCK)  # int32: within one tensor
        m = e < tl.load(full_ptr + t)
        base = tl.load(base_ptr + t)
        dst = tl.load(dst_ptr + t)
        flag = tl.load(dense_ptr + t)
        dense = flag != 0
        k = tl.load(k_ptr + t)
        nq = tl.load(nq_ptr + t)
        cin = tl.load(cin_ptr + t)
        r = e % k
        row = e // k
        ci = row % cin
        co = row // cin
        gm = m & (flag == 0)
        po = tl.load(opos_ptr + tl.load(opoff_ptr + t) + co, mask=gm, other=-1)
        qi = tl.load(ipos_ptr + tl.load(ipoff_ptr + t) + ci, mask=gm, other=-1)
        kept = (po >= 0) & (qi >= 0)
        src = dst + tl.where(dense, e, (po * nq + qi) * k + r).to(tl.int64)
        v = tl.load(bucket_ptr + src, mask=m & (dense | kept), other=0.0)  # 0 off the support
        tl.store(stage_ptr + base + e, v, mask=m)


def _blocks(numels: list[int], device: torch.device) -> tuple[Tensor, Tensor]:
    """The block table over tensors of these sizes: per block, its tensor and its first element."""
    counts = torch.tensor([-(-n // BLOCK) for n in numels], dtype=torch.int64)
    tensor = torch.repeat_interleave(torch.arange(len(numels)), counts)
    first = torch.cumsum(counts, 0) - counts  # each tensor's first block
    start = (torch.arange(int(counts.sum())) - first[tensor]) * BLOCK
    return tensor.to(device, torch.int32), start.to(device, torch.int32)


class BucketKernels:
    """The tables the two kernels read for one bucket, built once per plan on the data's device.

    Args:
        layers: per tensor of the bucket, in bucket order: ``(out_idx, in_idx, shape)`` of a constrained
            layer (sorted kept indices) or ``(None, None, shape)`` for a dense tensor.
        device: where the data lives.
    """

    def __init__(self, layers: list[tuple[Tensor | None, Tensor | None, tuple[int, ...]]], device: torch.device):
        cols: dict[str, list[int]] = {k: [] for k in ("base", "dst", "numel", "full", "dense", "cin", "k", "nq")}
        cols |= {k: [] for k in ("ooff", "ioff", "opoff", "ipoff")}
        oidx, iidx, opos, ipos = [], [], [], []
        sizes = {"oidx": 0, "iidx": 0, "opos": 0, "ipos": 0}
        base = dst = 0
        for o, i, shape in layers:
            full = 1
            for s in shape:
                full *= int(s)
            if full >= 2**31:  # the kernels index within a tensor in int32
                raise ValueError(f"a tensor of {full} elements is beyond the bucket kernels' int32 indexing")
            dense = o is None
            k = 1 if dense else full // (int(shape[0]) * int(shape[1]))
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
            for name, value in (("ooff", "oidx"), ("ioff", "iidx"), ("opoff", "opos"), ("ipoff", "ipos")):
                cols[name].append(sizes[value])
            if not dense:
                for lst, key, x in ((oidx, "oidx", o), (iidx, "iidx", i), (opos, "opos", op), (ipos, "ipos", ip)):
                    lst.append(x)
                    sizes[key] += x.numel()
            values = (base, dst, numel, full, int(dense), cin, k, nq)
            for name, value in zip(("base", "dst", "numel", "full", "dense", "cin", "k", "nq"), values, strict=True):
                cols[name].append(value)
            base += full
            dst += numel
        self.stage_numel, self.numel = base, dst

        def ints(values: list[int], dtype: torch.dtype = torch.int32) -> Tensor:
            return torch.tensor(values if values else [0], dtype=dtype).to(device)

        def cat(parts: list[Tensor]) -> Tensor:
            return (torch.cat(parts) if parts else torch.zeros(1, dtype=torch.int64)).to(device, torch.int32)

        self.base, self.dst = ints(cols["base"], torch.int64), ints(cols["dst"], torch.int64)
        self.numel_t, self.full_t = ints(cols["numel"], torch.int64), ints(cols["full"], torch.int64)
        self.dense, self.cin, self.k, self.nq = (ints(cols[c]) for c in ("dense", "cin", "k", "nq"))
        self.ooff, self.ioff, self.opoff, self.ipoff = (ints(cols[c]) for c in ("ooff", "ioff", "opoff", "ipoff"))
        self.oidx, self.iidx, self.opos, self.ipos = cat(oidx), cat(iidx), cat(opos), cat(ipos)
        self.pack_tensor, self.pack_start = _blocks(cols["numel"], device)
        self.unpack_tensor, self.unpack_start = _blocks(cols["full"], device)
        self.pack_grid, self.unpack_grid = self.pack_tensor.numel(), self.unpack_tensor.numel()

    def pack(self, stage: Tensor, out: Tensor) -> Tensor:
        """``out`` (the bucket's region, `numel`) = the kept elements of every tensor of the flat ``stage``."""
        if self.pack_grid:
            _pack_kernel[(self.pack_grid,)](
                stage,
                out,
                self.pack_tensor,
                self.pack_start,
                self.base,
                self.dst,
                self.numel_t,
                self.dense,
                self.cin,
                self.k,
                self.nq,
                self.ooff,
                self.ioff,
                self.oidx,
                self.iidx,
                BLOCK=BLOCK,
            )
        return out

    def unpack(self, bucket: Tensor, out: Tensor) -> Tensor:
        """Every element of the flat ``out`` stage: the bucket's value where kept, 0 off the support."""
        if self.unpack_grid:
            _unpack_kernel[(self.unpack_grid,)](
                bucket,
                out,
                self.unpack_tensor,
                self.unpack_start,
                self.base,
                self.dst,
                self.full_t,
                self.dense,
                self.cin,
                self.k,
                self.nq,
                self.opoff,
                self.ipoff,
                self.opos,
                self.ipos,
                BLOCK=BLOCK,
            )
        return out
