"""Bucketed collectives on coalesced buffers (paper sec. 4.4.2, after PyTorch DDP's bucketing).

Tensors are laid out back to back in flat buffers of about `bucket_bytes` each (a tensor larger
than a bucket gets a bucket of its own), and one collective runs per bucket, amortising the
per-call latency over large messages. A `Bucketer` keeps its buffers while the list of tensor
sizes stays the same: after mask freezing (sec. 4.5) the compact sizes no longer change, so the
buffers are allocated once and reused ("one-shot buffer allocation"). The layout is
`prunex.comm.cost.plan_buckets`, which the performance model prices.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from prunex.comm.collectives import Comm
from prunex.comm.cost import Slot, plan_buckets


class Bucketer:
    """Flat communication buffers for a list of tensors, reused while the sizes do not change.

    Args:
        bucket_mb: target bucket size in MB (1e6 bytes).
        dtype: element type of the buffers.
        device: where they live.
        multiple: pad every buffer to a multiple of this many elements (P for the sharded exchange).
    """

    def __init__(self, bucket_mb: float, dtype: torch.dtype, device: torch.device, multiple: int = 1) -> None:
        self.bucket_bytes = int(bucket_mb * 1e6)
        self.multiple = multiple  # buffers padded to a multiple of this many elements (equal shards)
        self.dtype, self.device = dtype, device
        self._key: tuple[int, ...] | None = None
        self.buffers: list[torch.Tensor] = []
        self.slots: list[Slot] = []
        self.allocations = 0  # how many times buffers were (re)allocated
        # per bucket, the exchange's one-gather plan and what it was made for (prunex.admm.steps._bucket_gather)
        self.gathers: dict[int, tuple] = {}
        self._views: tuple[tuple, list[torch.Tensor]] | None = None  # `shaped_views`, made once per layout
        # per bucket, the frozen masks' off-mask flags and what they were made for (`mask_frozen_in_buckets`)
        self.frozen_off: tuple | None = None

    def layout(self, numels: Sequence[int]) -> None:
        """Prepare buffers for tensors of these sizes (no allocation when they are unchanged)."""
        key = tuple(int(n) for n in numels)
        if key == self._key:
            return
        elem = torch.empty((), dtype=self.dtype).element_size()
        self.slots, sizes = plan_buckets(key, elem, self.bucket_bytes)
        m = self.multiple
        # padding (sharded exchange) is zero: a sum of zeros, never read back
        alloc = torch.zeros if m > 1 else torch.empty
        self.buffers = [alloc(-(-s // m) * m, dtype=self.dtype, device=self.device) for s in sizes]
        self._key = key
        self.allocations += 1
        self.gathers.clear()
        self.frozen_off = None

    @property
    def layout_key(self) -> tuple[int, ...] | None:
        """The tensor sizes the buffers are laid out for."""
        return self._key

    def view(self, i: int, shape: Sequence[int] | None = None) -> torch.Tensor:
        """The part of the buffers holding tensor `i`, optionally reshaped."""
        s = self.slots[i]
        flat = self.buffers[s.bucket].narrow(0, s.offset, s.numel)
        return flat.view(*shape) if shape is not None else flat

    def shaped_views(self, shapes: Sequence[Sequence[int]]) -> list[torch.Tensor]:
        """`view` of every tensor with its shape, made once while the layout and the shapes stay (a GPU
        round then spends no host time making hundreds of views)."""
        key = (self._key, tuple(tuple(s) for s in shapes))
        if self._views is None or self._views[0] != key:
            self._views = (key, [self.view(i, s) for i, s in enumerate(shapes)])
        return self._views[1]

    def pack(self, tensors: Sequence[torch.Tensor]) -> None:
        self.layout([t.numel() for t in tensors])
        for i, t in enumerate(tensors):
            self.view(i).copy_(t.reshape(-1))

    def all_reduce(self, comm: Comm, level: str, op: str = "sum") -> None:
        for buf in self.buffers:
            comm.all_reduce(buf, level, op)

    def broadcast(self, comm: Comm, level: str, src: int | None = None) -> None:
        for buf in self.buffers:
            comm.broadcast(buf, level, src)
