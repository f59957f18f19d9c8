"""Cost of one collective on a two-level cluster: Hockney's alpha-beta model on ring algorithms.

Notation: a group of ``p`` members, a payload of ``n`` bytes *per member* (the tensor each member
passes in, as logged in ``comm.parquet``), a link of per-message latency ``alpha`` (seconds per ring
step) and bandwidth ``beta`` (bytes per second). One message of ``m`` bytes costs
``alpha + m / beta`` (Hockney 1994, "The communication challenge for MPP: Intel Paragon and Meiko
CS-2", Parallel Computing 20(3)).

- allreduce, mask_sync, barrier (a 1-byte AllReduce): ``2 (p-1) alpha + 2 (p-1)/p * n / beta``, the
  ring's reduce-scatter then allgather (Thakur, Rabenseifner & Gropp 2005, "Optimization of
  collective communication operations in MPICH", IJHPCA 19(1); bandwidth-optimal: Patarasuk & Yuan
  2009, "Bandwidth optimal all-reduce algorithms for clusters of workstations", JPDC 69(2));
- allgather: ``(p-1) alpha + (p-1) * n / beta``, the ring allgather (Thakur et al. 2005), each
  member receiving the other (p-1) payloads of n bytes;
- broadcast, tree: ``ceil(log2 p) (alpha + n / beta)``, the binomial tree (Thakur et al. 2005; what
  gloo does);
- broadcast, ring: ``(p-1) alpha + n / beta``, the pipelined chain in the limit of many segments
  (Thakur et al. 2005; Patarasuk & Yuan 2009; NCCL's ring broadcast).

``beta`` is therefore the *bus bandwidth* of NCCL-tests (``doc/PERFORMANCE.md``): what one member
can push through its slowest link, comparable with the link rate whatever ``p`` is. The per-call
latency of a collective is ``steps * alpha`` with ``steps`` from :func:`ring_steps`.

Levels (paper sec. 4.1.1; `prunex.comm.volume`): ``intra`` is a node's ``P`` ranks on the intra-node
link; ``inter`` the ``M`` node leaders on the inter-node link; ``flat`` all ``N = M P`` ranks. A flat
ring spanning several nodes advances at the pace of its slowest hop, so it uses the *inter-node*
alpha and beta with ``p = N`` whenever ``M > 1`` (and the intra-node link when ``M == 1``).
Buckets: one collective, hence one latency term ``steps * alpha``, per bucket.

Emulated links (``Network.emulated``, the ``alpha-beta`` link model of
`prunex.comm.collectives.AlphaBetaLink`): all ranks share one machine and the real collective runs
over loopback; afterwards every member of a collective that crosses a node boundary sleeps
``steps * alpha + (bytes the busiest crossing member sends) / beta``. So a crossing collective
costs the loopback ring on the intra link (``p`` members) *plus* that delay with the inter link;
the delay equals the ring formula above except for broadcast (the chain's ``(p-1) alpha + n / beta``)
and the barrier (``(p-1) alpha``, `emulation_delay`).

Bytes: :func:`ring_bytes` gives the job-wide inter- and intra-node bytes of one collective in the
ring model of `prunex.comm.volume` (the sum over ranks of ``wire_bytes``, which is what
``steps.parquet`` logs as inter_bytes/intra_bytes).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

OPS = ("allreduce", "broadcast", "allgather", "mask_sync", "barrier")
ALLREDUCE_LIKE = ("allreduce", "mask_sync", "barrier")  # a barrier is a 1-byte AllReduce (`Comm.barrier`)
LEVELS = ("intra", "inter", "flat")
BROADCAST_ALGOS = ("tree", "ring")


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


@dataclass(frozen=True)
class Network:
    """Link parameters of a cluster's two levels.

    Args:
        intra: the intra-node link (NVLink; loopback when nodes are emulated on one machine).
        inter: the inter-node link (InfiniBand; the modelled link of the alpha-beta emulation).
        intra_broadcast, inter_broadcast: optional separate fits for broadcast (gloo's broadcast is a
            tree whose measured alpha and beta differ from its allreduce ring's); default: the level's link.
        flat: optional link for flat collectives that span nodes (e.g. fitted on the flat group);
            default: ``inter`` (the slowest hop sets the ring's pace).
        broadcast_algo: ``tree`` (gloo's binomial tree) or ``ring`` (NCCL's pipelined chain).
        emulated: nodes are emulated on one machine with the alpha-beta link model (module docstring).
        undelayed: (level, op) pairs that the emulation does not delay (e.g. DDP's hook traffic).
    """

    intra: Link
    inter: Link
    intra_broadcast: Link | None = None
    inter_broadcast: Link | None = None
    flat: Link | None = None
    broadcast_algo: str = "ring"
    emulated: bool = False
    undelayed: frozenset[tuple[str, str]] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        if self.broadcast_algo not in BROADCAST_ALGOS:
            raise ValueError(f"broadcast_algo must be one of {BROADCAST_ALGOS}, got {self.broadcast_algo!r}")

    def link(self, level: str, op: str, crossing: bool) -> Link:
        """The link a collective of ``op`` on ``level`` runs on (``crossing``: its group spans nodes)."""
        bcast = op == "broadcast"
        if not crossing:
            return (self.intra_broadcast or self.intra) if bcast else self.intra
        if level == "flat" and self.flat is not None:
            return self.flat
        return (self.inter_broadcast or self.inter) if bcast else self.inter


@dataclass(frozen=True)
class Collective:
    """One collective call of a method's iteration: ``nbytes`` per member on ``level``, ``count`` times."""

    level: str
    op: str
    nbytes: float
    count: float = 1.0
    tag: str = ""  # what it carries, for tables ("compact z bucket 1", "residual norms", ...)

    def __post_init__(self) -> None:
        if self.level not in LEVELS:
            raise ValueError(f"unknown level {self.level!r}; known: {', '.join(LEVELS)}")
        if self.op not in OPS:
            raise ValueError(f"unknown op {self.op!r}; known: {', '.join(OPS)}")


# -------------------------------------------------------------------------------------------- time
def ring_steps(op: str, p: int, broadcast_algo: str = "ring") -> int:
    """Messages on the critical path of one collective of ``p`` members (each costs one alpha).

    allreduce / mask_sync / barrier: ``2 (p-1)``; allgather: ``p-1``; broadcast: ``ceil(log2 p)`` (tree) or
    ``p-1`` (ring). Thakur, Rabenseifner & Gropp 2005.
    """
    if p <= 1:
        return 0
    if op in ALLREDUCE_LIKE:
        return 2 * (p - 1)
    if op == "allgather":
        return p - 1
    if op == "broadcast":
        return math.ceil(math.log2(p)) if broadcast_algo == "tree" else p - 1
    raise ValueError(f"unknown op {op!r}; known: {', '.join(OPS)}")


def bandwidth_bytes(op: str, nbytes: float, p: int, broadcast_algo: str = "ring") -> float:
    """Bytes the busiest member pushes through its link (the ``/ beta`` term's numerator).

    allreduce: ``2 (p-1)/p n`` (Patarasuk & Yuan 2009); allgather: ``(p-1) n``; broadcast: ``n``
    (ring) or ``ceil(log2 p) n`` (binomial tree: the root sends once per round; Thakur et al. 2005).
    """
    if p <= 1:
        return 0.0
    if op in ALLREDUCE_LIKE:
        return 2.0 * (p - 1) / p * nbytes
    if op == "allgather":
        return float((p - 1) * nbytes)
    if op == "broadcast":
        return math.ceil(math.log2(p)) * nbytes if broadcast_algo == "tree" else float(nbytes)
    raise ValueError(f"unknown op {op!r}; known: {', '.join(OPS)}")


def collective_time(op: str, nbytes: float, p: int, link: Link, broadcast_algo: str = "ring") -> float:
    """Seconds of one collective (module docstring table):
    ``ring_steps(op, p) * alpha + bandwidth_bytes(op, n, p) / beta``.

    E.g. ring allreduce ``2(p-1) alpha + 2(p-1)/p n / beta`` (Thakur et al. 2005; Patarasuk & Yuan
    2009), binomial-tree broadcast ``ceil(log2 p)(alpha + n/beta)``.
    """
    return ring_steps(op, p, broadcast_algo) * link.alpha_s + bandwidth_bytes(op, nbytes, p, broadcast_algo) / link.beta


def allreduce_time(nbytes: float, p: int, link: Link) -> float:
    """Ring AllReduce: ``2(p-1) alpha + 2(p-1)/p n / beta`` (Thakur et al. 2005; Patarasuk & Yuan 2009)."""
    return collective_time("allreduce", nbytes, p, link)


def allgather_time(nbytes: float, p: int, link: Link) -> float:
    """Ring AllGather of ``n`` bytes per member: ``(p-1) alpha + (p-1) n / beta`` (Thakur et al. 2005)."""
    return collective_time("allgather", nbytes, p, link)


def broadcast_time(nbytes: float, p: int, link: Link, algo: str = "ring") -> float:
    """Broadcast: tree ``ceil(log2 p)(alpha + n/beta)``, pipelined ring ``(p-1) alpha + n/beta``
    (Thakur et al. 2005)."""
    return collective_time("broadcast", nbytes, p, link, algo)


def emulation_delay(op: str, nbytes: float, p: int, link: Link) -> float:
    """Sleep of `prunex.comm.collectives.AlphaBetaLink` after a crossing collective:
    ``steps alpha + crossing / beta`` with steps ``2(p-1)`` (allreduce, mask_sync) or ``p-1`` (every
    other op, the 1-byte barrier included) and crossing the busiest crossing member's bytes
    (`prunex.comm.volume`): ``2(p-1)/p n`` (allreduce-like), ``(p-1) n`` (allgather), ``n`` (broadcast)."""
    if p <= 1:
        return 0.0
    steps = 2 * (p - 1) if op in ("allreduce", "mask_sync") else p - 1
    return steps * link.alpha_s + bandwidth_bytes(op, nbytes, p, "ring") / link.beta


def group_size(level: str, nodes: int, procs_per_node: int) -> int:
    """Members of a ``level`` group: P (intra), M (inter), M P (flat)."""
    return {"intra": procs_per_node, "inter": nodes, "flat": nodes * procs_per_node}[level]


def crosses(level: str, nodes: int) -> bool:
    """Whether a group of ``level`` spans node boundaries (inter and flat groups when M > 1)."""
    return level != "intra" and nodes > 1


def time_of(c: Collective, nodes: int, procs_per_node: int, net: Network) -> float:
    """Seconds of ``c.count`` calls of collective ``c`` on an ``nodes x procs_per_node`` job.

    Non-crossing groups use the intra link; crossing groups the inter link (or ``net.flat``), with
    ``p`` the group size (module docstring). With ``net.emulated`` a crossing collective costs the
    loopback ring on the intra link plus :func:`emulation_delay` on the inter link, unless
    ``(level, op)`` is in ``net.undelayed``.
    """
    p = group_size(c.level, nodes, procs_per_node)
    if p <= 1 or c.count == 0:
        return 0.0
    cross = crosses(c.level, nodes)
    if net.emulated and cross:
        local = collective_time(c.op, c.nbytes, p, net.link(c.level, c.op, False), net.broadcast_algo)
        delay = 0.0 if (c.level, c.op) in net.undelayed else emulation_delay(c.op, c.nbytes, p, net.inter)
        return c.count * (local + delay)
    return c.count * collective_time(c.op, c.nbytes, p, net.link(c.level, c.op, cross), net.broadcast_algo)


# ------------------------------------------------------------------------------------------- bytes
def ring_bytes(level: str, op: str, nbytes: float, nodes: int, procs_per_node: int) -> tuple[float, float]:
    """(inter, intra) bytes the whole job sends for one collective, in the ring model of
    `prunex.comm.volume` (ranks blockwise on nodes, a send crosses when the ring successor is on
    another node). Per member: ``2(g-1)/g n`` (allreduce, mask_sync, barrier), ``(g-1) n`` (allgather),
    ``n`` (broadcast, except the chain's last member). Crossing members: none (intra), all M (inter,
    M > 1), the M node-last ranks (flat, M > 1).
    """
    M, P = nodes, procs_per_node
    g = group_size(level, M, P)
    if g <= 1:
        return 0.0, 0.0
    if op in ALLREDUCE_LIKE:
        per, senders = 2.0 * (g - 1) / g * nbytes, g
    elif op == "allgather":
        per, senders = float((g - 1) * nbytes), g
    elif op == "broadcast":
        per, senders = float(nbytes), g - 1
    else:
        raise ValueError(f"unknown op {op!r}; known: {', '.join(OPS)}")
    groups = M if level == "intra" else 1
    total = groups * senders * per
    if not crosses(level, M):
        return 0.0, total
    if level == "inter":
        return total, 0.0
    crossing = M if op != "broadcast" else M - 1  # flat broadcast: the chain ends before the root's node
    return crossing * per, total - crossing * per


# ----------------------------------------------------------------------------------------- buckets
def bucket_sizes(numels: Sequence[int], elem_bytes: int, bucket_bytes: int) -> list[int]:
    """Bytes per bucket of `prunex.comm.bucket.plan_buckets`: tensors in order, a new bucket when the
    next tensor would overflow a non-empty one (a tensor larger than a bucket gets its own)."""
    cap = max(1, bucket_bytes // elem_bytes)
    sizes: list[int] = []
    for n in numels:
        if not sizes or (sizes[-1] > 0 and sizes[-1] + n > cap):
            sizes.append(0)
        sizes[-1] += int(n)
    return [s * elem_bytes for s in sizes]


def ddp_bucket_sizes(param_bytes: Iterable[int], cap_bytes: int) -> list[int]:
    """Bytes per DDP gradient bucket: parameters in definition order, a bucket is closed once it
    reaches ``cap_bytes`` (``torch.distributed._compute_bucket_assignment_by_size``); DDP launches them
    in reverse order, which does not change the sizes. ``cap_bytes = bucket_cap_mb * 2**20``."""
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
