"""What each method computes and communicates per iteration, and what that costs.

A method's iteration (`prunex.methods.base`: an optimizer step for ddp/topk/pactrain, an outer ADMM
iteration of E local epochs for hsadmm/flat_admm, of one in masked retraining) becomes a
:class:`Workload`: the collectives it issues (`prunex.perfmodel.formulas.Collective`, with the payload
each member passes in), the samples each rank trains on, and its memory-bound vector work.
:func:`iteration_cost` prices it with a :class:`~prunex.perfmodel.formulas.Network` and a :class:`Device`.

Per-iteration collectives, read off the implementation:

- ``hsadmm`` (`prunex.admm.hsadmm.HSADMM.consensus`): a flat barrier (1-byte AllReduce: waiting for
  stragglers is logged apart from the transfers), an intra AllReduce of every parameter and
  floating-point buffer (BatchNorm statistics, only with ``average_bn_stats``: runs send them only when
  evaluation does not re-estimate them) in ``bucket_mb`` buckets (1e6 bytes); while the mask is
  dynamic, a mask_sync over the leaders (eq. (14); an AllGather of the out + in (+ shape) flags per
  constrained layer packed eight to a byte) and an intra Broadcast of the uint8 flag vector; the
  leaders' inter AllReduce of the compact buffers (kept_out x kept_in x kh x kw per constrained layer,
  dense otherwise, plus any buffers; eq. (15)) in
  ``bucket_mb`` buckets; the intra Broadcast of those buckets; the residual table (float32, 9 columns
  per parameter tensor) summed in the node, across nodes by the leaders and broadcast in the node.
- ``flat_admm`` (`prunex.admm.flat.FlatADMM`): the same flat barrier, one flat AllReduce of all
  parameters and buffers in ``bucket_mb`` buckets, and a flat AllReduce of a float64 table of 3
  columns per parameter tensor.
- ``ddp``: one flat AllReduce per DDP bucket (``bucket_cap_mb`` MiB, `commcost.ddp_bucket_sizes` of the
  parameters in reverse order, as torch rebuilds its buckets after the first iteration) of the gradients
  (4 bytes, 2 with bf16/fp16), overlapped with the backward pass but for the last bucket, the first layers'.
- ``topk`` (`prunex.methods.topk`): two flat AllGathers (fp32 values, int32 indices) of
  ``k = max(1, ceil(ratio numel))`` entries per tensor with more than one dimension, and one flat
  AllReduce of the 1-D parameters' gradients.
- ``pactrain`` (`prunex.methods.pactrain`): one flat AllReduce of the packed gradients,
  ``4 (sum ceil(d numel) over >1-D tensors + #1-D entries)`` bytes.

Compute: ``samples * compute_s_per_sample`` (forward, backward and optimizer step, measured or
estimated per device) plus memory-bound vector work at the device's memory bandwidth (ADMM's
proximal gradient term each local step and its consensus updates). Compress/decompress (a separate
column): bytes touched / memory bandwidth + kernel launches x launch latency, for H-SADMM's
shrinkage and recovery (eq. (15), sec. 4.4.3; leader critical path), Top-K's selection and
scatter, PacTrain's pack and unpack. DDP hides communication behind the backward pass:
``hidden = min(comm - last bucket, overlap * backward_fraction * compute)`` (the last bucket can only
start when the backward pass ends; Li et al. 2020, "PyTorch Distributed", VLDB, sec. 3.2.3).
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from prunex.admm.residuals import FLAT_TABLE_COLUMNS, HSADMM_TABLE_COLUMNS
from prunex.comm.cost import bucket_bytes, ddp_bucket_sizes, keep_count, packed_bytes, ring_bytes, topk_count
from prunex.methods.registry import method_info
from prunex.perfmodel.formulas import Collective, Network, time_of
from prunex.training.config import DATASET_DEFAULTS, ADMMConfig, DDPConfig, PacTrainConfig, RunConfig, TopKConfig

COMM_COLUMNS = (
    "intra_allreduce_s",
    "inter_allreduce_s",
    "flat_allreduce_s",
    "broadcast_s",
    "allgather_s",
    "mask_sync_s",
    "barrier_s",
)
HSADMM_RESIDUAL_COLUMNS = len(HSADMM_TABLE_COLUMNS)  # float32 columns of the residual table (`HSADMMNorms`)
FLAT_ADMM_RESIDUAL_COLUMNS = len(FLAT_TABLE_COLUMNS)


# ---------------------------------------------------------------------------------------- the model
@dataclass(frozen=True)
class ParamSpec:
    name: str
    shape: tuple[int, ...]
    conv: bool  # a Conv2d weight: constrained by default (paper sec. 5.1.5)
    in_channels: int | None = None  # the convolution's input channels (default: shape[1])

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


@dataclass(frozen=True)
class ModelSpec:
    """Parameter shapes (in ``named_parameters`` order) and floating-point buffer sizes of a model."""

    name: str
    params: tuple[ParamSpec, ...]
    buffers: tuple[int, ...] = ()

    @property
    def numel(self) -> int:
        return sum(p.numel for p in self.params)

    def sparsity(
        self, filter_keep: float = 1.0, channel_keep: float = 1.0, shape_keep: float = 1.0, layers: str | None = None
    ) -> dict:
        """The constrained layers and their keep rates, as `prunex.pruning.constrained_layers` sets them on
        the model (`conv_sparsity`: conv weights matching ``layers``, the RGB stem keeping its 3 channels;
        layers left unconstrained omitted)."""
        from prunex.pruning.layers import conv_sparsity  # lazy: torch; the performance model loads without it

        out = {}
        for p in self.params:
            if p.conv and (layers is None or fnmatch.fnmatchcase(p.name, layers)):
                in_channels = p.in_channels if p.in_channels is not None else p.shape[1]
                sp = conv_sparsity(
                    p.name, in_channels, filter_keep=filter_keep, channel_keep=channel_keep, shape_keep=shape_keep
                )
                if sp.constrained:
                    out[p.name] = sp
        return out


@lru_cache(maxsize=16)
def model_spec(name: str) -> ModelSpec:
    """The :class:`ModelSpec` of ``prunex.training.models.build_model(name)``."""
    import torch
    from torch import nn

    from prunex.training.models import build_model  # lazy: torch, as above

    with torch.device("meta"):  # shapes only: no memory, no random initialisation (seconds for ResNet-152)
        model = build_model(name)
    convs = {
        f"{m}.weight" if m else "weight": mod.in_channels
        for m, mod in model.named_modules()
        if isinstance(mod, nn.Conv2d)
    }
    params = tuple(ParamSpec(n, tuple(p.shape), n in convs, convs.get(n)) for n, p in model.named_parameters())
    buffers = tuple(b.numel() for _, b in model.named_buffers() if b.is_floating_point())
    return ModelSpec(name, params, buffers)


Kept = Mapping[str, tuple[int, int]]  # constrained parameter name -> (kept filters, kept input channels)


def kept_from_keep(
    spec: ModelSpec, filter_keep: float = 1.0, channel_keep: float = 1.0, layers: str | None = None
) -> dict[str, tuple[int, int]]:
    """Kept groups per constrained layer at the given keep rates, assuming all nodes agree (the union
    of eq. (14) is then each node's mask): ``(keep_count(C_out, f), keep_count(C_in, c))`` with the keep
    rates `ModelSpec.sparsity` gives each layer (the stem keeps its RGB channels, as in real runs)."""
    shapes = {p.name: p.shape for p in spec.params}
    return {
        name: (keep_count(shapes[name][0], sp.filter_keep), keep_count(shapes[name][1], sp.channel_keep))
        for name, sp in spec.sparsity(filter_keep, channel_keep, 1.0, layers).items()
    }


def compact_fraction(spec: ModelSpec, kept: Kept) -> float:
    """Fraction of the constrained layers' weights inside the compact buffers."""
    layers = [p for p in spec.params if p.name in kept]
    full = sum(p.numel for p in layers)
    comp = sum(kept[p.name][0] * kept[p.name][1] * math.prod(p.shape[2:]) for p in layers)
    return comp / full if full else 1.0


# ---------------------------------------------------------------------------------- options, device
_ADMM, _DDP, _TOPK, _PACTRAIN = ADMMConfig(), DDPConfig(), TopKConfig(), PacTrainConfig()


@dataclass(frozen=True)
class Options:
    """What the model needs to know of a run, and the model's own constants.

    The run's part defaults to the run config's defaults (the paper's sec. 5.1.4-5.1.5 on CIFAR-10) and
    is built from a run with :meth:`from_config`; the model's constants (``ddp_overlap`` and below) are
    assumptions documented in the module docstring.
    """

    batch_size: int = DATASET_DEFAULTS["cifar10"]["batch_size"]
    local_epochs: int = _ADMM.local_epochs
    # the ADMM run: K_max outer iterations of E local epochs, then R masked-retraining iterations of one local
    # epoch each (`prunex.methods.hsadmm.ADMMMethod.train_iteration`); `epoch_cost` weighs the two
    iterations: int = _ADMM.iterations
    retrain_epochs: int = _ADMM.retrain_epochs
    bucket_mb: float = _ADMM.bucket_mb  # hsadmm / flat_admm coalesced buffers, 1e6 bytes (sec. 4.4.2)
    ddp_bucket_mb: float = _DDP.bucket_cap_mb  # DDP bucket_cap_mb, MiB
    ddp_grad_bytes: int = 4  # 2 with --grad-dtype bf16/fp16
    wire_bytes: int = 4  # hsadmm compact buckets on the wire: 2 with --wire-dtype bf16/fp16
    inter_exchange: str = "leader"  # hsadmm: "sharded" spreads each bucket over the node's P ranks
    procs_per_node: int = 1  # P, for the sharded exchange's shards
    topk_ratio: float = _TOPK.ratio
    density: float = _PACTRAIN.density  # pactrain
    filter_keep: float = _ADMM.filter_keep
    channel_keep: float = _ADMM.channel_keep
    shape_keep: float = _ADMM.shape_keep
    layers: str | None = _ADMM.layers
    # BatchNorm statistics in the ADMM consensus: only when not re-estimated before evaluation
    average_bn_stats: bool = RunConfig.bn_batches == 0
    # hsadmm iterations with a dynamic mask: T_freeze / (K_max + retraining) = 15 / 60 by default
    dynamic_fraction: float = _ADMM.freeze_iteration / (_ADMM.iterations + _ADMM.retrain_epochs)
    ddp_overlap: float = 1.0  # share of the backward pass that DDP's AllReduce can hide behind
    backward_fraction: float = 2.0 / 3.0  # backward ~ 2x forward FLOPs
    topk_passes: float = 5.0  # reads of the tensor by torch.topk's radix select (assumption, see docstring)
    admm_update_passes: float = 25.0  # 4-byte passes over all parameters per consensus (z, u, v, norms)
    prox_bytes_per_param: float = 24.0  # proximal term per local step: read p, anchor, grad; temp; write grad
    random_access_bytes: float = 64.0  # one scattered read-modify-write (two 32-byte sectors)

    def __post_init__(self) -> None:
        # shares of a run or of a pass: outside [0, 1] the projection was made all the same (2026-12-08)
        for name in ("dynamic_fraction", "ddp_overlap", "backward_fraction"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and 0.0 <= value <= 1.0):  # NaN fails this too
                raise ValueError(f"{name} must be a share in [0, 1], got {value!r}")

    @classmethod
    def from_config(cls, cfg: RunConfig, **model: Any) -> Options:
        """The options of a run (``model``: the model's own constants, e.g. ``ddp_overlap``)."""
        a = cfg.admm
        return cls(
            batch_size=cfg.batch_size,
            local_epochs=a.local_epochs,
            iterations=a.iterations,
            retrain_epochs=a.retrain_epochs,
            bucket_mb=a.bucket_mb,
            ddp_bucket_mb=cfg.ddp.bucket_cap_mb,
            ddp_grad_bytes=4 if cfg.ddp.grad_dtype == "fp32" else 2,
            wire_bytes=4 if a.wire_dtype == "fp32" else 2,
            inter_exchange=a.inter_exchange,
            procs_per_node=cfg.procs_per_node,
            topk_ratio=cfg.topk.ratio,
            density=cfg.pactrain.density,
            filter_keep=a.filter_keep,
            channel_keep=a.channel_keep,
            shape_keep=a.shape_keep,
            layers=a.layers,
            average_bn_stats=cfg.averages_bn_stats,
            dynamic_fraction=min(a.freeze_iteration, a.iterations) / (a.iterations + a.retrain_epochs),
            **model,
        )


@dataclass(frozen=True)
class Device:
    """One accelerator: training seconds per sample, memory bandwidth, kernel launch latency."""

    compute_s_per_sample: float
    mem_bw: float = 720e9
    launch_s: float = 5e-6


@dataclass(frozen=True)
class Workload:
    """One iteration of one rank: its collectives, samples, and memory-bound work."""

    method: str
    collectives: tuple[Collective, ...]
    samples: float  # training samples per rank
    steps: float  # optimizer steps per rank
    vector_bytes: float = 0.0  # memory-bound work counted as compute (ADMM updates, proximal term)
    compress_bytes: float = 0.0  # compress/decompress bytes touched
    compress_launches: float = 0.0
    overlap_last_bytes: float = 0.0  # DDP: payload of the bucket that cannot overlap the backward pass
    notes: dict[str, float] = field(default_factory=dict)


def _float_bytes(n: float) -> float:
    return 4.0 * n


def hsadmm_workload(spec: ModelSpec, kept: Kept, opts: Options, shard: int, dynamic: float = 0.0) -> Workload:
    """One outer H-SADMM iteration (Alg. 1; module docstring). ``dynamic`` in [0, 1]: whether (or how
    often) the mask is still dynamic, i.e. mask_sync + its Broadcast happen."""
    buffers = list(spec.buffers) if opts.average_bn_stats else []
    dense = [p.numel for p in spec.params] + buffers
    coll = [Collective("flat", "barrier", 1, tag="wait for every rank")]
    for i, b in enumerate(bucket_bytes(dense, 4, int(opts.bucket_mb * 1e6))):
        coll.append(Collective("intra", "allreduce", b, tag=f"theta+u bucket {i}"))
    names = set(kept)
    constrained = [p for p in spec.params if p.name in names]
    if dynamic > 0 and constrained:
        flags = sum(
            p.shape[0] + p.shape[1] + (math.prod(p.shape[1:]) if opts.shape_keep < 1.0 else 0) for p in constrained
        )
        coll.append(Collective("inter", "mask_sync", packed_bytes(flags), count=dynamic, tag="mask union (bitset)"))
        coll.append(Collective("intra", "broadcast", flags, count=dynamic, tag="global mask to workers"))
    compact = []
    for p in spec.params:
        if p.name in names:
            ko, ki = kept[p.name]
            compact.append(ko * ki * math.prod(p.shape[2:]))
        else:
            compact.append(p.numel)
    for i, b in enumerate(bucket_bytes(compact + buffers, 4, int(opts.bucket_mb * 1e6))):
        b = b * opts.wire_bytes // 4  # fp32 buckets, cast for the wire (`prunex.comm.wire`)
        if opts.inter_exchange == "sharded":  # 1/P of the (padded) bucket per rank, P groups at once
            part = -(-b // (opts.wire_bytes * opts.procs_per_node)) * opts.wire_bytes
            coll.append(Collective("shard", "allreduce", part, tag=f"compact z+v shard of bucket {i}"))
            coll.append(Collective("intra", "allgather", part, tag=f"compact z shards of bucket {i}"))
            continue
        coll.append(Collective("inter", "allreduce", b, tag=f"compact z+v bucket {i}"))
        coll.append(Collective("intra", "broadcast", b, tag=f"compact z bucket {i}"))
    table = 4 * HSADMM_RESIDUAL_COLUMNS * len(spec.params)  # `HSADMM.total`
    coll.append(Collective("intra", "allreduce", table, tag="residuals in the node"))
    coll.append(Collective("inter", "allreduce", table, tag="residuals across nodes"))
    coll.append(Collective("intra", "broadcast", table, tag="residuals to workers"))
    full_c = sum(p.numel for p in constrained)
    comp_c = sum(c for p, c in zip(spec.params, compact, strict=True) if p.name in names)
    other = spec.numel - full_c
    # constrained: c = z_i + v (12 B/elem) and zero-fill on recovery (4 B/elem), gather and scatter of the
    # compact entries (2 x 8 B); other tensors: c = z_i + v into the bucket and the copy back (16 B/elem)
    compress = 16.0 * full_c + 16.0 * comp_c + 16.0 * other
    steps = opts.local_epochs * math.ceil(shard / opts.batch_size)
    vector = spec.numel * (opts.admm_update_passes * 4.0 + 12.0 + steps * opts.prox_bytes_per_param)
    return Workload(
        "hsadmm",
        tuple(coll),
        opts.local_epochs * shard,
        steps,
        vector,
        compress,
        4.0 * len(constrained),
        notes={"compact_fraction": comp_c / full_c if full_c else 1.0},
    )


def flat_admm_workload(spec: ModelSpec, opts: Options, shard: int) -> Workload:
    """One outer flat consensus ADMM iteration (PruneX (AR), `prunex.admm.flat`)."""
    dense = [p.numel for p in spec.params] + (list(spec.buffers) if opts.average_bn_stats else [])
    coll = [Collective("flat", "barrier", 1, tag="wait for every rank")]
    coll += [
        Collective("flat", "allreduce", b, tag=f"theta+u bucket {i}")
        for i, b in enumerate(bucket_bytes(dense, 4, int(opts.bucket_mb * 1e6)))
    ]
    coll.append(Collective("flat", "allreduce", 8 * FLAT_ADMM_RESIDUAL_COLUMNS * len(spec.params), tag="residuals"))
    steps = opts.local_epochs * math.ceil(shard / opts.batch_size)
    vector = spec.numel * (opts.admm_update_passes * 4.0 + 12.0 + steps * opts.prox_bytes_per_param)
    return Workload("flat_admm", tuple(coll), opts.local_epochs * shard, steps, vector)


def ddp_workload(spec: ModelSpec, opts: Options) -> Workload:
    """One DDP step: flat AllReduce per gradient bucket."""
    # From its second iteration on, DDP buckets the gradients in the order they become ready, i.e. the parameters
    # in reverse definition order (the Reducer's rebuild after the first backward pass), closing a bucket at the
    # cap; so the plan is `ddp_bucket_sizes` of the reversed parameters, in launch order. Its last bucket, which
    # holds the first layers (their gradients are ready last) and cannot overlap the backward pass, is the
    # remainder `buckets[-1]` (checked against torch's buckets: tests/test_perfmodel.py).
    # The buckets hold the float32 gradients whatever goes on the wire: `--grad-dtype bf16|fp16`'s hook casts each
    # bucket as it is reduced, so it sends as many buckets of half the bytes.
    grads = [4 * p.numel for p in reversed(spec.params)]
    buckets = [b * opts.ddp_grad_bytes // 4 for b in ddp_bucket_sizes(grads, int(opts.ddp_bucket_mb * 2**20))]
    coll = tuple(Collective("flat", "allreduce", b, tag=f"DDP bucket {i}") for i, b in enumerate(buckets))
    return Workload("ddp", coll, opts.batch_size, 1, overlap_last_bytes=buckets[-1] if buckets else 0.0)


def topk_workload(spec: ModelSpec, opts: Options, world: int) -> Workload:
    """One Top-K step: AllGather of values and indices, AllReduce of the 1-D gradients; selection and
    scatter as memory-bound compress/decompress (module docstring)."""
    sparse = [p.numel for p in spec.params if len(p.shape) > 1]
    dense = sum(p.numel for p in spec.params if len(p.shape) <= 1)
    k = sum(topk_count(n, opts.topk_ratio) for n in sparse)
    coll = [
        Collective("flat", "allgather", 4 * k, tag="values (fp32)"),
        Collective("flat", "allgather", 4 * k, tag="indices (int32)"),
    ]
    if dense:
        coll.append(Collective("flat", "allreduce", _float_bytes(dense), tag="1-D gradients"))
    n = sum(sparse)
    select = (12.0 + 4.0 * opts.topk_passes + 8.0) * n  # g + residual; radix-select reads; residual clone
    scatter = 20.0 * n + opts.random_access_bytes * world * k  # zero, divide, copy to grad; index_add
    launches = 8 * len(sparse) + world + 3 + len(sparse)
    return Workload(
        "topk",
        tuple(coll),
        opts.batch_size,
        1,
        compress_bytes=select + scatter,
        compress_launches=launches,
        notes={"k": k},
    )


def pactrain_workload(spec: ModelSpec, opts: Options) -> Workload:
    """One PacTrain step at density d: flat AllReduce of the packed gradients; pack/unpack/mask as compress."""
    pruned = [p.numel for p in spec.params if len(p.shape) > 1]
    dense = sum(p.numel for p in spec.params if len(p.shape) <= 1)
    kept = sum(keep_count(n, opts.density) for n in pruned)
    coll = (Collective("flat", "allreduce", _float_bytes(kept + dense), tag="packed gradients"),)
    n = sum(pruned)
    d = opts.density
    mem = (23.0 + 8.0 * d) * n  # pack (read grad + mask, write kept), unpack (zero, scatter), re-mask weights
    return Workload("pactrain", coll, opts.batch_size, 1, compress_bytes=mem, compress_launches=5 * len(pruned))


def _hsadmm(spec: ModelSpec, opts: Options, world: int, shard: int, kept: Kept | None, dynamic: float | None):
    if kept is None:
        kept = kept_from_keep(spec, opts.filter_keep, opts.channel_keep, opts.layers)
    return hsadmm_workload(spec, kept, opts, shard, opts.dynamic_fraction if dynamic is None else dynamic)


# The workload builders the method registry (`prunex.methods.registry`, ``MethodInfo.workload``) names:
# (spec, opts, world size, shard, kept groups or None, dynamic fraction or None) -> Workload.
WORKLOADS: dict[str, Callable[[ModelSpec, Options, int, int, Kept | None, float | None], Workload]] = {
    "hsadmm": _hsadmm,
    "flat_admm": lambda spec, opts, world, shard, kept, dynamic: flat_admm_workload(spec, opts, shard),
    "ddp": lambda spec, opts, world, shard, kept, dynamic: ddp_workload(spec, opts),
    "topk": lambda spec, opts, world, shard, kept, dynamic: topk_workload(spec, opts, world),
    "pactrain": lambda spec, opts, world, shard, kept, dynamic: pactrain_workload(spec, opts),
}


def workload_builder(method: str) -> Callable[..., Workload]:
    """The builder of `WORKLOADS` that ``method``'s registry entry names. ValueError for a method that is not
    registered, or names a workload the model does not know (a registered method of your own can name anything,
    docs/methods-of-your-own.md)."""
    name = method_info(method).workload
    if name not in WORKLOADS:
        raise ValueError(f"{method} names the workload {name!r}; known: {', '.join(WORKLOADS)}")
    return WORKLOADS[name]


def method_workload(
    method: str,
    spec: ModelSpec,
    opts: Options,
    world: int,
    shard: int,
    kept: Kept | None = None,
    dynamic: float | None = None,
) -> Workload:
    """The :class:`Workload` of one iteration of ``method`` (``shard``: training samples per rank), by
    the builder its registry entry names. ``kept``/``dynamic`` (H-SADMM): the kept groups (default: from
    the keep rates) and the share of iterations with a dynamic mask (default: ``opts.dynamic_fraction``)."""
    work = workload_builder(method)(spec, opts, world, shard, kept, dynamic)
    return replace(work, method=method)  # a method may share another's workload (prune_finetune: DDP's)


# ------------------------------------------------------------------------------------------ costing
def category(c: Collective) -> str:
    """The time column a collective counts in: mask_sync, broadcast, allgather, barrier or <level>_allreduce."""
    if c.op in ("mask_sync", "broadcast", "allgather", "barrier"):
        return f"{c.op}_s"
    return "inter_allreduce_s" if c.level == "shard" else f"{c.level}_allreduce_s"  # the sharded exchange


@dataclass(frozen=True)
class IterationCost:
    """Seconds and bytes of one iteration (per rank; bytes are job totals, as in steps.parquet)."""

    method: str
    nodes: int
    procs_per_node: int
    samples: float
    steps: float
    compute_s: float
    intra_allreduce_s: float
    inter_allreduce_s: float
    flat_allreduce_s: float
    broadcast_s: float
    allgather_s: float
    mask_sync_s: float
    barrier_s: float
    compress_s: float
    hidden_s: float  # communication hidden behind the backward pass (DDP)
    inter_bytes: float
    intra_bytes: float
    calls: float

    @property
    def comm_s(self) -> float:
        """All communication seconds (what `comm_s` logs: hidden or not)."""
        return sum(getattr(self, c) for c in COMM_COLUMNS)

    @property
    def iter_s(self) -> float:
        return self.compute_s + self.compress_s + self.comm_s - self.hidden_s

    def as_dict(self) -> dict[str, float | str | int]:
        d = dict(self.__dict__)
        d["comm_s"], d["iter_s"] = self.comm_s, self.iter_s
        return d


def iteration_cost(
    w: Workload, nodes: int, procs_per_node: int, net: Network, device: Device, opts: Options | None = None
) -> IterationCost:
    """Price a :class:`Workload` (module docstring): compute = samples c + vector bytes / memory bw;
    communication = sum of `formulas.time_of` per collective; compress = bytes / memory bw + launches
    x launch latency; DDP's hidden share ``min(comm - t(last bucket), overlap * backward_fraction *
    compute)``."""
    opts = opts or Options()
    times = dict.fromkeys(COMM_COLUMNS, 0.0)
    inter = intra = calls = 0.0
    for c in w.collectives:
        times[category(c)] += time_of(c, nodes, procs_per_node, net)
        i, a = ring_bytes(c.level, c.op, c.nbytes, nodes, procs_per_node)
        inter, intra, calls = inter + c.count * i, intra + c.count * a, calls + c.count
    compute = w.samples * device.compute_s_per_sample + w.vector_bytes / device.mem_bw
    compress = w.compress_bytes / device.mem_bw + w.compress_launches * device.launch_s
    hidden = 0.0
    if w.method == "ddp" and opts.ddp_overlap > 0:
        comm = sum(times.values())
        last = time_of(Collective("flat", "allreduce", w.overlap_last_bytes), nodes, procs_per_node, net)
        hidden = max(0.0, min(comm - last, opts.ddp_overlap * opts.backward_fraction * compute))
    return IterationCost(
        w.method,
        nodes,
        procs_per_node,
        w.samples,
        w.steps,
        compute,
        times["intra_allreduce_s"],
        times["inter_allreduce_s"],
        times["flat_allreduce_s"],
        times["broadcast_s"],
        times["allgather_s"],
        times["mask_sync_s"],
        times["barrier_s"],
        compress,
        hidden,
        inter,
        intra,
        calls,
    )


def epoch_cost(
    method: str,
    spec: ModelSpec,
    nodes: int,
    procs_per_node: int,
    net: Network,
    device: Device,
    opts: Options,
    dataset_size: int,
    kept: Kept | None = None,
) -> dict[str, float]:
    """Seconds per epoch of a strong-scaling point (fixed dataset, per-GPU batch fixed).

    Each rank holds ``shard = floor(D / N)`` samples (DistributedSampler, drop_last) in
    ``ceil(shard / b)`` steps. SGD methods: ``shard c + steps (iteration overheads)``; ADMM methods:
    the run's epochs, K outer iterations T(E) of E local epochs + consensus and R masked-retraining
    iterations T(1) of one (``opts.iterations``, ``opts.retrain_epochs``), ``(K T(E) + R T(1)) / (K E + R)``,
    i.e. T(E) / E without retraining. H-SADMM's iterations mix the dynamic-mask and frozen-mask
    iterations with weight ``opts.dynamic_fraction`` (the share over all K + R iterations, so the mix
    gives the run's number of mask syncs).
    """
    world = nodes * procs_per_node
    shard = dataset_size // world
    if shard < 1:
        raise ValueError(f"{dataset_size} samples do not fill {world} ranks")
    steps = math.ceil(shard / opts.batch_size)
    w = method_workload(method, spec, replace(opts, batch_size=min(opts.batch_size, shard)), world, shard, kept)
    cost = iteration_cost(w, nodes, procs_per_node, net, device, opts)
    outer = method_info(method).outer_iterations  # an outer ADMM iteration of E local epochs
    if outer and opts.retrain_epochs:
        n_outer, n_retrain = opts.iterations, opts.retrain_epochs
        one = replace(opts, batch_size=min(opts.batch_size, shard), local_epochs=1)
        retrain = iteration_cost(
            method_workload(method, spec, one, world, shard, kept), nodes, procs_per_node, net, device, opts
        ).as_dict()
        scale = 1.0 / (n_outer * opts.local_epochs + n_retrain)
        per = {
            c: n_outer * v + n_retrain * retrain[c] for c, v in cost.as_dict().items() if c.endswith(("_s", "_bytes"))
        }
    elif outer:
        scale, per = 1.0 / opts.local_epochs, cost.as_dict()
    else:  # per step: compute by samples, everything else per step
        scale, per = float(steps), cost.as_dict()
        per["compute_s"] = shard * device.compute_s_per_sample / steps
    out = {k: float(v) * scale for k, v in per.items() if k.endswith("_s") or k.endswith("_bytes")}
    out["epoch_s"] = (
        out.pop("iter_s") if outer else (out["compute_s"] + out["compress_s"] + out["comm_s"] - out["hidden_s"])
    )
    out.update(
        gpus=world,
        nodes=nodes,
        procs_per_node=procs_per_node,
        shard=shard,
        steps_per_epoch=steps,
        iteration_s=cost.iter_s,
        iteration_comm_s=cost.comm_s,
    )
    return out
