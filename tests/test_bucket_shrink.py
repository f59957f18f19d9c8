"""One gather per bucket (`BucketShrinkPlan`, the exchange's GPU path) gives the per-layer plans' bytes.

The GPU runs it (`prunex.admm.steps.inter_node_average`, ``one_gather``); here it runs on the CPU,
where the exchange otherwise keeps the per-layer plans, and must equal them bit for bit: alone, and in
the inter-node exchange on 2 x 2 real gloo processes (sequential and pipelined buckets, fp32 and bf16 on
the wire, buckets of one tensor and one bucket of all, the leaders' and the sharded exchange).
"""

from __future__ import annotations

import pytest
import torch
from distributed import run_distributed
from interpreted import run_in_triton_interpreter
from torch import Tensor

from prunex.admm.engine import flat_state
from prunex.admm.steps import inter_node_average
from prunex.comm import Comm
from prunex.comm.bucket import Bucketer
from prunex.comm.bucket_kernels import _launch_setting
from prunex.comm.shrink import BucketShrinkPlan, ShrinkPlan
from prunex.comm.wire import WireBuckets
from prunex.pruning import GroupMask
from prunex.training.topology import build_groups, discover

SHAPES = {"a": (16, 12, 3, 3), "b": (16,), "c": (32, 16, 1, 1), "d": (10, 32)}


def _masks(seed: int) -> dict[str, GroupMask]:
    out = {}
    for n in ("a", "c", "d"):
        shape = SHAPES[n]
        gen = torch.Generator().manual_seed(seed)  # the same on every rank
        keep = (torch.rand(shape[0], generator=gen) < 0.5)[:, None] & (torch.rand(shape[1], generator=gen) < 0.5)
        out[n] = GroupMask.from_support(keep.reshape(*shape[:2], *[1] * (len(shape) - 2)).expand(shape).contiguous())
    return out


