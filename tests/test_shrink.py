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


# --- the native compress kernel (prunex.comm.native) -------------------------------------------------


def _cpu_has_avx512f() -> bool:
    try:
        with open("/proc/cpuinfo") as f:
            return any(line.startswith("flags") and " avx512f" in line for line in f)
    except OSError:
        return False


def test_native_kernel_is_built_where_it_can_be() -> None:
    """On an x86-64 CPU with AVX-512F and a C compiler (CI's machine) the exchange must run the kernel,
    or every test below would pass on the torch path alone."""
    import platform
    import shutil

    from prunex.comm import native

    if platform.machine() != "x86_64" or not _cpu_has_avx512f() or shutil.which("cc") is None:
        pytest.skip(f"no kernel here: {native.unavailable_reason()}")
    assert native.available(), native.unavailable_reason()
    assert native.unavailable_reason() is None


def test_the_native_kernel_refuses_indices_it_would_pack_otherwise() -> None:
    """Review (2026-11-28): the kernel packs channels in ascending order and reads rows unchecked; unsorted or
    repeated channels packed otherwise than the torch path, and a filter index out of range read out of bounds."""
    from prunex.comm import native

    if not native.available():
        pytest.skip(f"no kernel here: {native.unavailable_reason()}")
    shape = (4, 3, 3, 3)
    ok = native.RowPacker(torch.tensor([0, 2]), torch.tensor([0, 2]), shape)
    assert ok is not None
    for out_idx, in_idx in (([0, 2], [2, 0]), ([0, 2], [1, 1]), ([0, 4], [0, 1]), ([-1, 2], [0, 1])):
        with pytest.raises(ValueError, match="ascending, unique and in"):
            native.RowPacker(torch.tensor(out_idx), torch.tensor(in_idx), shape)


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(torch.int32)


@pytest.mark.parametrize(
    "shape,k_out,k_in",
    [
        ((6, 5, 3, 3), 3, 2),  # 45-float rows: a tail block
        ((8, 4, 1, 1), 4, 1),
        ((7, 3), 7, 3),  # everything kept
        ((4, 6, 1, 3), 1, 6),
        ((33, 40, 3, 3), 17, 20),
        ((64, 520, 1, 1), 32, 261),  # 32 x 520 floats read: split over two threads
        ((128, 128, 3, 3), 64, 64),
        ((9, 17), 5, 0),  # nothing kept along C_in
    ],
)
@pytest.mark.parametrize("offset", [0, 1, 7])
def test_native_compress_is_bitwise_the_torch_path(shape: tuple[int, ...], k_out: int, k_in: int, offset: int) -> None:
    """Same bits as the torch path (NaN payloads, -0.0, inf), into a bucket view at an unaligned offset,
    with no write outside it, on one and two threads."""
    from prunex.comm import native

    if not native.available():
        pytest.skip(f"no kernel here: {native.unavailable_reason()}")
    gen = torch.Generator().manual_seed(sum(shape) + offset)
    out_idx = torch.randperm(shape[0], generator=gen)[:k_out].sort().values
    in_idx = torch.randperm(shape[1], generator=gen)[:k_in].sort().values
    t = torch.randn(shape, generator=gen)
    flat = t.view(-1)
    flat[::11] = -0.0
    flat[5::13] = math.inf
    flat.view(torch.int32)[3::17] = 0x7FC01234  # a NaN with a payload
    fast = ShrinkPlan(out_idx, in_idx, shape, torch.device("cpu"))
    slow = ShrinkPlan(out_idx, in_idx, shape, torch.device("cpu"), native=False)
    n = math.prod(fast.compact_shape)
    threads = torch.get_num_threads()
    try:
        for num_threads in (1, 2):
            torch.set_num_threads(num_threads)
            bucket = torch.full((offset + n + 19,), math.nan)
            bucket.view(torch.int32)[:] = 0x7F800001  # sentinel: a signalling NaN no copy produces
            sentinel = bucket.clone()
            view = bucket[offset : offset + n].view(fast.compact_shape)
            assert fast.compress(t, out=view) is view and fast._packer is not None
            assert torch.equal(_bits(view), _bits(slow.compress(t)))
            assert torch.equal(_bits(view), _bits(compress(t, out_idx, in_idx)))
            assert torch.equal(_bits(bucket[:offset]), _bits(sentinel[:offset]))
            assert torch.equal(_bits(bucket[offset + n :]), _bits(sentinel[offset + n :]))
    finally:
        torch.set_num_threads(threads)
    assert slow._packer is None


def test_native_kernel_is_skipped_for_what_it_does_not_handle() -> None:
    """float64, non-contiguous input: the torch path, same values."""
    t = torch.randn(6, 5, 3, 3, dtype=torch.float64)
    o, i = torch.tensor([0, 2, 3]), torch.tensor([1, 2])
    plan = ShrinkPlan(o, i, tuple(t.shape), torch.device("cpu"))
    assert torch.equal(plan.compress(t), compress(t, o, i)) and plan._packer is None
    s = torch.randn(6, 5, 3, 3).transpose(2, 3)
    assert torch.equal(plan.compress(s), compress(s, o, i)) and plan._packer is None


def test_native_kernel_says_why_it_is_not_used(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """Off switch, missing compiler, failing build: each is a one-line reason and the torch path."""
    from prunex.comm import native

    monkeypatch.setenv("PRUNEX_NATIVE_DIR", str(tmp_path))
    cases = [
        ({"PRUNEX_NATIVE_SHRINK": "0"}, "PRUNEX_NATIVE_SHRINK=0"),
        ({"CC": str(tmp_path / "no-such-cc")}, "no C compiler"),
        ({"CC": "false"}, "could not build"),
    ]
    t = torch.randn(6, 5, 3, 3)
    o, i = torch.tensor([0, 2, 3]), torch.tensor([1, 2])
    for env, reason in cases:
        monkeypatch.setattr(native, "_STATE", {})
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        if native.unavailable_reason() is not None and "x86-64" in native.unavailable_reason():
            pytest.skip("no kernel for this machine at all")
        assert not native.available() and reason in native.unavailable_reason()
        assert "\n" not in native.unavailable_reason()
        plan = ShrinkPlan(o, i, tuple(t.shape), torch.device("cpu"))
        assert torch.equal(plan.compress(t), compress(t, o, i)) and plan._packer is None
        for key in env:
            monkeypatch.delenv(key)
    assert not any(p.name.endswith(".so") for p in tmp_path.iterdir())  # no library from a failed build
