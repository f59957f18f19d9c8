"""The communication cost model, defined once: what a collective sends and how long it takes.

Torch-free; imported by the instrumented collectives (`prunex.comm`: logged bytes, bucketing, the
alpha-beta link emulation), the methods (keep and top-k counts) and the analytic performance model
(`prunex.perfmodel`), so that what a run logs and what the model predicts cannot drift apart.

Notation: a group of ``p`` members, a payload of ``n`` bytes *per member* (the tensor each member
passes in, as logged in ``comm.parquet``). Ranks are placed blockwise on ``M`` nodes of ``P`` ranks
(node = rank // P); ``intra`` is a node's P ranks, ``inter`` the M node leaders (local rank 0),
``flat`` all N = M P ranks (paper sec. 4.1.1); ``shard`` the ranks of one local rank on every node
(M members, P such groups: the sharded inter-node exchange, `prunex.comm.wire`).

**Ring model** (Thakur, Rabenseifner & Gropp 2005, "Optimization of collective communication
operations in MPICH", IJHPCA 19(1); Patarasuk & Yuan 2009, "Bandwidth optimal all-reduce algorithms
for clusters of workstations", JPDC 69(2)): every collective is a ring over the group's members in
rank order, each member sending to its successor:

| op | bytes each member sends (`member_bytes`) | messages on the critical path (`ring_steps`) |
|---|---|---|
| allreduce, barrier | 2 (p-1)/p n (reduce-scatter + allgather) | 2 (p-1) |
| allgather, mask_sync | (p-1) n | p-1 |
| broadcast | n, except the chain's last member (the one before the root) | p-1 (chain), ceil(log2 p) (tree) |

A barrier is a 1-byte AllReduce (`prunex.comm.Comm.barrier`) and is counted as one everywhere; a
mask_sync is an AllGather of packed bitsets, ``n = ceil(flags / 8)`` (`prunex.comm.Comm.mask_sync`).

A send crosses a node boundary when the ring successor lives on another node: ``intra`` groups
never cross; ``inter`` groups cross on every hop when M > 1; the ``flat`` ring crosses on the M hops
from the last rank of a node to the first of the next (`wire_bytes`, `ring_bytes`). Known gap: gloo
broadcasts with a binomial tree, so a flat broadcast across nodes can cross more than once (measured
on the mini cluster: DDP's initial broadcast over 2 x 2 put 2n on node 0's link where the chain
counts n); NCCL uses the chain modelled here.

**Time** (Hockney 1994, "The communication challenge for MPP", Parallel Computing 20(3)): a link of
latency ``alpha`` seconds per message and bandwidth ``beta`` bytes per second; one collective costs
``ring_steps * alpha + bandwidth_bytes / beta`` (`collective_time`), ``bandwidth_bytes`` being what the
busiest member pushes through its link (NCCL-tests' *bus bandwidth* convention: ``beta`` is
comparable with the link rate whatever p is). The alpha-beta link emulation of `prunex.comm` sleeps
exactly this time (with the chain broadcast) after every collective that crosses a node, and the
performance model prices crossing collectives with the same function. `fit_alpha_beta` is the one
least-squares fit of alpha and beta to timings.

**Buckets** (sec. 4.4.2): `plan_buckets` lays tensors back to back into ~``bucket_bytes`` buffers
(what `prunex.comm.bucket.Bucketer` allocates); `ddp_bucket_sizes` is DDP's own assignment.

**Counts**: `keep_count` (groups a projection keeps, eq. (10)) and `topk_count` (entries Top-K sends).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

OPS = ("allreduce", "broadcast", "allgather", "mask_sync", "barrier")
ALLREDUCE_LIKE = ("allreduce", "barrier")  # a barrier is a 1-byte AllReduce (`Comm.barrier`)
ALLGATHER_LIKE = ("allgather", "mask_sync")  # the mask union all-gathers packed bitsets (`Comm.mask_sync`)
LEVELS = ("intra", "inter", "flat", "shard")
BROADCAST_ALGOS = ("tree", "ring")
FIT_WEIGHTINGS = ("scaled", "relative", "absolute")

# Absorbs float error in keep * n (e.g. 0.7 * 10 = 7.000000000000001 must keep 7, not 8).
_KEEP_EPS = 1e-9


def _check_op(op: str) -> None:
    if op not in OPS:
        raise ValueError(f"unknown op {op!r}; known: {', '.join(OPS)}")


# ----------------------------------------------------------------------------------------- groups
def group_size(level: str, nodes: int, procs_per_node: int) -> int:
    """Members of a ``level`` group: P (intra), M (inter), M P (flat)."""
    if level not in LEVELS:
        raise ValueError(f"unknown level {level!r}; known: {', '.join(LEVELS)}")
    return {"intra": procs_per_node, "inter": nodes, "flat": nodes * procs_per_node, "shard": nodes}[level]


def group_ranks(level: str, nodes: int, procs_per_node: int, rank: int) -> list[int]:
    """Global ranks of the ``level`` group that ``rank`` belongs to (blockwise placement)."""
    P = procs_per_node
    if level == "intra":
        node = rank // P
        return list(range(node * P, (node + 1) * P))
    if level == "inter":
        return [m * P for m in range(nodes)]
    if level == "flat":
        return list(range(nodes * P))
    if level == "shard":  # the ranks of this local rank on every node (sharded inter-node exchange)
        return [m * P + rank % P for m in range(nodes)]
    raise ValueError(f"unknown level {level!r}; known: {', '.join(LEVELS)}")


def crosses(level: str, nodes: int) -> bool:
    """Whether a group of ``level`` spans node boundaries (inter and flat groups when M > 1)."""
    return level != "intra" and nodes > 1


# ----------------------------------------------------------------------------------------- bytes
def ring_steps(op: str, p: int, broadcast_algo: str = "ring") -> int:
    """Messages on the critical path of one collective of ``p`` members (each costs one alpha):
    ``2 (p-1)`` (allreduce, barrier), ``p-1`` (allgather, mask_sync), ``p-1`` (chain broadcast) or
    ``ceil(log2 p)`` (tree broadcast). Thakur et al. 2005."""
    _check_op(op)
    if p <= 1:
        return 0
    if op in ALLREDUCE_LIKE:
        return 2 * (p - 1)
    if op == "broadcast" and broadcast_algo == "tree":
        return math.ceil(math.log2(p))
    return p - 1


def member_bytes(op: str, nbytes: float, p: int) -> float:
    """Bytes one member of a ring of ``p`` sends (module table; broadcast: a member that forwards)."""
    _check_op(op)
    if p <= 1:
        return 0.0
    if op in ALLREDUCE_LIKE:
        return 2.0 * (p - 1) / p * nbytes
    if op in ALLGATHER_LIKE:
        return float((p - 1) * nbytes)
    return float(nbytes)


def sent_bytes(op: str, nbytes: float, members: int, position: int, root_position: int = 0) -> float:
    """Bytes the member at ``position`` of a ring of ``members`` sends to its successor (the chain
    broadcast root -> root+1 -> ... ends at the member before the root, which sends nothing)."""
    if op == "broadcast" and members > 1 and position == (root_position - 1) % members:
        return 0.0
    return member_bytes(op, nbytes, members)


def bandwidth_bytes(op: str, nbytes: float, p: int, broadcast_algo: str = "ring") -> float:
    """Bytes the busiest member pushes through its link (the ``/ beta`` term's numerator):
    `member_bytes`, or ``ceil(log2 p) n`` for a binomial-tree broadcast (the root sends once per round)."""
    if op == "broadcast" and broadcast_algo == "tree" and p > 1:
        return math.ceil(math.log2(p)) * float(nbytes)
    return member_bytes(op, nbytes, p)


def wire_bytes(
    level: str, op: str, nbytes: float, nodes: int, procs_per_node: int, rank: int, root: int = 0
) -> tuple[float, float]:
    """(inter-node, intra-node) bytes that ``rank`` sends for one collective of its ``level`` group
    (``root``: global rank of the broadcast root)."""
    members = group_ranks(level, nodes, procs_per_node, rank)
    position = members.index(rank)
    root_position = members.index(root) if op == "broadcast" else 0
    sent = sent_bytes(op, nbytes, len(members), position, root_position)
    successor = members[(position + 1) % len(members)]
    if successor // procs_per_node != rank // procs_per_node:
        return sent, 0.0
    return 0.0, sent


def ring_bytes(level: str, op: str, nbytes: float, nodes: int, procs_per_node: int) -> tuple[float, float]:
    """(inter, intra) bytes the whole job sends for one collective of every ``level`` group, rooted at
    each group's lowest rank: the sum of `wire_bytes` over the job's ranks, in closed form. Senders:
    every member (broadcast: all but the chain's last); crossing members: none (intra), all M (inter,
    M > 1), the M node-last ranks (flat, M > 1; flat broadcast: M - 1, the chain ends before the root's node).
    """
    M = nodes
    g = group_size(level, M, procs_per_node)
    if g <= 1:
        return 0.0, 0.0
    per = member_bytes(op, nbytes, g)
    senders = g - 1 if op == "broadcast" else g
    total = {"intra": M, "shard": procs_per_node}.get(level, 1) * senders * per
    if not crosses(level, M):
        return 0.0, total
    if level in ("inter", "shard"):
        return total, 0.0
    crossing = M - 1 if op == "broadcast" else M
    return crossing * per, total - crossing * per


# ------------------------------------------------------------------------------------------ time
@dataclass(frozen=True)
class Link:
    """One level's link: ``alpha_s`` seconds per message (per ring step), ``beta`` bytes per second."""

    alpha_s: float
    beta: float

    def __post_init__(self) -> None:
        if not (self.alpha_s >= 0 and math.isfinite(self.alpha_s)):
            raise ValueError(f"alpha must be finite and >= 0, got {self.alpha_s}")
        if not self.beta > 0:
            raise ValueError(f"beta must be > 0 bytes/s, got {self.beta}")

    def message(self, nbytes: float) -> float:
        """Hockney: ``alpha + m / beta`` for one message of ``m`` bytes."""
        return self.alpha_s + nbytes / self.beta


def collective_time(op: str, nbytes: float, p: int, link: Link, broadcast_algo: str = "ring") -> float:
    """Seconds of one collective: ``ring_steps(op, p) * alpha + bandwidth_bytes(op, n, p) / beta``.

    E.g. ring AllReduce ``2(p-1) alpha + 2(p-1)/p n / beta``, AllGather ``(p-1) alpha + (p-1) n / beta``,
    tree Broadcast ``ceil(log2 p)(alpha + n/beta)``, chain Broadcast ``(p-1) alpha + n/beta``.
    """
    return ring_steps(op, p, broadcast_algo) * link.alpha_s + bandwidth_bytes(op, nbytes, p, broadcast_algo) / link.beta


@dataclass(frozen=True)
class AlphaBetaFit:
    """``t = call_latency_s + x / beta`` fitted to timings (``beta`` inf: no size dependence)."""

    call_latency_s: float
    beta: float
    r2: float  # in the fit's own weighting
    max_rel_err: float
    points: int


def fit_alpha_beta(x: Sequence[float], t: Sequence[float], weighting: str = "scaled") -> AlphaBetaFit:
    """Weighted least squares of ``t = A + x / beta`` with ``A >= 0`` and ``1/beta >= 0``.

    ``x`` is the bandwidth term of each timing (`bandwidth_bytes` of its size), ``A`` the per-call
    latency (``ring_steps * alpha``). Weights: ``scaled`` minimises sum((t - fit)^2 / t), ``relative``
    sum(((t - fit) / t)^2), ``absolute`` sum((t - fit)^2). A negative intercept is refitted through the
    origin; timings that do not grow with x give a constant (``beta = inf``). Raises ValueError on fewer
    than two distinct x, or non-positive or non-finite times.
    """
    import numpy as np

    if weighting not in FIT_WEIGHTINGS:
        raise ValueError(f"unknown fit weighting {weighting!r}; known: {', '.join(FIT_WEIGHTINGS)}")
    xs = np.asarray(x, dtype=float)
    ts = np.asarray(t, dtype=float)
    if len(xs) < 2 or len(xs) != len(ts) or len(set(xs.tolist())) < 2:
        raise ValueError("an alpha-beta fit needs timings at two or more distinct sizes")
    if np.any(ts <= 0) or not np.all(np.isfinite(ts)):
        raise ValueError("an alpha-beta fit needs positive, finite times")
    w = {"scaled": 1.0 / np.sqrt(ts), "relative": 1.0 / ts, "absolute": np.ones_like(ts)}[weighting]
    a_mat = np.stack([np.ones_like(xs), xs], axis=1) * w[:, None]
    intercept, inv_beta = np.linalg.lstsq(a_mat, ts * w, rcond=None)[0]
    if intercept < 0:  # the constraint is active: fit through the origin
        intercept = 0.0
        inv_beta = float(np.sum(w * w * xs * ts) / np.sum(w * w * xs * xs))
    if inv_beta <= 0:  # no size dependence at all: a constant
        inv_beta = 0.0
        intercept = float(np.sum(w * w * ts) / np.sum(w * w))
    pred = intercept + inv_beta * xs
    mean = np.sum(w * w * ts) / np.sum(w * w)  # weighted mean of t
    total = float(np.sum(((ts - mean) * w) ** 2))
    r2 = 1.0 - float(np.sum(((ts - pred) * w) ** 2)) / total if total > 0 else 1.0
    return AlphaBetaFit(
        float(intercept),
        float(1.0 / inv_beta) if inv_beta > 0 else math.inf,
        r2,
        float(np.max(np.abs(ts - pred) / ts)),
        len(xs),
    )


# --------------------------------------------------------------------------------------- buckets
@dataclass(frozen=True)
class Slot:
    """Where tensor i lives: bucket index, element offset, element count."""

    bucket: int
    offset: int
    numel: int


def plan_buckets(numels: Sequence[int], elem_bytes: int, bucket_bytes: int) -> tuple[list[Slot], list[int]]:
    """Tensors of ``numels`` elements in order into buckets of about ``bucket_bytes``: a new bucket when
    the next tensor would overflow a non-empty one (a tensor larger than a bucket gets its own).
    Returns (slots, elements per bucket)."""
    cap = max(1, bucket_bytes // elem_bytes)
    slots: list[Slot] = []
    sizes: list[int] = []
    for n in numels:
        n = int(n)
        if not sizes or (sizes[-1] > 0 and sizes[-1] + n > cap):
            sizes.append(0)
        slots.append(Slot(len(sizes) - 1, sizes[-1], n))
        sizes[-1] += n
    return slots, sizes


def bucket_bytes(numels: Sequence[int], elem_bytes: int, bucket_bytes: int) -> list[int]:
    """Bytes per bucket of `plan_buckets` (one collective per bucket)."""
    return [s * elem_bytes for s in plan_buckets(numels, elem_bytes, bucket_bytes)[1]]


def ddp_bucket_sizes(param_bytes: Iterable[int], cap_bytes: int) -> list[int]:
    """Bytes per DDP gradient bucket, the parameters taken in the order given, a bucket closed once it
    reaches ``cap_bytes`` (``torch.distributed._compute_bucket_assignment_by_size``). Give them in reverse
    definition order, the order their gradients become ready, in which DDP rebuilds its buckets after the
    first iteration: the sizes then are torch's, in launch order (checked against DDP's own buckets in
    tests/test_perfmodel.py); definition order gives other sizes. ``cap_bytes = bucket_cap_mb * 2**20``."""
    sizes: list[int] = []
    current = 0
    for b in param_bytes:
        current += int(b)
        if current >= cap_bytes:
            sizes.append(current)
            current = 0
    if current:
        sizes.append(current)
    return sizes


# ---------------------------------------------------------------------------------------- counts
def packed_bytes(flags: int) -> int:
    """Bytes of a bitset of ``flags`` 0/1 flags packed eight to a byte (`Comm.mask_sync`): ceil(flags / 8)."""
    return (int(flags) + 7) // 8


def check_keep(keep: float, what: str = "keep") -> None:
    """Refuse a keep rate outside (0, 1] (bools and NaN included)."""
    if not isinstance(keep, (int, float)) or isinstance(keep, bool) or not 0.0 < keep <= 1.0:
        raise ValueError(f"{what} must be a number in (0, 1], got {keep!r}")


def keep_count(n: int, keep: float) -> int:
    """Groups kept out of ``n`` at keep rate ``keep`` (eq. (10)): ``ceil(keep n)`` up to float error,
    clipped to ``[1, n]``. Raises ValueError for ``keep`` outside (0, 1] or ``n < 1``."""
    check_keep(keep)
    if n < 1:
        raise ValueError(f"number of groups must be >= 1, got {n}")
    return min(n, max(1, math.ceil(keep * n - _KEEP_EPS)))


def topk_count(numel: int, ratio: float) -> int:
    """Entries Top-K sends of a tensor of ``numel`` entries: ``max(1, ceil(ratio numel))``, at most numel."""
    return min(numel, max(1, math.ceil(ratio * numel)))
