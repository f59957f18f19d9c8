"""Physical shrinkage (eq. (15)) and zero-fill recovery (sec. 4.4.3), single process."""

from __future__ import annotations

import math

import pytest
import torch

from prunex.bench.shrink import resnet152_conv_shapes
from prunex.comm.shrink import ShrinkPlan, compress, decompress, shrink_plan
from prunex.pruning import GroupMask, project

METHODS = ["auto", "index_select", "flat"]


def _reference_compact(t: torch.Tensor, out_idx: torch.Tensor, in_idx: torch.Tensor) -> torch.Tensor:
    """t[K_out][:, K_in] written with explicit Python loops."""
    rows = [torch.stack([t[o, c] for c in in_idx.tolist()]) for o in out_idx.tolist()]
    return torch.stack(rows)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("shape", [(6, 5, 3, 3), (8, 4, 1, 1), (7, 3), (4, 6, 1, 3)])
def test_compress_values_and_shape(method: str, shape: tuple[int, ...]) -> None:
    gen = torch.Generator().manual_seed(0)
    t = torch.randn(shape, generator=gen)
    out_idx = torch.tensor([0, 2, 3])
    in_idx = torch.tensor([1, 2])
    c = compress(t, out_idx, in_idx, method=method)
    assert c.shape == (3, 2, *shape[2:]) and c.is_contiguous() and c.dtype == t.dtype
    assert torch.equal(c, _reference_compact(t, out_idx, in_idx))


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("shape", [(6, 5, 3, 3), (8, 4, 1, 1), (7, 3)])
def test_decompress_zero_fills_and_scatters(method: str, shape: tuple[int, ...]) -> None:
    out_idx = torch.tensor([1, 4])
    in_idx = torch.tensor([0, 2])
    c = torch.arange(1, 1 + 4 * math.prod(shape[2:]), dtype=torch.float64).view(2, 2, *shape[2:])
    z = decompress(c, out_idx, in_idx, shape, method=method)
    assert z.shape == shape and z.dtype == c.dtype
    expected = torch.zeros(shape, dtype=torch.float64)
    for p, o in enumerate(out_idx.tolist()):
        for q, ch in enumerate(in_idx.tolist()):
            expected[o, ch] = c[p, q]
    assert torch.equal(z, expected)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("shape", [(8, 6, 3, 3), (16, 12, 1, 1), (10, 7)])
def test_roundtrip_is_group_mask_restriction(method: str, shape: tuple[int, ...]) -> None:
    gen = torch.Generator().manual_seed(1)
    z = project(torch.randn(shape, generator=gen), filter_keep=0.5, channel_keep=0.5)
    gm = GroupMask.of_tensor(z)
    v = torch.randn(shape, generator=gen)  # dense dual: c = z + v is dense (sec. 4.4.1)
    c_full = z + v
    c = compress(c_full, gm.out_idx, gm.in_idx, method=method)
    assert c.shape == (gm.kept_out, gm.kept_in, *shape[2:])
    back = decompress(c, gm.out_idx, gm.in_idx, c_full.shape, method=method)
    assert torch.equal(back, gm.apply(c_full))
    # z itself lies on the mask: the round trip is lossless
    assert torch.equal(decompress(compress(z, gm.out_idx, gm.in_idx), gm.out_idx, gm.in_idx, z.shape), z)


@pytest.mark.parametrize("method", METHODS)
def test_out_buffers_are_reused(method: str) -> None:
    gen = torch.Generator().manual_seed(2)
    shape = (6, 4, 3, 3)
    out_idx, in_idx = torch.tensor([0, 3, 5]), torch.tensor([1, 3])
    cbuf = torch.empty(3, 2, 3, 3)
    zbuf = torch.full(shape, math.nan)  # stale content must not survive
    c_ptr, z_ptr = cbuf.data_ptr(), zbuf.data_ptr()
    for _ in range(2):
        t = torch.randn(shape, generator=gen)
        c = compress(t, out_idx, in_idx, out=cbuf, method=method)
        z = decompress(c, out_idx, in_idx, shape, out=zbuf, method=method)
        assert c is cbuf and z is zbuf
        assert cbuf.data_ptr() == c_ptr and zbuf.data_ptr() == z_ptr
        assert torch.equal(cbuf, _reference_compact(t, out_idx, in_idx))
        keep = torch.zeros(shape, dtype=torch.bool)
        keep[out_idx[:, None], in_idx] = True
        assert torch.equal(zbuf, torch.where(keep, t, torch.zeros(())))


