"""bf16/fp16 compact buckets on the wire (`prunex.comm.wire`) against fp32, on real gloo processes."""

from __future__ import annotations

import pytest
import torch
from distributed import run_distributed

from prunex.admm.steps import inter_node_average
from prunex.comm import Comm
from prunex.comm.bucket import Bucketer
from prunex.comm.wire import WireBuckets
from prunex.pruning import GroupMask
from prunex.training.topology import build_groups, discover

SHAPE = (16, 12, 3, 3)
UNIT_ROUNDOFF = {"bf16": 2.0**-8, "fp16": 2.0**-11}


def _exchange(rank: int, nodes: int, procs: int, wire_dtype: str) -> dict:
    topo = discover(nodes, procs)
    comm = Comm(topo, build_groups(topo, 60), torch.device("cpu"))
    node_gen = torch.Generator().manual_seed(100 + topo.node)  # z_i and v_i are replicated in a node
    z_node = {"w": torch.randn(SHAPE, generator=node_gen), "b": torch.randn(16, generator=node_gen)}
    v = {n: torch.randn(t.shape, generator=node_gen) * 0.1 for n, t in z_node.items()}
    keep = torch.zeros(SHAPE[:2], dtype=torch.bool)
    keep[::2, 1::3] = True  # the same global mask everywhere
    masks = {"w": GroupMask.from_support(keep[..., None, None].expand(SHAPE).contiguous())}
    out = {}
    for name in ("fp32", wire_dtype):
        buckets = Bucketer(0.0002, torch.float32, torch.device("cpu"))  # 200-byte buckets: several
        z, _ = inter_node_average(z_node, v, masks, {}, buckets, comm, wire=WireBuckets(name))
        out[name] = {n: t.clone() for n, t in z.items()}
    c = {n: (z_node[n] + v[n]) for n in z_node}
    out["abs_c"] = {n: c[n].abs() for n in c}  # |c_i| of this node, for the bound
    out["records"] = comm.drain()
    out["node"], out["leader"] = topo.node, topo.is_leader
    return out


@pytest.mark.parametrize("nodes, procs", [(4, 1), (2, 2)])
@pytest.mark.parametrize("wire_dtype", ["bf16", "fp16"])
def test_cast_wire_is_within_its_rounding_bound(nodes: int, procs: int, wire_dtype: str) -> None:
    res = run_distributed(_exchange, nodes * procs, nodes, procs, wire_dtype)
    leaders = [r for r in res if r["leader"]]
    u, M = UNIT_ROUNDOFF[wire_dtype], nodes
    for n in ("w", "b"):
        sum_abs = sum(r["abs_c"][n] for r in leaders)  # sum_i |c_i| over the nodes
        bound = (M + 1) * u * sum_abs / M * (1 + M * u)  # prunex.comm.wire's bound, second order covered
        for r in res:
            exact, cast = r["fp32"][n], r[wire_dtype][n]
            err = (cast - exact).abs()
            assert torch.all(err <= bound), (n, float((err - bound).max()))
            assert torch.equal(cast == 0, exact == 0)  # off the support still exactly 0
            assert torch.equal(cast, res[r["node"] * procs][wire_dtype][n])  # a node holds one z
        assert any(not torch.equal(r["fp32"][n], r[wire_dtype][n]) for r in res)  # it did round
    # half the bytes on the wire for the cast exchange, both the leaders' AllReduce and the Broadcast
    for r in leaders:
        inter = [x["bytes"] for x in r["records"] if x["level"] == "inter"]
        assert sum(inter[len(inter) // 2 :]) * 2 == sum(inter[: len(inter) // 2])


def test_wire_dtype_option() -> None:
    from prunex.run import build_parser, config_from_args
    from prunex.training.config import ADMMConfig, ConfigError

    cfg = config_from_args(build_parser().parse_args(["--method", "hsadmm", "--wire-dtype", "bf16"]))
    assert cfg.admm.wire_dtype == "bf16"
    assert config_from_args(build_parser().parse_args(["--method", "hsadmm"])).admm.wire_dtype == "fp32"
    with pytest.raises(ConfigError, match="wire_dtype"):
        ADMMConfig(wire_dtype="fp8")