def _layers(seed: int, shapes: dict[str, tuple[int, ...]]) -> tuple[dict[str, Tensor], dict[str, ShrinkPlan], list]:
    gen = torch.Generator().manual_seed(seed)
    full = {n: torch.randn(s, generator=gen) for n, s in shapes.items()}
    plans = {}
    for n, shape in shapes.items():
        if len(shape) > 1:
            o = torch.randperm(shape[0], generator=gen)[: max(1, shape[0] // 2)].sort().values
            i = torch.randperm(shape[1], generator=gen)[: max(1, shape[1] // 3)].sort().values
            plans[n] = ShrinkPlan(o, i, shape, torch.device("cpu"))
    return full, plans, [plans[n] if n in plans else shapes[n] for n in shapes]


def check_bucket_plan(kernels: bool) -> None:
    """The bucket plan (torch index ops, or the Triton kernels) packs and unpacks what the layer plans do;
    shapes of more than one kernel block, a dense tensor first, between and last."""
    shapes = {"bn0": (40,), "a": (64, 48, 3, 3), "b": (16,), "c": (96, 40, 1, 1), "d": (10, 96), "e": (3,)}
    full, plans, entries = _layers(0, shapes)
    bucket = BucketShrinkPlan(entries, torch.device("cpu"), kernels=kernels)
    assert (bucket.kernels is not None) == kernels
    stage = torch.empty(bucket.stage_numel)
    for view, n in zip(bucket.stage_views(stage), shapes, strict=True):
        view.copy_(full[n])
    packed = bucket.compress(stage, torch.full((bucket.numel,), float("nan")))
    expected = torch.cat([(plans[n].compress(full[n]) if n in plans else full[n]).reshape(-1) for n in shapes])
    assert torch.equal(packed, expected) and bucket.numel < bucket.stage_numel  # something was dropped
    plus = torch.randn(bucket.stage_numel, generator=torch.Generator().manual_seed(1))  # c = z + v, line 19
    summed = bucket.compress(stage, torch.full((bucket.numel,), float("nan")), plus=plus)
    added = {n: full[n] + view for n, view in zip(shapes, bucket.stage_views(plus), strict=True)}
    expected = torch.cat([(plans[n].compress(added[n]) if n in plans else added[n]).reshape(-1) for n in shapes])
    assert torch.equal(summed, expected)
    if kernels:  # the pack with blocks smaller than the plan's (`bucket_kernels.PACK_BLOCK`): tables of their own
        for extra, want in ((None, packed), (plus, summed)):
            got = bucket.kernels.pack(stage, torch.full((bucket.numel,), float("nan")), extra, block=64)
            assert torch.equal(got, want), extra is not None
    unpacked = bucket.stage_views(bucket.decompress(packed, out=torch.full((bucket.stage_numel,), float("nan"))))
    for n, t in zip(shapes, unpacked, strict=True):
        assert torch.equal(t, plans[n].decompress(plans[n].compress(full[n])) if n in plans else full[n]), n


def test_one_gather_packs_and_unpacks_what_the_layer_plans_do() -> None:
    check_bucket_plan(kernels=False)


def test_the_triton_kernels_pack_and_unpack_what_the_layer_plans_do() -> None:
    """The GPU kernels (`prunex.comm.bucket_kernels`), run on the CPU by Triton's interpreter."""
    run_in_triton_interpreter("test_bucket_shrink", "check_bucket_plan(kernels=True)")


def _exchange(rank: int, wire_dtype: str, bucket_mb: float, exchange: str, flat: bool = False) -> dict:
    topo = discover(2, 2)
    sharded = exchange == "sharded"
    comm = Comm(topo, build_groups(topo, 60, shards=sharded), torch.device("cpu"))
    gen = torch.Generator().manual_seed(10 + topo.node)  # z_i and v_i are replicated in a node
    z_node = {n: torch.randn(s, generator=gen) for n, s in SHAPES.items()}
    v = {n: torch.randn(s, generator=gen) for n, s in SHAPES.items()}
    if flat:  # the engine's layout: each state one flat buffer (the one-gather path packs straight from it)
        z_node, v = flat_state(z_node, copy=True), flat_state(v, copy=True)
    bn = {"bn.mean": torch.randn(16, generator=gen)}
    out: dict = {}
    for one_gather in (False, True):
        for pipeline in (False, True):
            buckets = Bucketer(bucket_mb, torch.float32, torch.device("cpu"), multiple=2 if sharded else 1)
            results = []
            for seed in (1, 1, 2):  # the same masks twice (the plan is kept), then new ones (made again)
                z, buffers = inter_node_average(
                    z_node,
                    v,
                    _masks(seed),
                    bn,
                    buckets,
                    comm,
                    wire=WireBuckets(wire_dtype, exchange),
                    pipeline=pipeline,
                    one_gather=one_gather,
                )
                results.append(({n: t.clone() for n, t in z.items()}, {n: t.clone() for n, t in buffers.items()}))
            out[one_gather, pipeline] = results
            out["buckets", bucket_mb] = len(buckets.buffers)
            # whether a one-gather plan copied z_i + v_i into a stage of its own (not when they are flat)
            out["staged", one_gather, pipeline] = any(g.stage is not None for _, _, g in buckets.gathers.values())
            comm.drain()
    out["packs"] = WireBuckets(wire_dtype, exchange).starts_here(topo)  # the leaders (sharded: every rank)
    return out


def test_the_exchange_with_one_gather_per_bucket_equals_the_layer_plans_bitwise() -> None:
    cases = [
        ("fp32", 0.0005, "leader", False),
        ("bf16", 0.0005, "leader", False),
        ("fp32", 1.0, "leader", False),
        ("bf16", 0.0005, "sharded", False),
        ("fp32", 0.0005, "leader", True),  # z_i and v in flat buffers, as the engine keeps them: packed in place
    ]
    for wire_dtype, bucket_mb, exchange, flat in cases:
        for r in run_distributed(_exchange, 4, wire_dtype, bucket_mb, exchange, flat):
            assert (r["buckets", bucket_mb] == 1) == (bucket_mb == 1.0)  # one bucket of all, or several
            if r["packs"]:
                assert r["staged", True, False] is not flat and r["staged", True, True] is not flat
            reference = r[False, False]
            for key in ((False, True), (True, False), (True, True)):
                for (z_ref, buf_ref), (z, buf) in zip(reference, r[key], strict=True):
                    for n in SHAPES:
                        assert torch.equal(z_ref[n], z[n]), (wire_dtype, bucket_mb, key, n)
                    assert torch.equal(buf_ref["bn.mean"], buf["bn.mean"])
            assert not torch.equal(reference[0][0]["a"], reference[2][0]["a"])  # other masks, other z


def test_the_pack_launch_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRUNEX_PACK_BLOCK", "2048")
    assert _launch_setting("PRUNEX_PACK_BLOCK", 1024, (1024, 2048)) == 2048
    monkeypatch.delenv("PRUNEX_PACK_BLOCK")
    assert _launch_setting("PRUNEX_PACK_BLOCK", 1024, (1024, 2048)) == 1024
    for bad in ("1000", "-1", "big"):  # not a power of two Triton can tile with, not a count
        monkeypatch.setenv("PRUNEX_PACK_BLOCK", bad)
        with pytest.raises(ValueError, match=f"PRUNEX_PACK_BLOCK='{bad}': expected one of 1024, 2048"):
            _launch_setting("PRUNEX_PACK_BLOCK", 1024, (1024, 2048))
