"""Physical shrinkage and recovery of inter-node buffers (sec. 4.4.1 and 4.4.3).

``compress`` packs the kept filters K_out and input channels K_in of a weight-shaped tensor into a
dense contiguous block ``t[K_out][:, K_in]`` (eq. (15)); ``decompress`` zero-fills a full-size tensor
and scatters the block back at the Cartesian product K_out x K_in. Both accept an ``out`` buffer so
that, once masks are frozen (sec. 4.5), buffers are allocated once and reused.

Two equivalent implementations are kept (``method=``):

* ``"index_select"``: ``index_select`` along dim 0 then dim 1 for compress, ``index_put_`` with the
  broadcast index pair (K_out[:, None], K_in[None, :]) for decompress -- the paper's formulation;
* ``"flat"``: views the tensor as ``(C_out * C_in) x (KH * KW)`` rows and moves whole kernel rows with
  one ``index_select`` / ``index_copy_`` over the flat row index ``K_out[p] * C_in + K_in[q]``.

``"auto"`` (default) picks what measured fastest on CPU (``python -m prunex.bench.shrink``, see
:func:`_pick`): "flat" for compress of kernels larger than 1x1 and for every decompress, "index_select"
for compress of 1x1 convs and Linear weights.

Once a mask is known (and for good once it is frozen, sec. 4.5), :class:`ShrinkPlan` holds what every
call would otherwise recompute: the indices on the data's device and the flat row index, computed
once; `shrink_plan` caches one per `GroupMask`. Its ``compress``/``decompress`` give bitwise the same
results as the functions (``method="auto"``), writing straight into the caller's ``out`` (a bucket view).
On x86-64 CPUs with AVX-512F its ``compress`` of fp32 runs the one hand-written kernel of
:mod:`prunex.comm.native` (one pass over each kept filter row; same bytes), the torch ops elsewhere.

:class:`BucketShrinkPlan` does the same for every tensor of one communication bucket at once: one gather
(``index_select`` over a flat element index) packs the whole bucket, one ``index_copy_`` unpacks it. A
GPU runs a per-layer plan as a few small kernels per layer, each one a launch (155 layers of ResNet-152:
launch-bound, issue 27); the bucket plan is one launch per bucket and the same bytes (on CUDA the Triton
kernels of :mod:`prunex.comm.bucket_kernels`). The exchange uses it
on GPUs (`prunex.admm.steps.inter_node_average`); on CPUs the per-layer plan and its native kernel
measured faster.

Indices are used in the order given (sorted, as :mod:`prunex.pruning.masks` returns them, so that every
leader packs the same layout), must not repeat, and are moved to the data's device.

Example::

    PYTHONPATH=. python -m prunex.bench.shrink --keep 0.5
"""

from __future__ import annotations

import weakref
from math import prod
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from prunex.comm import bucket_kernels
from prunex.comm import native as native_kernel

if TYPE_CHECKING:
    from prunex.pruning import GroupMask

__all__ = ["BucketShrinkPlan", "ShrinkPlan", "compress", "decompress", "shrink_plan"]

_METHODS = ("auto", "index_select", "flat")


def _pick(shape: torch.Size | tuple[int, ...], method: str, op: str) -> str:
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
    if method != "auto":
        return method
    # Measured on CPU (bench.shrink, per kernel size): compress of 3x3 kernels is faster moving 36-byte
    # kernel rows through one flat index than with two index_selects (the dim-1 pass is a serial loop);
    # for 1x1 convs and Linear weights a flat row is one element and the two index_selects win.
    # Decompress: index_copy_ over flat rows was as fast or faster than index_put_ for both.
    if op == "decompress":
        return "flat"
    return "flat" if prod(shape[2:]) > 1 else "index_select"


def _check_shape(t: Tensor) -> None:
    if t.dim() < 2:
        raise ValueError(f"shrinkage needs a C_out x C_in x ... tensor, got shape {tuple(t.shape)}")


def _check_out(out: Tensor, shape: tuple[int, ...], like: Tensor, what: str) -> None:
    if tuple(out.shape) != shape or out.dtype != like.dtype or out.device != like.device:
        raise ValueError(
            f"{what} out buffer must be {shape} {like.dtype} on {like.device}, "
            f"got {tuple(out.shape)} {out.dtype} on {out.device}"
        )
    if not out.is_contiguous():
        raise ValueError(f"{what} out buffer must be contiguous")


def _flat_rows(out_idx: Tensor, in_idx: Tensor, c_in: int) -> Tensor:
    """Row index of (K_out[p], K_in[q]) in the (C_out * C_in) x K view, in compact (p, q) order."""
    return (out_idx[:, None] * c_in + in_idx[None, :]).reshape(-1)


