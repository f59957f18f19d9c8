"""Packed bitsets: 0/1 flags, eight to a byte, for the mask union of eq. (14) (`Comm.mask_sync`).

Flag ``i`` lives in bit ``i % 8`` (least significant first) of byte ``i // 8``; the last byte is
zero-padded. Only element-wise integer ops are used (multiply-add to pack, shift-and to unpack,
``bitwise_or`` to unite), so the same code runs on CPU and CUDA tensors.

Example::

    PYTHONPATH=. python -c "import torch; from prunex.comm.bitset import pack_bits; \\
        print(pack_bits(torch.tensor([1, 0, 1, 1, 0, 0, 0, 0, 1], dtype=torch.uint8)))"
"""

from __future__ import annotations

import torch
from torch import Tensor

from prunex.comm.cost import packed_bytes

__all__ = ["pack_bits", "packed_bytes", "unpack_bits"]


def _weights(device: torch.device) -> Tensor:
    return torch.tensor([1, 2, 4, 8, 16, 32, 64, 128], dtype=torch.uint8, device=device)


def pack_bits(flags: Tensor) -> Tensor:
    """uint8 bytes of a 1-D uint8 tensor of 0/1 flags (``packed_bytes(len)`` of them).

    Raises:
        TypeError: unless ``flags`` is uint8.
        ValueError: unless it is 1-D with values in {0, 1}.
    """
    if flags.dtype != torch.uint8:
        raise TypeError(f"pack_bits takes uint8 flags, got {flags.dtype}")
    if flags.dim() != 1:
        raise ValueError(f"pack_bits takes a 1-D flag vector, got shape {tuple(flags.shape)}")
    if flags.numel() and int(flags.max()) > 1:
        raise ValueError("pack_bits takes flags in {0, 1}")
    padded = torch.zeros(packed_bytes(flags.numel()) * 8, dtype=torch.uint8, device=flags.device)
    padded[: flags.numel()] = flags
    # distinct powers of two never carry: the sum of 8 weighted flags is at most 255
    return (padded.view(-1, 8) * _weights(flags.device)).sum(dim=1, dtype=torch.uint8)


def unpack_bits(packed: Tensor, flags: int, out: Tensor | None = None) -> Tensor:
    """The first ``flags`` 0/1 flags of a packed bitset, as uint8 (written into ``out`` when given)."""
    if packed.dtype != torch.uint8 or packed.dim() != 1:
        raise ValueError(f"unpack_bits takes a 1-D uint8 bitset, got {packed.dtype} {tuple(packed.shape)}")
    if packed.numel() != packed_bytes(flags):
        raise ValueError(f"{flags} flags need {packed_bytes(flags)} bytes, got {packed.numel()}")
    bits = (packed[:, None].bitwise_and(_weights(packed.device)) != 0).to(torch.uint8).view(-1)[:flags]
    if out is None:
        return bits
    return out.copy_(bits)
