"""Cost of one collective on a two-level cluster: the ring model of `prunex.comm.cost`, on links per level.

The formulas themselves (ring steps, bytes per member, Hockney's ``alpha + m / beta`` per message,
``collective_time = ring_steps * alpha + bandwidth_bytes / beta``, job-wide bytes per level) are
`prunex.comm.cost`'s, the module the instrumented collectives of `prunex.comm` log with; this module
adds what a cluster needs on top:

- allreduce, barrier (a 1-byte AllReduce): ``2 (p-1) alpha + 2 (p-1)/p * n / beta``, the
  ring's reduce-scatter then allgather (Thakur, Rabenseifner & Gropp 2005, "Optimization of
  collective communication operations in MPICH", IJHPCA 19(1); bandwidth-optimal: Patarasuk & Yuan
  2009, "Bandwidth optimal all-reduce algorithms for clusters of workstations", JPDC 69(2));
- allgather, mask_sync (an AllGather of packed bitsets): ``(p-1) alpha + (p-1) * n / beta``, the ring
  allgather (Thakur et al. 2005), each member receiving the other (p-1) payloads of n bytes;
- broadcast, tree: ``ceil(log2 p) (alpha + n / beta)``, the binomial tree (Thakur et al. 2005; what
  gloo does);
- broadcast, ring: ``(p-1) alpha + n / beta``, the pipelined chain in the limit of many segments
  (Thakur et al. 2005; Patarasuk & Yuan 2009; NCCL's ring broadcast).

Levels (paper sec. 4.1.1): ``intra`` is a node's ``P`` ranks on the intra-node link; ``inter`` the
``M`` node leaders on the inter-node link; ``flat`` all ``N = M P`` ranks. A flat ring spanning
several nodes advances at the pace of its slowest hop, so it uses the *inter-node* alpha and beta
with ``p = N`` whenever ``M > 1`` (and the intra-node link when ``M == 1``). Buckets: one
collective, hence one latency term ``steps * alpha``, per bucket.

Emulated links (``Network.emulated``, the ``alpha-beta`` link model of
`prunex.comm.collectives.AlphaBetaLink`): all ranks share one machine and the real collective runs
over loopback; afterwards every member of a collective that crosses a node boundary sleeps
`prunex.comm.cost.collective_time` of the collective on the modelled inter link (chain broadcast). So
a crossing collective costs the loopback ring on the intra link (``p`` members) *plus* that delay.

Bytes: `prunex.comm.cost.ring_bytes` gives the job-wide inter- and intra-node bytes of one collective
(the sum over ranks of what each logs, i.e. steps.parquet's inter_bytes/intra_bytes).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from prunex.comm.cost import (
    BROADCAST_ALGOS,
    LEVELS,
    OPS,
    Link,
    collective_time,
    crosses,
    group_size,
)

__all__ = [
    "Collective",
    "Link",
    "Network",
    "allgather_time",
    "allreduce_time",
    "broadcast_time",
    "time_of",
]


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
        inter_nics: NICs per node that ``inter``'s beta adds up (one per GPU on modern nodes; `link`).
    """

    intra: Link
    inter: Link
    intra_broadcast: Link | None = None
    inter_broadcast: Link | None = None
    flat: Link | None = None
    broadcast_algo: str = "ring"
    emulated: bool = False
    undelayed: frozenset[tuple[str, str]] = field(default_factory=frozenset)
    inter_nics: int = 1

    def __post_init__(self) -> None:
        if self.broadcast_algo not in BROADCAST_ALGOS:
            raise ValueError(f"broadcast_algo must be one of {BROADCAST_ALGOS}, got {self.broadcast_algo!r}")
        if self.inter_nics < 1:
            raise ValueError(f"inter_nics must be >= 1, got {self.inter_nics}")

    def link(self, level: str, op: str, crossing: bool, procs_per_node: int = 1) -> Link:
        """The link a collective of ``op`` on ``level`` runs on (``crossing``: its group spans nodes).

        With ``inter_nics`` > 1 the inter link's beta is the node's total over that many NICs, and a
        process drives the NIC next to its GPU (NCCL's default): a group of one process per node
        (``inter``, the leaders) gets beta / inter_nics; the P concurrent ``shard`` groups share the
        node's NICs, beta / max(P, inter_nics) each; the flat ring spreads its channels over all of them.
        """
        bcast = op == "broadcast"
        if not crossing:
            return (self.intra_broadcast or self.intra) if bcast else self.intra
        if level == "flat" and self.flat is not None:
            return self.flat
        link = (self.inter_broadcast or self.inter) if bcast else self.inter
        share = {"inter": self.inter_nics, "shard": max(procs_per_node, self.inter_nics)}.get(level, 1)
        return link if share == 1 else Link(link.alpha_s, link.beta / share)


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


def time_of(c: Collective, nodes: int, procs_per_node: int, net: Network) -> float:
    """Seconds of ``c.count`` calls of collective ``c`` on an ``nodes x procs_per_node`` job.

    Non-crossing groups use the intra link; crossing groups the inter link (or ``net.flat``), with
    ``p`` the group size (module docstring). With ``net.emulated`` a crossing collective costs the
    loopback ring on the intra link plus the alpha-beta emulation's delay, `collective_time` on the
    inter link with the chain broadcast (`prunex.comm.collectives.AlphaBetaLink`), unless ``(level, op)``
    is in ``net.undelayed``.
    """
    p = group_size(c.level, nodes, procs_per_node)
    if p <= 1 or c.count == 0:
        return 0.0
    cross = crosses(c.level, nodes)
    if net.emulated and cross:
        local = collective_time(c.op, c.nbytes, p, net.link(c.level, c.op, False), net.broadcast_algo)
        delay = 0.0 if (c.level, c.op) in net.undelayed else collective_time(c.op, c.nbytes, p, net.inter, "ring")
        return c.count * (local + delay)
    link = net.link(c.level, c.op, cross, procs_per_node)
    return c.count * collective_time(c.op, c.nbytes, p, link, net.broadcast_algo)
