"""Pipelined inter-node buckets equal one bucket after another, bitwise, on 2 x 2 real gloo processes."""

from __future__ import annotations

import torch
from distributed import run_distributed

from prunex.admm.steps import inter_node_average
from prunex.comm import Comm
from prunex.comm.bucket import Bucketer
from prunex.comm.wire import WireBuckets
from prunex.pruning import GroupMask
from prunex.training.topology import build_groups, discover


def _exchange(rank: int, wire_dtype: str) -> dict:
    topo = discover(2, 2)
    comm = Comm(topo, build_groups(topo, 60), torch.device("cpu"))
    gen = torch.Generator().manual_seed(10 + topo.node)  # z_i and v_i are replicated in a node
    shapes = {"a": (16, 12, 3, 3), "b": (16,), "c": (32, 16, 1, 1), "d": (10, 32)}
    z_node = {n: torch.randn(s, generator=gen) for n, s in shapes.items()}
    v = {n: torch.randn(s, generator=gen) for n, s in shapes.items()}
    bn = {"bn.mean": torch.randn(16, generator=gen)}
    masks = {}
    for n in ("a", "c"):
        keep = torch.rand(shapes[n][:2], generator=torch.Generator().manual_seed(1)) < 0.5  # same everywhere
        masks[n] = GroupMask.from_support(keep[..., None, None].expand(shapes[n]).contiguous())
    out = {}
    for pipeline in (False, True):
        buckets = Bucketer(0.0005, torch.float32, torch.device("cpu"))  # 500-byte buckets: many stages
        z, buffers = inter_node_average(
            z_node, v, masks, bn, buckets, comm, wire=WireBuckets(wire_dtype), pipeline=pipeline
        )
        out[pipeline] = ({n: t.clone() for n, t in z.items()}, {n: t.clone() for n, t in buffers.items()})
        out[f"buckets_{pipeline}"] = len(buckets.buffers)
        out[f"records_{pipeline}"] = sorted((r["level"], r["op"], r["bytes"]) for r in comm.drain())
    return out


def test_pipelined_equals_sequential_bitwise() -> None:
    for wire_dtype in ("fp32", "bf16"):
        for r in run_distributed(_exchange, 4, wire_dtype):
            assert r["buckets_True"] > 2  # the pipeline has several stages
            (z_seq, buf_seq), (z_pipe, buf_pipe) = r[False], r[True]
            for n in z_seq:
                assert torch.equal(z_seq[n], z_pipe[n]), n
            assert torch.equal(buf_seq["bn.mean"], buf_pipe["bn.mean"])
            assert r["records_False"] == r["records_True"]  # the same collectives, only overlapped