def compress(t: Tensor, out_idx: Tensor, in_idx: Tensor, out: Tensor | None = None, *, method: str = "auto") -> Tensor:
    """Pack the kept slices of ``t`` into a dense contiguous tensor (eq. (15)).

    Args:
        t: ``C_out x C_in x KH x KW`` (conv) or ``C_out x C_in`` (linear) tensor, e.g. c_i = z_i + v_i.
        out_idx: sorted kept output indices K_out (int64, 1-D, no repeats).
        in_idx: sorted kept input indices K_in (int64, 1-D, no repeats).
        out: optional contiguous buffer of shape ``(|K_out|, |K_in|, KH, KW)`` and ``t``'s dtype and
            device, filled in place (one-shot buffer allocation after mask freezing, sec. 4.5).
        method: ``"auto"``, ``"index_select"`` or ``"flat"`` (same result; see the module docstring).

    Returns:
        ``t[K_out][:, K_in]``, contiguous; ``out`` itself when given.

    Raises:
        ValueError: on a tensor with fewer than 2 dims, a wrong ``out`` buffer, or an unknown method.
    """
    _check_shape(t)
    o = out_idx.to(device=t.device, dtype=torch.long)
    i = in_idx.to(device=t.device, dtype=torch.long)
    shape = (o.numel(), i.numel(), *t.shape[2:])
    if out is None:
        out = torch.empty(shape, dtype=t.dtype, device=t.device)
    else:
        _check_out(out, shape, t, "compress")
    if _pick(t.shape, method, "compress") == "flat":
        k = prod(t.shape[2:])
        rows = t.reshape(t.shape[0] * t.shape[1], k)
        torch.index_select(rows, 0, _flat_rows(o, i, t.shape[1]), out=out.view(-1, k))
    else:
        torch.index_select(t.index_select(0, o), 1, i, out=out)  # eq. (15): t[K_out, K_in, :, :]
    return out


def decompress(
    c: Tensor,
    out_idx: Tensor,
    in_idx: Tensor,
    shape: torch.Size | tuple[int, ...],
    out: Tensor | None = None,
    *,
    method: str = "auto",
) -> Tensor:
    """Zero-filled full-size tensor with ``c`` scattered at K_out x K_in (sec. 4.4.3).

    Args:
        c: compact tensor ``(|K_out|, |K_in|, KH, KW)`` (or 2-D), e.g. the all-reduced z-hat.
        out_idx: sorted kept output indices K_out (int64, 1-D, no repeats).
        in_idx: sorted kept input indices K_in (int64, 1-D, no repeats).
        shape: full shape ``(C_out, C_in, KH, KW)`` (or ``(C_out, C_in)``).
        out: optional contiguous full-size buffer of ``c``'s dtype and device; it is zeroed and filled in
            place (no allocation of the full tensor).
        method: ``"auto"``, ``"index_select"`` (``index_put_``) or ``"flat"`` (``index_copy_``).

    Returns:
        The full tensor: ``z[K_out[p], K_in[q]] = c[p, q]``, exactly 0 elsewhere; ``out`` when given.

    Raises:
        ValueError: if ``c``'s shape does not match the indices and ``shape``, on a wrong ``out``
            buffer, or an unknown method.
    """
    shape = tuple(int(s) for s in shape)
    if len(shape) < 2:
        raise ValueError(f"shrinkage needs a C_out x C_in x ... shape, got {shape}")
    o = out_idx.to(device=c.device, dtype=torch.long)
    i = in_idx.to(device=c.device, dtype=torch.long)
    expected = (o.numel(), i.numel(), *shape[2:])
    if tuple(c.shape) != expected:
        raise ValueError(f"compact tensor has shape {tuple(c.shape)}, expected {expected}")
    if out is None:
        out = torch.zeros(shape, dtype=c.dtype, device=c.device)
    else:
        _check_out(out, shape, c, "decompress")
        out.zero_()
    if _pick(shape, method, "decompress") == "flat":
        k = prod(shape[2:])
        rows = out.view(shape[0] * shape[1], k)
        rows.index_copy_(0, _flat_rows(o, i, shape[1]), c.reshape(-1, k))
    else:
        out.index_put_((o[:, None], i[None, :]), c)  # sec. 4.4.3: scatter at K_out x K_in
    return out


