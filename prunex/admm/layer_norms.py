"""Per-layer sums of squares of one flat buffer: the norms of Alg. 1 line 28 on a GPU, in one launch.

A GPU round norms each per-parameter state from the flat buffer it lives in (`engine.flat_state`,
`engine.NormReader`), instead of one `_foreach_norm` output per layer (issue 27: a ResNet-152 round was
host-bound on those). `LayerSquares` sums, per layer, the squares of its consecutive piece of the buffer:

- with Triton (on a GPU; in tests on the CPU in Triton's interpreter): one program per block of `BLOCK`
  elements, blocks never straddling two layers; each writes its block's sum into its own cell of a
  zero-padded (layers x most blocks of a layer) table, whose row sums are the layers' sums
  (`Tensor.sum(1)`: no atomics, so the same bits every call). The buffer is read once.
- without: `torch.segment_reduce` of the squared buffer. On an H100 (CUB's segmented reduce, one
  thread block per layer) that took 0.52 ms per ResNet-152 column (233 MB) plus 0.15 ms for the
  squares, ~5 ms of device time per round for 8 columns (`benchmarks.gpu_round --profile`, 2026-11-27),
  which the round's one read of the norms then waits for.
"""

from __future__ import annotations

import os

import torch
from torch import Tensor

try:
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - CPU-only installs without triton: segment_reduce is used
    triton = None

BLOCK = 4096  # elements per program


if triton is not None:

    @triton.jit
    def _block_squares_kernel(x_ptr, start_ptr, end_ptr, cell_ptr, out_ptr, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        start = tl.load(start_ptr + pid)  # int64: the block's first element
        end = tl.load(end_ptr + pid)  # int64: its layer's end
        at = start + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + at, mask=at < end, other=0.0)
        tl.store(out_ptr + tl.load(cell_ptr + pid), tl.sum(v * v, axis=0))


class LayerSquares:
    """Per layer, the sum of the squares of its piece of a flat buffer (layers back to back, in order).

    Args:
        sizes: each layer's number of elements, in buffer order.
        device: where the buffers live.
        kernel: use the Triton kernel (default: where Triton is installed and ``device`` is a GPU, or
            Triton's interpreter is on, ``TRITON_INTERPRET=1``); else `torch.segment_reduce`.
    """

    def __init__(self, sizes: list[int], device: torch.device, kernel: bool | None = None) -> None:
        self.layers, self.numel, self.device = len(sizes), sum(sizes), device
        interpret = os.environ.get("TRITON_INTERPRET") == "1"
        self.kernel = triton is not None and (device.type == "cuda" or interpret) if kernel is None else kernel
        self.lengths = torch.tensor(sizes, dtype=torch.int64, device=device)
        counts = [-(-n // BLOCK) for n in sizes]
        self.width = max(counts, default=0) or 1  # the table's columns: the most blocks of one layer
        starts, ends, cells, offset = [], [], [], 0
        for layer, (n, blocks) in enumerate(zip(sizes, counts, strict=True)):
            for j in range(blocks):
                starts.append(offset + j * BLOCK)
                ends.append(offset + n)
                cells.append(layer * self.width + j)
            offset += n
        self.grid = len(starts)
        self.start, self.end, self.cell = (
            torch.tensor(v if v else [0], dtype=torch.int64, device=device) for v in (starts, ends, cells)
        )
        self._tables: dict[torch.dtype, Tensor] = {}  # per dtype: the zero-padded table of block sums

    def __call__(self, flat: Tensor) -> Tensor:
        """The layers' sums of squares of ``flat`` (1-D, `numel` elements), on its device, in its dtype."""
        if flat.dim() != 1 or flat.numel() != self.numel:
            raise ValueError(f"a flat buffer of {self.numel} elements, not of shape {tuple(flat.shape)}")
        if not self.kernel:
            return torch.segment_reduce(flat.square(), "sum", lengths=self.lengths, unsafe=True)
        table = self._tables.get(flat.dtype)
        if table is None:  # cells past a layer's last block stay 0: no fill per call
            table = self._tables[flat.dtype] = torch.zeros(
                self.layers * self.width, dtype=flat.dtype, device=flat.device
            )
        if self.grid:
            _block_squares_kernel[(self.grid,)](flat, self.start, self.end, self.cell, table, BLOCK=BLOCK)
        return table.view(self.layers, self.width).sum(1)
