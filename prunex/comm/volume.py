"""Estimated bytes each collective puts on intra-node and inter-node links.

The estimate models every collective as a ring over the group's members in rank order (the
algorithm NCCL and gloo use for large messages; Thakur et al. 2005, Patarasuk & Yuan 2009).
With g members and a payload of n bytes per member, each member sends to its ring successor:

| op                     | bytes each member sends         |
|------------------------|---------------------------------|
| allreduce, mask_sync, barrier | 2 (g-1)/g * n  (reduce-scatter + allgather; a barrier is a 1-byte allreduce) |
| allgather              | (g-1) * n                       |
| broadcast              | n, except the last member of the chain that starts at the root |

A send crosses a node boundary when the successor lives on another node. Known gap: gloo
broadcasts with a binomial tree, not a chain, so a *flat* broadcast across nodes can cross more
than once (measured on the mini cluster: DDP's initial broadcast over 2 x 2 put 2n on node 0's
link where the chain counts n); NCCL uses a ring/chain as modelled. Framing adds ~0.2-0.5% to
large messages and ~1-2 KB to every small collective (measured on the mini cluster). Ranks are placed
blockwise, so:

- `intra` groups never cross;
- `inter` groups (one leader per node) cross on every hop when M > 1: each leader sends
  2 (M-1)/M * n per allreduce, which is what a node's link carries (a 100 MB allreduce of two
  leaders puts 100 MB on each link);
- the `flat` group crosses on the M hops from the last rank of a node to the first rank of the
  next, so a flat allreduce puts 2 (N-1)/N * n on each node's link, N = M*P.

`wire_bytes` returns this rank's share; summing over the ranks of a job gives the job's total,
and the share of a node's ranks is what that node's network interface transmits.
"""

from __future__ import annotations

from prunex.topology import Topology

OPS = ("allreduce", "broadcast", "allgather", "mask_sync", "barrier")
LEVELS = ("intra", "inter", "flat")


def group_members(topo: Topology, level: str, rank: int | None = None) -> list[int]:
    """Global ranks of the `level` group that `rank` (default: this rank) belongs to."""
    rank = topo.rank if rank is None else rank
    if level == "intra":
        return topo.node_ranks(topo.node_of(rank))
    if level == "inter":
        return topo.leaders
    if level == "flat":
        return list(range(topo.world_size))
    raise ValueError(f"unknown level {level!r}; known: {', '.join(LEVELS)}")


def sent_bytes(op: str, nbytes: int, members: int, position: int, root_position: int = 0) -> float:
    """Bytes the member at `position` of a ring of `members` sends to its successor."""
    g = members
    if g <= 1:
        return 0.0
    if op in ("allreduce", "mask_sync", "barrier"):
        return 2.0 * (g - 1) / g * nbytes
    if op == "allgather":
        return float((g - 1) * nbytes)
    if op == "broadcast":
        last = (root_position - 1) % g  # the chain root -> root+1 -> ... ends before the root
        return 0.0 if position == last else float(nbytes)
    raise ValueError(f"unknown op {op!r}; known: {', '.join(OPS)}")


def wire_bytes(
    topo: Topology, level: str, op: str, nbytes: int, root: int = 0, rank: int | None = None
) -> tuple[float, float]:
    """(inter_bytes, intra_bytes) that `rank` sends for one collective.

    Args:
        topo: the job's topology.
        level: "intra", "inter" or "flat".
        op: "allreduce", "broadcast", "allgather" or "mask_sync".
        nbytes: payload per member (the tensor each member passes in).
        root: global rank of the broadcast root.
        rank: the sending rank (default: this process).
    """
    rank = topo.rank if rank is None else rank
    members = group_members(topo, level, rank)
    position = members.index(rank)
    root_position = members.index(root) if op == "broadcast" else 0
    sent = sent_bytes(op, nbytes, len(members), position, root_position)
    successor = members[(position + 1) % len(members)]
    crosses = topo.node_of(successor) != topo.node_of(rank)
    return (sent, 0.0) if crosses else (0.0, sent)
