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
same launch, measured 0.27-0.34 in those runs, unexplained (`saved-logs/gpu/h100-2026-11-28/`). The pack is a kernel
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


if triton is not None:

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

    @triton.jit
    def _pack_blocks_kernel(
        stage_ptr,
        plus_ptr,
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
        ADD: tl.constexpr,
        BLOCK: tl.constexpr,
    ):
        # `unpack` mirrored: `BLOCK` consecutive packed elements of one tensor per program, written contiguously;
        # packed element e = (p * |K_in| + q) * K + r of a constrained layer is stage element
        # (K_out[p] * C_in + K_in[q]) * K + r after the tensor's start; a dense tensor's is e itself
        pid = tl.program_id(0)
        t = tl.load(blk_tensor_ptr + pid)
        e = tl.load(blk_start_ptr + pid) + tl.arange(0, BLOCK)  # int32: within one tensor
        m = e < tl.load(numel_ptr + t)
        base = tl.load(base_ptr + t)
        dst = tl.load(dst_ptr + t)
        flag = tl.load(dense_ptr + t)
        dense = flag != 0
        k = tl.load(k_ptr + t)
        nq = tl.load(nq_ptr + t)
        cin = tl.load(cin_ptr + t)
        r = e % k
        row = e // k
        gm = m & (flag == 0)
        ko = tl.load(oidx_ptr + tl.load(ooff_ptr + t) + row // nq, mask=gm, other=0)
        ki = tl.load(iidx_ptr + tl.load(ioff_ptr + t) + row % nq, mask=gm, other=0)
        at = base + tl.where(dense, e, (ko * cin + ki) * k + r).to(tl.int64)
        v = tl.load(stage_ptr + at, mask=m)
        if ADD:  # c = z_i + v_i (Alg. 1 line 19), on the kept elements only
            v = v + tl.load(plus_ptr + at, mask=m)
        tl.store(bucket_ptr + dst + e, v, mask=m)


def _blocks(numels: list[int], device: torch.device, block: int) -> tuple[Tensor, Tensor]:
    """The block table over tensors of these sizes: per block of `block` elements, its tensor and its first
    element."""
    counts = torch.tensor([-(-n // block) for n in numels], dtype=torch.int64)
    tensor = torch.repeat_interleave(torch.arange(len(numels)), counts)
    first = torch.cumsum(counts, 0) - counts  # each tensor's first block
    start = (torch.arange(int(counts.sum())) - first[tensor]) * block
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
        cols |= {k: [] for k in ("opoff", "ipoff")}
        opos, ipos = [], []
        oidx, iidx = [], []  # the kept index lists themselves, for the block-wise pack
        cols |= {k: [] for k in ("ooff", "ioff")}
        sizes = {"opos": 0, "ipos": 0, "oidx": 0, "iidx": 0}
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
            for name, value in (("opoff", "opos"), ("ipoff", "ipos")):
                cols[name].append(sizes[value])
            cols["ooff"].append(sizes["oidx"])
            cols["ioff"].append(sizes["iidx"])
            if not dense:
                for lst, key, x in ((opos, "opos", op), (ipos, "ipos", ip), (oidx, "oidx", o), (iidx, "iidx", i)):
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
        self.full_t = ints(cols["full"], torch.int64)
        self.dense, self.cin, self.k, self.nq = (ints(cols[c]) for c in ("dense", "cin", "k", "nq"))
        self.opoff, self.ipoff = ints(cols["opoff"]), ints(cols["ipoff"])
        self.opos, self.ipos = cat(opos), cat(ipos)
        self.unpack_tensor, self.unpack_start = _blocks(cols["full"], device, BLOCK)
        self.unpack_grid = self.unpack_tensor.numel()
        self.numel_t = ints(cols["numel"])
        self.ooff, self.ioff = ints(cols["ooff"]), ints(cols["ioff"])
        self.oidx, self.iidx = cat(oidx), cat(iidx)
        self._numels, self._device = list(cols["numel"]), device
        self._pack_tables: dict[int, tuple[Tensor, Tensor]] = {}  # per block size: `_blocks`

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
        if block not in self._pack_tables:
            self._pack_tables[block] = _blocks(self._numels, self._device, block)
        tensor, start = self._pack_tables[block]
        if tensor.numel():
            _pack_blocks_kernel[(tensor.numel(),)](
                stage,
                stage if plus is None else plus,
                out,
                tensor,
                start,
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
                ADD=plus is not None,
                BLOCK=block,
                num_warps=num_warps,
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
