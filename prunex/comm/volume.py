"""Estimated bytes each collective puts on intra-node and inter-node links, for one rank of a job.

The model is the ring model of `prunex.comm.cost` (the one definition the performance model uses
too): every collective is a ring over its group's members in rank order, a member sends
2 (g-1)/g n (allreduce, mask_sync, barrier), (g-1) n (allgather) or n (broadcast, except the chain's
last member) to its successor, and a send crosses a node boundary when the successor lives on
another node. Ranks are placed blockwise, so:

- `intra` groups never cross;
- `inter` groups (one leader per node) cross on every hop when M > 1: each leader sends
  2 (M-1)/M * n per allreduce, which is what a node's link carries (a 100 MB allreduce of two
  leaders puts 100 MB on each link);
- the `flat` group crosses on the M hops from the last rank of a node to the first rank of the
  next, so a flat allreduce puts 2 (N-1)/N * n on each node's link, N = M*P.

Known gap: gloo broadcasts with a binomial tree, not a chain, so a *flat* broadcast across nodes
can cross more than once (measured on the mini cluster: DDP's initial broadcast over 2 x 2 put 2n
on node 0's link where the chain counts n); NCCL uses a ring/chain as modelled. Framing adds
~0.2-0.5% to large messages and ~1-2 KB to every small collective (measured on the mini cluster).

`wire_bytes` returns this rank's share; summing over the ranks of a job gives the job's total,
and the share of a node's ranks is what that node's network interface transmits.
"""

from __future__ import annotations

from prunex.comm import cost as commcost
from prunex.training.topology import Topology


def group_members(topo: Topology, level: str, rank: int | None = None) -> list[int]:
    """Global ranks of the `level` group that `rank` (default: this rank) belongs to."""
    rank = topo.rank if rank is None else rank
    return commcost.group_ranks(level, topo.nodes, topo.procs_per_node, rank)


def wire_bytes(
    topo: Topology, level: str, op: str, nbytes: int, root: int = 0, rank: int | None = None
) -> tuple[float, float]:
    """(inter_bytes, intra_bytes) that `rank` (default: this process) sends for one collective.

    Args:
        topo: the job's topology.
        level: "intra", "inter" or "flat".
        op: "allreduce", "broadcast", "allgather", "mask_sync" or "barrier".
        nbytes: payload per member (the tensor each member passes in).
        root: global rank of the broadcast root.
        rank: the sending rank.
    """
    rank = topo.rank if rank is None else rank
    return commcost.wire_bytes(level, op, nbytes, topo.nodes, topo.procs_per_node, rank, root)