class ShrinkPlan:
    """`compress` and `decompress` of one layer's kept slices with every index computed once.

    Args:
        out_idx: sorted kept output indices K_out (1-D, no repeats).
        in_idx: sorted kept input indices K_in (1-D, no repeats).
        shape: the full weight shape ``(C_out, C_in, ...)``.
        device: where the data lives (the indices are moved there once).
        native: use the kernel of :mod:`prunex.comm.native` for compress where it applies (False: the
            torch ops always, e.g. to compare the two).

    Same layout and bitwise the same values as ``method="auto"``. Compress of a contiguous fp32 CPU
    tensor runs `prunex.comm.native.RowPacker` when it is available (each kept filter row read once,
    its kept elements packed with AVX-512). Otherwise: kernels larger than 1x1 move whole KH*KW rows
    through the precomputed flat row index ``K_out[p] * C_in + K_in[q]``; 1x1 convs and Linear weights
    gather the kept filters (contiguous rows) into a scratch buffer the plan keeps, then the kept
    channels. Decompress zero-fills and scatters rows (elements for 1x1) back.
    """

    def __init__(
        self, out_idx: Tensor, in_idx: Tensor, shape: tuple[int, ...], device: torch.device, *, native: bool = True
    ) -> None:
        self.shape = tuple(int(s) for s in shape)
        if len(self.shape) < 2:
            raise ValueError(f"shrinkage needs a C_out x C_in x ... shape, got {self.shape}")
        self.out_idx = out_idx.to(device=device, dtype=torch.long).contiguous()
        self.in_idx = in_idx.to(device=device, dtype=torch.long)
        self.kernel = prod(self.shape[2:])
        self.compact_shape = (self.out_idx.numel(), self.in_idx.numel(), *self.shape[2:])
        self.rows = _flat_rows(self.out_idx, self.in_idx, self.shape[1])  # rows of the (C_out C_in) x K view
        self._scratch: dict[torch.dtype, Tensor] = {}
        self.native = native
        self._packer: native_kernel.RowPacker | None = None  # the native kernel's, made on its first use

    def compress(self, t: Tensor, out: Tensor | None = None) -> Tensor:
        """``t[K_out][:, K_in]`` into ``out`` (allocated when None), as `compress`."""
        if tuple(t.shape) != self.shape:
            raise ValueError(f"plan is for shape {self.shape}, got {tuple(t.shape)}")
        out = _output(out, self.compact_shape, t, "compress", zeroed=False)
        c_out, c_in = self.shape[:2]
        if self._use_native(t):
            self._packer(t, out)
            return out
        if self.kernel > 1:
            torch.index_select(t.reshape(c_out * c_in, self.kernel), 0, self.rows, out=out.view(-1, self.kernel))
            return out
        scratch = self._scratch.get(t.dtype)
        if scratch is None:
            scratch = self._scratch[t.dtype] = torch.empty(self.out_idx.numel(), c_in, dtype=t.dtype, device=t.device)
        torch.index_select(t.reshape(c_out, c_in), 0, self.out_idx, out=scratch)  # contiguous filter rows
        torch.index_select(scratch, 1, self.in_idx, out=out.view(self.compact_shape[:2]))
        return out

    def _use_native(self, t: Tensor) -> bool:
        """Whether `compress` runs the AVX-512 kernel of :mod:`prunex.comm.native` (CPU fp32, contiguous,
        kernel available); its bytes are those of the torch path below."""
        if not self.native or t.device.type != "cpu" or t.dtype != torch.float32 or not t.is_contiguous():
            return False
        if not native_kernel.available():
            return False
        if self._packer is None:
            self._packer = native_kernel.RowPacker(self.out_idx, self.in_idx, self.shape)
        return True

    def decompress(self, c: Tensor, out: Tensor | None = None) -> Tensor:
        """The zero-filled full tensor with ``c`` at K_out x K_in, into ``out`` when given, as `decompress`."""
        if tuple(c.shape) != self.compact_shape:
            raise ValueError(f"compact tensor has shape {tuple(c.shape)}, expected {self.compact_shape}")
        out = _output(out, self.shape, c, "decompress", zeroed=True)
        rows = out.view(self.shape[0] * self.shape[1], self.kernel)
        rows.index_copy_(0, self.rows, c.reshape(-1, self.kernel))
        return out


