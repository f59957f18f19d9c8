"""The steps of a consensus round, one function per paper concept (Alg. 1 phases 2-5).

Both engines (`prunex.admm.hsadmm`, `prunex.admm.flat`) are sequences of these calls:

| step | paper | H-SADMM | flat consensus |
|---|---|---|---|
| :func:`sum_theta_plus_u` | Alg. 1 lines 6-7 | intra-node AllReduce | flat AllReduce |
| :func:`z_node_step` | eq. (9) as derived | z_i from its node and z | z from every worker |
| `prunex.pruning.project_groups` | eq. (10), Alg. 1 line 13 | z~_i, per layer, dynamic | z~, per layer, dynamic |
| :func:`mask_frozen_in_buckets` | Alg. 1 line 11, sec. 4.5 | z~_i, all layers, frozen | z~, all layers, frozen |
| :func:`sync_masks` | eq. (14) | leaders' union | (one projection: nothing to unite) |
| :func:`inter_node_average` | eq. (15), sec. 4.4 | compact AllReduce of the leaders | (dense above) |
| :func:`dual_update` | eqs. (12)-(13) | u and v | u |

Residuals and penalty balancing are in `prunex.admm.residuals`, mask freezing in `prunex.admm.freeze`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch
from torch import Tensor

from prunex.admm.engine import flat_of
from prunex.comm import Comm
from prunex.comm.bucket import Bucketer
from prunex.comm.clocks import Span
from prunex.comm.shrink import BucketShrinkPlan, shrink_plan
from prunex.comm.wire import WireBuckets
from prunex.pruning import GroupMask


@torch.no_grad()
def sum_theta_plus_u(
    theta: Mapping[str, Tensor],
    u: Mapping[str, Tensor],
    buffers: Mapping[str, Tensor],
    buckets: Bucketer,
    comm: Comm,
    level: str,
) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
    """sum_j (theta_j + u_j) over the ``level`` group (Alg. 1 lines 6-7), with the floating-point
    buffers (BatchNorm statistics) summed alongside, in coalesced buckets (sec. 4.4.2). Returns views
    into the buckets, per parameter and per buffer. theta + u is written with two multi-tensor ops (a
    copy, then an in-place add: the same sums as one add per tensor, in a few launches on a GPU)."""
    names, bnames = list(theta), list(buffers)
    shapes = [tuple(theta[n].shape) for n in names] + [tuple(buffers[b].shape) for b in bnames]
    buckets.layout([math.prod(s) for s in shapes])
    views = buckets.shaped_views(shapes)
    if names:
        torch._foreach_copy_(views[: len(names)], [theta[n] for n in names])
        torch._foreach_add_(views[: len(names)], [u[n] for n in names])
    for j, b in enumerate(bnames):
        views[len(names) + j].copy_(buffers[b])
    buckets.all_reduce(comm, level, "sum")
    sums = dict(zip(names, views, strict=False))
    return sums, {b: views[len(names) + j] for j, b in enumerate(bnames)}


def z_node_step(
    summed: list[Tensor],
    *,
    rho1: list[float],
    members: int,
    lam_share: float,
    outer: tuple[list[float], list[Tensor], list[Tensor]] | None = None,
    scratch: list[Tensor] | None = None,
) -> list[Tensor]:
    """The z step of every layer: the minimiser of the augmented Lagrangian (eq. (6)) in the consensus
    variable, per layer with its own penalties (lists in layer order), as multi-tensor ops.

    H-SADMM (eq. (9) as derived; the printed eq. (9) writes z_i where z belongs and drops the factor P):
    ``z~_i = [rho_1 sum_j (theta_ij + u_ij) + rho_2 (z - v_i)] / (lambda / M + P rho_1 + rho_2)``, with
    ``summed`` the node's sums, ``members = P``, ``lam_share = lambda / M`` and ``outer = (rho_2, z, v_i)``.

    Flat consensus (every worker tied to z): ``z~ = rho sum_n (theta_n + u_n) / (lambda + N rho)``, with
    ``members = N``, ``lam_share = lambda`` and no outer term.

    The operations and their order are those of one expression per layer (``rho1 * summed / denom``), so
    the values are the same bits. ``summed`` (bucket views that nothing reads afterwards) is overwritten
    with the result and returned as a list: in place, the multi-tensor ops allocate no output per layer;
    ``rho_2 (z - v_i)`` is formed in ``scratch`` (`difference`) where one is given.
    """
    torch._foreach_mul_(summed, rho1)
    if outer is None:
        torch._foreach_div_(summed, [lam_share + members * r for r in rho1])
        return list(summed)
    rho2, z, v = outer
    pulled = difference(z, v, scratch)
    torch._foreach_mul_(pulled, rho2)
    torch._foreach_add_(summed, pulled)
    torch._foreach_div_(summed, [lam_share + members * r1 + r2 for r1, r2 in zip(rho1, rho2, strict=True)])
    return list(summed)


@torch.no_grad()
def mask_frozen_in_buckets(buckets: Bucketer, names: list[str], masks: Mapping[str, GroupMask]) -> None:
    """Alg. 1 line 11 (sec. 4.5), z~ on the frozen mask, for every constrained layer at once, in place in the
    buckets that hold z~: `sum_theta_plus_u` laid parameter ``names[i]`` out in slot i of ``buckets`` and
    `z_node_step` wrote z~ over it there. Every element off a layer's frozen mask becomes exactly +0.0 (a NaN
    too), one ``masked_fill_`` per bucket: the same bits as a per-layer ``torch.where`` (`GroupMask.apply`,
    `prunex.pruning.project.masked`), without its launch and its new tensor per layer, on which a GPU's frozen
    round was host-bound (ResNet-152: 154 constrained layers, issue 27). The off-mask flags, one byte per
    element of the buckets, are built once per layout and set of masks and kept on the Bucketer."""
    key = tuple(masks[n] for n in names if n in masks)
    cached = buckets.frozen_off
    if (
        cached is None
        or cached[0] != buckets.layout_key
        or len(cached[1]) != len(key)
        or any(a is not b for a, b in zip(cached[1], key, strict=True))
    ):
        off: list[Tensor | None] = [None] * len(buckets.buffers)
        for i, n in enumerate(names):
            if n not in masks:
                continue
            slot, mask = buckets.slots[i], masks[n]
            if math.prod(mask.shape) != slot.numel:
                raise ValueError(f"{n}: a mask for shape {mask.shape} on a slot of {slot.numel} elements")
            if off[slot.bucket] is None:
                off[slot.bucket] = torch.zeros_like(buckets.buffers[slot.bucket], dtype=torch.bool)
            region = off[slot.bucket].narrow(0, slot.offset, slot.numel).view(mask.shape)
            region.copy_(torch.logical_not(mask.element_mask()).expand(mask.shape))
        cached = buckets.frozen_off = (buckets.layout_key, key, off)
    for buffer, flags in zip(buckets.buffers, cached[2], strict=True):
        if flags is not None:
            buffer.masked_fill_(flags, 0.0)


def sync_masks(node_masks: Mapping[str, GroupMask], comm: Comm) -> dict[str, GroupMask]:
    """Eq. (14): the union of the nodes' masks, per group, over the leaders (`Comm.mask_sync`: packed
    bitsets all-gathered and OR-ed locally), then an intra-node Broadcast of the uint8 flags so that
    every worker knows the global index sets (Alg. 1 line 25)."""
    vec = torch.cat([m.vector() for m in node_masks.values()])
    if comm.topo.is_leader:
        comm.mask_sync(vec, "inter")
    comm.broadcast(vec, "intra")
    out, pos = {}, 0
    for n, m in node_masks.items():
        size = m.numel_vector()
        out[n] = GroupMask.from_vector(vec[pos : pos + size], m.shape, m.with_shape)
        pos += size
    return out


def inter_node_average(
    z_node: Mapping[str, Tensor],
    v: Mapping[str, Tensor],
    masks: Mapping[str, GroupMask],
    buffers: Mapping[str, Tensor],
    buckets: Bucketer,
    comm: Comm,
    *,
    spans: dict[str, list[Span]] | None = None,
    wire: WireBuckets | None = None,
    pipeline: bool = False,
    one_gather: bool | None = None,
) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
    """Phase 4 (Alg. 1 lines 19-22 and 25; eq. (15), sec. 4.4): the new global z.

    On the leaders: ``c = z_i + v_i`` (line 19); `compress` of every constrained layer to the kept
    filter x channel slices of the global mask (line 20, eq. (15)), other parameters dense, in the same
    coalesced buckets with the node-averaged ``buffers``; AllReduce over the leaders divided by M (line
    21). Then a Broadcast of the compact buckets to the node's workers (line 25) and `decompress` into
    full-size tensors, zero off the support (line 22, sec. 4.4.3). Buckets are laid out once per set of
    compact sizes, so they are reused once the mask is frozen. Returns the new z per parameter and the
    globally averaged buffers (views into the buckets where no decompression is needed). With
    ``spans`` given, the compress (leaders only) and decompress intervals are appended to its
    ``"compress"`` and ``"decompress"`` lists on the device's clock (`prunex.comm.clocks`), to be read after
    the step. ``wire`` sets the buckets' type on the wire (`prunex.comm.wire`; default fp32, the paper's).

    Bucket by bucket. Sequential (``pipeline`` False): fill, AllReduce, Broadcast, decompress, then
    the next bucket. Pipelined: bucket k+1 is filled while bucket k's AllReduce is in flight
    (``async_op``), and bucket k is broadcast and decompressed while k+1's is; the same operations on
    the same data, so the same bits (`tests/test_pipeline.py`); with one bucket nothing changes.

    ``one_gather`` (default: on a GPU) packs and unpacks each bucket's parameters with one
    `BucketShrinkPlan` instead of a few kernels per layer, a GPU being launch-bound on the per-layer path
    (issue 27): lines 19-20 as one pack of z_i + v_i on the kept elements, straight from H-SADMM's flat
    state (`engine.flat_state`; other layouts are first copied and added into a flat stage), line 22 as one
    unpack. The same values bit for bit (`tests/test_bucket_shrink.py`); the CPU keeps the per-layer
    plans, whose native compress kernel measured faster there. Every parameter's z is then a view of the
    bucket's unpacked stage (dense ones too), valid until the next exchange.
    """
    wire = WireBuckets("fp32") if wire is None else wire
    names, bnames = list(z_node), list(buffers)
    spans = {"compress": [], "decompress": []} if spans is None else spans
    shapes = [masks[n].compact_shape if n in masks else tuple(z_node[n].shape) for n in names]
    buckets.layout([math.prod(s) for s in shapes] + [buffers[b].numel() for b in bnames])
    by_bucket: list[list[int]] = [[] for _ in buckets.buffers]  # tensor indices (params, then buffers)
    for i, slot in enumerate(buckets.slots):
        by_bucket[slot.bucket].append(i)
    z: dict[str, Tensor] = {}
    one_gather = comm.device.type == "cuda" if one_gather is None else one_gather
    gathers = (
        [_bucket_gather(buckets, b, by_bucket[b], names, masks, shapes) for b in range(len(buckets.buffers))]
        if one_gather
        else []
    )

    def fill(b: int) -> None:  # lines 19-20 for the tensors of bucket b
        g = gathers[b] if one_gather else None
        if g is not None and g.params:  # the host's lookups, before the span: it times the device's work
            zs, vs = [z_node[names[i]] for i in g.params], [v[names[i]] for i in g.params]
            z_flat, v_flat = g.flat_views(zs, vs)
        span = comm.timer.start()
        for i in by_bucket[b]:  # the node-averaged buffers, as they are
            if i >= len(names):
                buckets.view(i).copy_(buffers[bnames[i - len(names)]].reshape(-1))
        if g is not None:
            if g.params:
                if z_flat is not None and v_flat is not None:  # the engine's flat state: no copy (`engine.flat_state`)
                    g.plan.compress(z_flat, g.dest, plus=v_flat)  # lines 19-20 on the kept elements
                else:
                    if g.stage is None:
                        g.stage = torch.empty_like(g.out)
                        g.fill = g.plan.stage_views(g.stage)
                    torch._foreach_copy_(g.fill, zs)
                    torch._foreach_add_(g.fill, vs)  # line 19: c = z_i + v_i
                    g.plan.compress(g.stage, g.dest)  # line 20, eq. (15), for the whole bucket
        else:
            for i in by_bucket[b]:
                if i >= len(names):
                    continue
                n = names[i]
                c = z_node[n] + v[n]
                if n in masks:  # indices computed once per mask (`shrink_plan`), written into the bucket
                    shrink_plan(masks[n], c.device).compress(c, out=buckets.view(i, shapes[i]))
                else:
                    buckets.view(i).copy_(c.reshape(-1))
        spans.setdefault("compress", []).append(span.stop())

    def finish(b: int) -> None:  # line 25, then line 22 for the tensors of bucket b
        wire.finish_one(buckets, b, comm)
        if one_gather:
            g = gathers[b]
            if g.params:
                span = comm.timer.start()
                g.plan.decompress(g.dest, out=g.out)  # line 22, sec. 4.4.3, for the whole bucket
                spans.setdefault("decompress", []).append(span.stop())
                for i, t in zip(g.params, g.unpacked, strict=True):
                    z[names[i]] = t
            return
        for i in by_bucket[b]:
            if i >= len(names):
                continue
            n, view = names[i], buckets.view(i, shapes[i])
            if n in masks:
                span = comm.timer.start()
                z[n] = shrink_plan(masks[n], view.device).decompress(view)
                spans.setdefault("decompress", []).append(span.stop())
            else:
                z[n] = view.reshape(z_node[n].shape)

    if wire.starts_here(comm.topo):  # the leaders (sharded exchange: every rank)
        waiting: Callable[[], object] | None = None
        for b in range(len(buckets.buffers)):
            fill(b)
            started = wire.start_avg(buckets, b, comm)  # line 21, in flight from here
            if not pipeline:
                started()
                finish(b)
                continue
            if waiting is not None:  # bucket b-1 completes while bucket b travels
                waiting()
                finish(b - 1)
            waiting = started
        if pipeline and waiting is not None:
            waiting()
            finish(len(buckets.buffers) - 1)
    else:
        for b in range(len(buckets.buffers)):
            finish(b)
    z = {n: z[n] for n in names}
    return z, {b: buckets.view(len(names) + j, buffers[b].shape) for j, b in enumerate(bnames)}


@dataclass
class _BucketGather:
    """Bucket b's one-gather plan and the memory it fills, kept while its masks and layout stay."""

    plan: BucketShrinkPlan
    params: list[int]  # the bucket's parameters (indices into the names), back to back from its start
    dest: Tensor  # the bucket region they fill
    unpacked: list[Tensor]  # views of the stage the plan unpacks into (the new z, line 22)
    out: Tensor  # that stage
    stage: Tensor | None = None  # where line 19 writes c_i = z_i + v_i when they are not flat (made on use)
    fill: list[Tensor] | None = None  # its views
    _flat: tuple[list[Tensor], Tensor | None, Tensor | None] | None = None  # `flat_views`' last answer

    def flat_views(self, zs: list[Tensor], vs: list[Tensor]) -> tuple[Tensor | None, Tensor | None]:
        """z_i's and v_i's flat stages (`_stage`), found once for the same tensor objects (held here,
        compared by identity): checking every tensor's place every round would spend host time in the compress span."""
        tensors = zs + vs
        cached = self._flat
        same = cached is not None and len(cached[0]) == len(tensors)
        if not same or any(a is not b for a, b in zip(cached[0], tensors, strict=True)):
            self._flat = cached = (tensors, self._stage(zs), self._stage(vs))
        return cached[1], cached[2]

    def _stage(self, tensors: list[Tensor]) -> Tensor | None:
        """The flat stage ``tensors`` already are when they lie back to back in one buffer, as the plan lays
        them out (`engine.flat_state`, `engine.flat_of`), as one 1-D view; None otherwise."""
        flat = flat_of(tensors)
        return flat if flat is not None and flat.numel() == self.plan.stage_numel else None