def test_bad_buffers_and_shapes_raise() -> None:
    t = torch.randn(4, 4, 3, 3)
    o, i = torch.tensor([0, 1]), torch.tensor([2])
    with pytest.raises(ValueError, match="out buffer"):
        compress(t, o, i, out=torch.empty(2, 2, 3, 3))
    with pytest.raises(ValueError, match="out buffer"):
        compress(t, o, i, out=torch.empty(2, 1, 3, 3, dtype=torch.float64))
    with pytest.raises(ValueError, match="contiguous"):
        compress(t, o, i, out=torch.empty(3, 3, 2, 1).permute(2, 3, 0, 1))
    c = compress(t, o, i)
    with pytest.raises(ValueError, match="expected"):
        decompress(c, o, torch.tensor([1, 2]), t.shape)
    with pytest.raises(ValueError, match="out buffer"):
        decompress(c, o, i, t.shape, out=torch.empty(4, 4, 3, 2))
    with pytest.raises(ValueError, match="method"):
        compress(t, o, i, method="gather")
    with pytest.raises(ValueError, match="C_out x C_in"):
        compress(torch.ones(5), o, i)


def test_int32_indices_and_noncontiguous_input() -> None:
    t = torch.randn(5, 6, 3, 3).transpose(2, 3)  # not contiguous
    o, i = torch.tensor([1, 2], dtype=torch.int32), torch.tensor([0, 5], dtype=torch.int32)
    for method in METHODS:
        assert torch.equal(compress(t, o, i, method=method), _reference_compact(t, o.long(), i.long()))


def test_resnet152_shapes() -> None:
    shapes = resnet152_conv_shapes()
    assert len(shapes) == 155 and shapes[0] == (64, 3, 3, 3)
    assert sum(math.prod(s) for s in shapes) == 57_984_704


@pytest.mark.parametrize("shape", [(6, 5, 3, 3), (8, 4, 1, 1), (7, 3), (4, 6, 1, 3)])
def test_plan_is_bitwise_the_functions(shape: tuple[int, ...]) -> None:
    gen = torch.Generator().manual_seed(3)
    out_idx, in_idx = torch.tensor([0, 2, 3]), torch.tensor([1, 2])
    plan = ShrinkPlan(out_idx, in_idx, shape, torch.device("cpu"))
    cbuf, zbuf = torch.empty(plan.compact_shape), torch.full(shape, math.nan)
    for _ in range(2):  # buffers reused: stale content must not survive
        t = torch.randn(shape, generator=gen)
        c = plan.compress(t, out=cbuf)
        assert c is cbuf and torch.equal(c, compress(t, out_idx, in_idx))
        z = plan.decompress(c, out=zbuf)
        assert z is zbuf and torch.equal(z, decompress(c, out_idx, in_idx, shape))
    with pytest.raises(ValueError, match="plan is for shape"):
        plan.compress(torch.randn(9, 9))


def test_shrink_plan_is_made_once_per_mask() -> None:
    gm = GroupMask.of_tensor(project(torch.randn(8, 6, 3, 3), filter_keep=0.5, channel_keep=0.5))
    plan = shrink_plan(gm)
    assert shrink_plan(gm) is plan and plan.compact_shape == gm.compact_shape
    other = GroupMask.of_tensor(project(torch.randn(8, 6, 3, 3), filter_keep=0.5, channel_keep=0.5))
    assert shrink_plan(other) is not plan