class BucketShrinkPlan:
    """`compress` / `decompress` of every tensor of one bucket with one gather and one scatter.

    Args:
        entries: per tensor of the bucket, in bucket order, its `ShrinkPlan` (a constrained layer) or its
            full shape (sent dense).
        device: where the data lives.
        kernels: use the Triton kernels of :mod:`prunex.comm.bucket_kernels` (default: on a CUDA device
            where Triton is installed); else torch's index ops over a flat element index.

    The tensors' full-size values sit back to back in one flat *stage* (`stage_views` gives each
    tensor's view; the caller writes c_i = z_i + v_i there, Alg. 1 line 19). Packed element j of the
    bucket is, for a constrained layer, an element of its kept rows ``K_out[p] * C_in + K_in[q]`` (the
    per-layer plan's ``rows``) in compact (p, q, kh, kw) order, for a dense tensor its own element. So
    `compress` packs, element for element, the bucket the per-layer plans would pack (eq. (15)), and
    `decompress` gives the stage their `decompress` would (sec. 4.4.3): kept values, exactly 0 elsewhere.
    The torch path keeps ``index`` (stage position of each packed element; int32 where the stage allows
    it, half the index bytes) and the int64 copy ``index_copy_`` needs; the kernels compute positions from
    the kept index lists instead.
    """

    def __init__(
        self, entries: list[ShrinkPlan | tuple[int, ...]], device: torch.device, *, kernels: bool | None = None
    ) -> None:
        self.shapes = [
            entry.shape if isinstance(entry, ShrinkPlan) else tuple(int(s) for s in entry) for entry in entries
        ]
        self.offsets = [0]
        for shape in self.shapes:
            self.offsets.append(self.offsets[-1] + prod(shape))
        self.stage_numel = self.offsets.pop()
        if kernels is None:
            kernels = device.type == "cuda" and bucket_kernels.available()
        self.kernels: bucket_kernels.BucketKernels | None = None
        if kernels:
            layers = [
                (e.out_idx, e.in_idx, e.shape) if isinstance(e, ShrinkPlan) else (None, None, shape)
                for e, shape in zip(entries, self.shapes, strict=True)
            ]
            self.kernels = bucket_kernels.BucketKernels(layers, device)
            self.numel = self.kernels.numel  # elements of the bucket this plan fills
            return
        parts: list[Tensor] = []
        for entry, shape, offset in zip(entries, self.shapes, self.offsets, strict=True):
            if isinstance(entry, ShrinkPlan):
                rows = entry.rows.to(device)
                k = entry.kernel
                elems = (rows[:, None] * k + torch.arange(k, device=device)).reshape(-1)
            else:
                elems = torch.arange(prod(shape), device=device)
            parts.append(elems + offset)
        self.index64 = torch.cat(parts) if parts else torch.empty(0, dtype=torch.long, device=device)
        self.index = self.index64.to(torch.int32) if self.stage_numel < 2**31 else self.index64
        self.numel = self.index64.numel()

    def stage_views(self, stage: Tensor) -> list[Tensor]:
        """Each tensor's full-size view into a flat stage of `stage_numel` elements."""
        return [stage.narrow(0, o, prod(s)).view(s) for o, s in zip(self.offsets, self.shapes, strict=True)]

    def compress(self, stage: Tensor, out: Tensor, plus: Tensor | None = None) -> Tensor:
        """The bucket's elements (``out``, 1-D, `numel`) gathered from the flat full-size stage; with ``plus``
        (a second stage laid out alike) the sum of both, added on the kept elements only: the same bits as
        packing ``stage + plus`` (one float addition per element either way)."""
        if self.kernels is not None:
            return self.kernels.pack(stage, out, plus)
        torch.index_select(stage, 0, self.index, out=out)
        return out if plus is None else out.add_(torch.index_select(plus, 0, self.index))

    def decompress(self, bucket: Tensor, out: Tensor | None = None) -> Tensor:
        """The flat stage (``out`` when given, every element written) with the bucket's elements where kept
        and exactly 0 off each layer's kept slices; `stage_views` splits it."""
        if self.kernels is not None:
            out = torch.empty(self.stage_numel, dtype=bucket.dtype, device=bucket.device) if out is None else out
            _check_out(out, (self.stage_numel,), bucket, "decompress")
            return self.kernels.unpack(bucket, out)
        out = _output(out, (self.stage_numel,), bucket, "decompress", zeroed=True)
        return out.index_copy_(0, self.index64, bucket)


def _output(out: Tensor | None, shape: tuple[int, ...], like: Tensor, what: str, zeroed: bool) -> Tensor:
    """``out`` checked against ``shape`` and ``like``'s dtype and device (zero-filled when ``zeroed``), or a
    new tensor (zeros or uninitialised) when it is None."""
    if out is None:
        return (torch.zeros if zeroed else torch.empty)(shape, dtype=like.dtype, device=like.device)
    _check_out(out, shape, like, what)
    return out.zero_() if zeroed else out


_PLANS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def shrink_plan(mask: GroupMask, device: torch.device | None = None) -> ShrinkPlan:
    """The `ShrinkPlan` of a group mask, made on first use and kept while the mask lives (a frozen
    mask lives for the rest of the run, so its indices are computed once)."""
    device = mask.out_idx.device if device is None else device
    key = (str(device),)
    cached = _PLANS.get(mask)
    if cached is not None and cached[0] == key:
        return cached[1]
    plan = ShrinkPlan(mask.out_idx, mask.in_idx, mask.shape, device)
    _PLANS[mask] = (key, plan)
    return plan
