"""The compact inter-node buckets as they travel: fp32 (the paper's), or bf16/fp16 (issue 18).

`WireBuckets` runs the two collectives of eq. (15)'s exchange (Alg. 1 lines 21 and 25) on a
`Bucketer`'s buffers: the leaders' AllReduce divided by M, then the Broadcast to the node.

- ``fp32``: exactly `Bucketer.all_reduce(..., "avg")` and `Bucketer.broadcast` (SUM, then / M).
- ``bf16``/``fp16``: each leader pre-scales its bucket by 1/M in fp32, casts it into a wire buffer
  of the same layout, the leaders AllReduce(SUM) the wire buffers in that type (both NCCL and gloo
  sum bf16/fp16; pre-scaling keeps fp16 clear of overflow), the leader broadcasts the wire buffer
  in its node and every rank casts it back into the fp32 bucket, so the node's ranks hold bitwise
  the same z. Half the bytes of both collectives.

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

__all__ = ["WIRE_TORCH_DTYPES", "WireBuckets"]

WIRE_TORCH_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


class WireBuckets:
    """AllReduce-average and node Broadcast of a `Bucketer`'s buffers in the ``wire_dtype``.

    Args:
        wire_dtype: "fp32", "bf16" or "fp16".
    """

    def __init__(self, wire_dtype: str = "fp32") -> None:
        if wire_dtype not in WIRE_TORCH_DTYPES:
            raise ValueError(f"wire dtype must be one of {', '.join(WIRE_TORCH_DTYPES)}, got {wire_dtype!r}")
        self.name, self.dtype = wire_dtype, WIRE_TORCH_DTYPES[wire_dtype]
        self._wire: list[torch.Tensor] = []
        self._for: tuple[int, int] | None = None  # (id of the bucketer, its allocation count)

    @property
    def cast(self) -> bool:
        return self.name != "fp32"

    def _buffers(self, buckets: Bucketer) -> list[torch.Tensor]:
        """Wire buffers with the buckets' layout, reallocated only when the buckets are."""
        key = (id(buckets), buckets.allocations)
        if key != self._for:
            self._wire = [torch.empty(b.numel(), dtype=self.dtype, device=b.device) for b in buckets.buffers]
            self._for = key
        return self._wire

    def start_avg(self, buckets: Bucketer, b: int, comm: Comm, level: str) -> Callable[[], object]:
        """Launch Alg. 1 line 21 for bucket ``b`` (the average over the ``level`` group, the leaders;
        call on its members only) and return the ``wait`` that completes it: afterwards the average is
        in the bucket (fp32) or in its wire buffer (bf16/fp16)."""
        buf = buckets.buffers[b]
        if not self.cast:
            return comm.all_reduce_start(buf, level, "avg")
        if level != "inter":
            raise ValueError(f"a cast wire exchange runs over the leaders (inter), got {level!r}")
        wire = self._buffers(buckets)[b]
        wire.copy_(buf.div_(len(comm.topo.leaders)))  # pre-scale in fp32, then one rounding to the wire type
        return comm.all_reduce_start(wire, level, "sum")

    def broadcast_one(self, buckets: Bucketer, b: int, comm: Comm, level: str) -> None:
        """Alg. 1 line 25 for bucket ``b``: the leader's buffer to its node, cast back into the fp32 bucket."""
        if not self.cast:
            comm.broadcast(buckets.buffers[b], level)
            return
        wire = self._buffers(buckets)[b]
        comm.broadcast(wire, level)
        buckets.buffers[b].copy_(wire)

    def all_reduce_avg(self, buckets: Bucketer, comm: Comm, level: str) -> None:
        """`start_avg` and its wait for every bucket, one after another."""
        for b in range(len(buckets.buffers)):
            self.start_avg(buckets, b, comm, level)()

    def broadcast(self, buckets: Bucketer, comm: Comm, level: str) -> None:
        """`broadcast_one` for every bucket."""
        for b in range(len(buckets.buffers)):
            self.broadcast_one(buckets, b, comm, level)
