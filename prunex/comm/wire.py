"""The compact inter-node buckets as they travel: fp32 (the paper's) or bf16/fp16, through the node
leaders (the paper's) or sharded over every rank of the node (issue 18).

`WireBuckets` runs the two collectives of eq. (15)'s exchange (Alg. 1 lines 21 and 25) on a
`Bucketer`'s buffers, bucket by bucket: the average over the nodes, then every rank of the node gets
the result.

Exchange ``leader``: the leaders AllReduce whole buckets, divided by M, and Broadcast them in the node.
Exchange ``sharded``: z_i + v_i is replicated on the node's P ranks, so each rank fills the buckets and
AllReduces only its 1/P of each (padded) bucket with the ranks of the same local rank on the other
nodes (P inter-node groups, ``shard`` level, at once), then the node AllGathers the shards. No
reduce-scatter is needed inside the node: the P ranks already hold the same values. Each node link
then carries 1/P of a leader's bytes per rank; with one NIC per GPU that is P links busy instead of
one. With M = 2 each entry is the same single sum as the leaders', so bitwise the same z
(`tests/test_exchange.py`); with M > 2 the backend may sum in another order (equal up to rounding).

- ``fp32``: the AllReduce(SUM) of the fp32 bucket, then / M (what the paper's exchange always did).
- ``bf16``/``fp16``: the bucket (or shard) is pre-scaled by 1/M in fp32 and cast into a wire buffer
  of the same layout, the AllReduce(SUM) runs in that type (both NCCL and gloo sum bf16/fp16;
  pre-scaling keeps fp16 clear of overflow), the Broadcast/AllGather in the node moves the wire
  buffer and every rank casts it back into the fp32 bucket, so the node's ranks hold bitwise the
  same z. Half the bytes of both collectives.

Error bound (unit roundoff u = 2^-8 for bf16, 2^-11 for fp16; standard recursive summation,
Higham 2002, eq. (4.4)): one rounding of each pre-scaled term, at most M - 1 roundings of the
partial sums and one of the result, so, per entry, ``|z_wire - z| <= (M + 1) u sum_i |c_i| / M``
to first order, ``c_i`` being leader i's compressed z_i + v_i (`tests/test_wire.py` checks it).

Example::

    PYTHONPATH=. python -m prunex.run --method hsadmm --nodes 2 --procs-per-node 2 --wire-dtype bf16
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from prunex.comm.bucket import Bucketer
from prunex.comm.collectives import Comm
from prunex.training.config import INTER_EXCHANGES, WIRE_DTYPES
from prunex.training.topology import Topology

__all__ = ["WIRE_TORCH_DTYPES", "WireBuckets"]

WIRE_TORCH_DTYPES = dict(zip(WIRE_DTYPES, (torch.float32, torch.bfloat16, torch.float16), strict=True))


class WireBuckets:
    """The exchange of the compact buckets (Alg. 1 lines 21 and 25) in the ``wire_dtype``.

    Args:
        wire_dtype: "fp32", "bf16" or "fp16".
        exchange: "leader" (the paper's: the leaders AllReduce whole buckets, then Broadcast in the
            node) or "sharded" (every rank AllReduces its 1/P of each bucket with its peers of equal
            local rank on the other nodes, the ``shard`` group, then the node AllGathers the shards;
            the buckets must be padded to a multiple of P, ``Bucketer(multiple=P)``).
    """

    def __init__(self, wire_dtype: str = "fp32", exchange: str = "leader") -> None:
        if wire_dtype not in WIRE_TORCH_DTYPES:
            raise ValueError(f"wire dtype must be one of {', '.join(WIRE_TORCH_DTYPES)}, got {wire_dtype!r}")
        if exchange not in INTER_EXCHANGES:
            raise ValueError(f"exchange must be one of {', '.join(INTER_EXCHANGES)}, got {exchange!r}")
        self.name, self.dtype, self.exchange = wire_dtype, WIRE_TORCH_DTYPES[wire_dtype], exchange
        self._wire: list[torch.Tensor] = []
        self._for: tuple[int, int] | None = None  # (id of the bucketer, its allocation count)

    @property
    def cast(self) -> bool:
        return self.name != "fp32"

    def starts_here(self, topo: Topology) -> bool:
        """Whether this rank fills buckets and takes part in the inter-node AllReduce."""
        return self.exchange == "sharded" or topo.is_leader

    def _buffers(self, buckets: Bucketer) -> list[torch.Tensor]:
        """Wire buffers with the buckets' layout, reallocated only when the buckets are."""
        key = (id(buckets), buckets.allocations)
        if key != self._for:
            self._wire = [torch.zeros(b.numel(), dtype=self.dtype, device=b.device) for b in buckets.buffers]
            self._for = key
        return self._wire

    def _mine(self, t: torch.Tensor, topo: Topology) -> torch.Tensor:
        """This rank's shard of a (padded) buffer in the sharded exchange, the whole buffer otherwise."""
        if self.exchange != "sharded":
            return t
        P = topo.procs_per_node
        if t.numel() % P:
            raise ValueError(f"a sharded exchange needs buckets padded to a multiple of P={P}, got {t.numel()}")
        size = t.numel() // P
        return t.narrow(0, topo.local_rank * size, size)

    def start_avg(self, buckets: Bucketer, b: int, comm: Comm) -> Callable[[], object]:
        """Launch Alg. 1 line 21 for bucket ``b``, the average over the nodes (call where `starts_here`),
        and return the ``wait`` that completes it: afterwards the average (of this rank's shard, when
        sharded) is in the bucket (fp32) or in its wire buffer (bf16/fp16)."""
        level = "shard" if self.exchange == "sharded" else "inter"
        mine = self._mine(buckets.buffers[b], comm.topo)
        if not self.cast:
            return comm.all_reduce_start(mine, level, "avg")
        wire = self._mine(self._buffers(buckets)[b], comm.topo)
        wire.copy_(mine.div_(comm.topo.nodes))  # pre-scale in fp32, then one rounding to the wire type
        return comm.all_reduce_start(wire, level, "sum")

    def finish_one(self, buckets: Bucketer, b: int, comm: Comm) -> None:
        """Alg. 1 line 25 for bucket ``b``: every rank of the node gets the whole averaged bucket (the
        leader's Broadcast, or the AllGather of the shards), cast back into the fp32 bucket."""
        buf = buckets.buffers[b]
        travel = self._buffers(buckets)[b] if self.cast else buf
        if self.exchange == "sharded":
            comm.all_gather_into(travel, self._mine(travel, comm.topo), "intra")
        else:
            comm.broadcast(travel, "intra")
        if self.cast:
            buf.copy_(travel)