def _bucket_gather(
    buckets: Bucketer,
    b: int,
    members: list[int],
    names: list[str],
    masks: Mapping[str, GroupMask],
    shapes: list[tuple[int, ...]],
) -> _BucketGather:
    """Bucket ``b``'s `_BucketGather`: made when the bucket's masks or layout change and kept on the
    `Bucketer` while they do not (a frozen mask's lives for the rest of the run). Its stages and their
    views are allocated once, so a frozen round spends no host time on them; the unpacked z of one round
    is overwritten by the next (as the dense parameters' views into the buckets always were). The
    parameters of a bucket are laid out back to back before its buffers (`prunex.comm.cost.plan_buckets`
    keeps the order)."""
    params = [i for i in members if i < len(names)]
    key = tuple(masks.get(names[i]) for i in params)
    cached = buckets.gathers.get(b)
    if (
        cached is not None
        and cached[0] == buckets.layout_key
        and all(x is y for x, y in zip(cached[1], key, strict=True))
    ):
        return cached[2]
    slots = [buckets.slots[i] for i in params]
    for a, c in itertools.pairwise(slots):
        if c.offset != a.offset + a.numel:
            raise RuntimeError(f"bucket {b}'s parameters are not back to back: {a} then {c}")
    device = buckets.device
    entries = [shrink_plan(masks[names[i]], device) if names[i] in masks else shapes[i] for i in params]
    plan = BucketShrinkPlan(entries, device)
    out = torch.empty(plan.stage_numel, dtype=buckets.dtype, device=device)
    start = slots[0].offset if slots else 0
    dest = buckets.buffers[b].narrow(0, start, plan.numel)
    value = _BucketGather(plan, params, dest, plan.stage_views(out), out)
    buckets.gathers[b] = (buckets.layout_key, key, value)
    return value


def difference(new: list[Tensor], old: list[Tensor], out: list[Tensor] | None = None) -> list[Tensor]:
    """``new - old`` per layer, as multi-tensor ops: written into ``out`` (a copy, then an in-place
    subtraction: the same bits as one subtraction per tensor) where given, so that a round allocates no
    output per layer (a GPU round was host-bound on those allocations, issue 27), else new tensors."""
    if out is None:
        return list(torch._foreach_sub(new, old))
    torch._foreach_copy_(out, new)
    torch._foreach_sub_(out, old)
    return out


def dual_update(
    dual: list[Tensor], x: list[Tensor], anchor: list[Tensor], out: list[Tensor] | None = None
) -> list[Tensor]:
    """Scaled dual ascent of every layer, in place, ``dual += x - anchor``, as multi-tensor ops; returns the
    primal residual ``x - anchor`` (in ``out`` where given, `difference`). H-SADMM: ``v_i += z_i - z``
    (eq. (13), Alg. 1 line 23) and ``u_ij += theta_ij - z_i`` (eq. (12), line 27); flat consensus
    ``u_n += theta_n - z``."""
    residual = difference(x, anchor, out)
    torch._foreach_add_(dual, residual)
    return residual
