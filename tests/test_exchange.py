"""The sharded inter-node exchange equals the leaders' exchange bitwise, H-SADMM on 2 x 2 real gloo processes."""

from __future__ import annotations

import pytest
import torch
from distributed import run_distributed
from torch import nn

from prunex.admm.hsadmm import HSADMM
from prunex.comm import Comm
from prunex.pruning import LayerSparsity
from prunex.training.config import ADMMConfig
from prunex.training.topology import build_groups, discover


class Tiny(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(6, 8, 3, bias=False)
        self.bn = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8, 3)


def _engine(rank: int, exchange: str, wire_dtype: str) -> dict:
    topo = discover(2, 2)
    comm = Comm(topo, build_groups(topo, 60, shards=True), torch.device("cpu"))
    torch.manual_seed(0)
    model = Tiny()
    params = dict(model.named_parameters())
    buffers = {n: b for n, b in model.named_buffers() if b.is_floating_point()}
    cfg = ADMMConfig(
        channel_keep=0.5,
        freeze_iteration=2,
        rho_intra=1.0,
        rho_inter=1.0,
        bucket_mb=0.0003,  # 300-byte buckets: several, odd sizes padded to P
        inter_exchange=exchange,
        wire_dtype=wire_dtype,
    )
    sparsity = {"conv.weight": LayerSparsity("conv.weight", channel_keep=0.5)}
    engine = HSADMM(params, buffers, sparsity, cfg, comm, 1e-4)
    gen = torch.Generator().manual_seed(1000 + rank)
    residuals = []
    for k in range(4):  # two dynamic-mask rounds, then frozen
        comm.iteration = k
        with torch.no_grad():
            for p in params.values():
                p.add_(torch.randn(p.shape, generator=gen))
        residuals.append(engine.consensus(k).residual_rows)
    state = {key: {n: t.clone() for n, t in getattr(engine, key).items()} for key in ("z", "z_node", "u", "v")}
    return {
        "state": state,
        "buffers": {n: b.clone() for n, b in buffers.items()},
        "residuals": residuals,
        "rho": (engine.rho_intra, engine.rho_inter),
        "masks": {n: g.vector() for n, g in engine.masks.items()},
        "records": comm.drain(),
    }


@pytest.mark.parametrize("wire_dtype", ["fp32", "bf16"])
def test_sharded_exchange_equals_leader_exchange_bitwise(wire_dtype: str) -> None:
    leader = run_distributed(_engine, 4, "leader", wire_dtype)
    sharded = run_distributed(_engine, 4, "sharded", wire_dtype)
    for a, b in zip(leader, sharded, strict=True):
        for key in ("z", "z_node", "u", "v"):
            for n in a["state"][key]:
                assert torch.equal(a["state"][key][n], b["state"][key][n]), (key, n)
        for n in a["buffers"]:
            assert torch.equal(a["buffers"][n], b["buffers"][n])
        assert a["residuals"] == b["residuals"] and a["rho"] == b["rho"]
        assert all(torch.equal(a["masks"][n], b["masks"][n]) for n in a["masks"])
    # every rank crosses nodes with half a bucket instead of the leader with all of it (P = 2); the "inter"
    # AllReduce of the sharded run is the residual table alone, which both runs send alike
    for rank in range(4):

        def sent(rows: list[dict], level: str) -> float:
            return sum(r["inter_bytes"] for r in rows if r["level"] == level and r["op"] == "allreduce")

        table = sent(sharded[rank]["records"], "inter")
        lead = sent(leader[rank]["records"], "inter") - table
        shard = sent(sharded[rank]["records"], "shard")
        if rank % 2 == 0:
            assert 0.5 * lead <= shard < 0.6 * lead  # half of each bucket, plus padding to P
        else:
            assert lead == 0 < shard  # a worker's link was idle
