"""Packed bitsets of the mask union (`prunex.comm.bitset`), single process."""

from __future__ import annotations

import pytest
import torch

from prunex.comm.bitset import pack_bits, unpack_bits


@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 100])
def test_pack_unpack_round_trip_and_size(n: int) -> None:
    flags = (torch.rand(n, generator=torch.Generator().manual_seed(n)) < 0.5).to(torch.uint8)
    packed = pack_bits(flags)
    assert packed.dtype == torch.uint8 and packed.numel() == (n + 7) // 8
    assert torch.equal(unpack_bits(packed, n), flags)


def test_bit_order_and_or_of_packed_is_or_of_flags() -> None:
    a = torch.tensor([1, 0, 0, 0, 0, 0, 0, 0, 1], dtype=torch.uint8)
    b = torch.tensor([0, 1, 0, 0, 0, 0, 0, 1, 0], dtype=torch.uint8)
    assert pack_bits(a).tolist() == [1, 1] and pack_bits(b).tolist() == [130, 0]  # bit i % 8 of byte i // 8
    assert torch.equal(unpack_bits(pack_bits(a) | pack_bits(b), 9), torch.maximum(a, b))
    assert not torch.equal(unpack_bits(torch.maximum(pack_bits(a), pack_bits(b)), 9), torch.maximum(a, b))


def test_refuses_what_is_not_a_flag_vector() -> None:
    with pytest.raises(TypeError):
        pack_bits(torch.ones(3))
    with pytest.raises(ValueError):
        pack_bits(torch.tensor([0, 2], dtype=torch.uint8))
    with pytest.raises(ValueError):
        unpack_bits(torch.zeros(1, dtype=torch.uint8), 9)
