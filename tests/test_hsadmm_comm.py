"""Shrinkage, mask sync and one-shot buffers of H-SADMM on 4 real gloo processes (2 nodes x 2)."""

import torch
from distributed import run_distributed
from torch import nn

from prunex.admm.hsadmm import HSADMM
from prunex.comm import Comm, compress, decompress
from prunex.pruning import LayerSparsity
from prunex.training.config import ADMMConfig
from prunex.training.topology import build_groups, discover


def _comm(nodes: int = 2, procs: int = 2) -> Comm:
    topo = discover(nodes, procs)
    return Comm(topo, build_groups(topo, 60), torch.device("cpu"))


def _shrunk_allreduce(rank: int) -> dict:
    comm = _comm(4, 1)
    g = torch.Generator().manual_seed(0)  # the same global index sets on every rank
    shape = (8, 6, 3, 3)
    out_idx = torch.randperm(8, generator=g)[:5].sort().values
    in_idx = torch.randperm(6, generator=g)[:2].sort().values
    c = torch.randn(shape, generator=torch.Generator().manual_seed(rank + 1))
    compact = compress(c, out_idx, in_idx)
    comm.all_reduce(compact, "flat")
    shrunk = decompress(compact, out_idx, in_idx, shape)
    dense = comm.all_reduce(c.clone(), "flat")
    mask = torch.zeros(shape, dtype=torch.bool)
    mask[out_idx[:, None], in_idx[None, :]] = True
    return {"shrunk": shrunk, "masked_dense": dense * mask, "records": comm.drain()}


def test_decompress_allreduce_compress_equals_masked_allreduce() -> None:
    for r in run_distributed(_shrunk_allreduce, 4):
        torch.testing.assert_close(r["shrunk"], r["masked_dense"])
        compact_rec, dense_rec = r["records"]
        assert compact_rec["bytes"] == 5 * 2 * 9 * 4 and dense_rec["bytes"] == 8 * 6 * 9 * 4


class Tiny(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(4, 8, 3, bias=False)
        self.bn = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8, 3)


def _engine(rank: int, iterations: int, freeze: int, channel_keep: float) -> dict:
    comm = _comm()
    torch.manual_seed(0)
    model = Tiny()
    params = dict(model.named_parameters())
    buffers = {n: b for n, b in model.named_buffers() if b.is_floating_point()}
    cfg = ADMMConfig(
        channel_keep=channel_keep,
        freeze_iteration=freeze,
        freeze_patience=100,
        rho_intra=1.0,
        rho_inter=1.0,
        bucket_mb=0.0005,
    )  # 500-byte buckets: several per collective
    engine = HSADMM(
        params, buffers, {"conv.weight": LayerSparsity("conv.weight", channel_keep=channel_keep)}, cfg, comm, 1e-4
    )
    out: dict = {"node_vectors": [], "global_vectors": [], "ptrs": [], "allocations": [], "frozen": []}
    gen = torch.Generator().manual_seed(1000 + rank)  # every rank drifts differently
    for k in range(iterations):
        comm.iteration = k
        with torch.no_grad():
            for p in params.values():
                p.add_(torch.randn(p.shape, generator=gen))
        engine.consensus(k)
        out["node_vectors"].append(engine.node_masks["conv.weight"].vector() if k < freeze else None)
        out["global_vectors"].append(engine.masks["conv.weight"].vector())
        out["ptrs"].append([b.data_ptr() for b in engine.inter_buckets.buffers])
        out["allocations"].append(engine.inter_buckets.allocations)
        out["frozen"].append(engine.frozen)
    out["z"] = engine.z["conv.weight"]
    out["n_buckets"] = len(engine.inter_buckets.buffers)
    out["records"] = comm.drain()
    return out


def test_mask_sync_gives_the_union_on_every_leader() -> None:
    res = run_distributed(_engine, 4, 3, 100, 0.25)
    for k in range(3):
        leader0, leader1 = res[0]["node_vectors"][k], res[2]["node_vectors"][k]
        union = torch.maximum(leader0, leader1)
        for r in res:
            assert torch.equal(r["global_vectors"][k], union)  # same global mask everywhere, eq. (14)
        assert torch.equal(res[1]["node_vectors"][k], leader0)  # replicated within a node
        # the node masks keep ceil(0.25 * 4) = 1 channel; nodes that disagree give a larger union
        assert int(leader0[8:].sum()) == 1
    # the global z lives on the union's Cartesian product only
    g = res[0]["global_vectors"][-1]
    dead = g[8:12] == 0
    assert torch.all(res[0]["z"][:, dead] == 0)


def test_one_shot_buffers_after_freezing() -> None:
    res = run_distributed(_engine, 4, 6, 2, 0.5)
    for r in res:
        assert r["frozen"] == [False, True, True, True, True, True]
        assert r["n_buckets"] > 1
        # after the mask froze (iteration 1 on), the compact buffers are never reallocated
        assert r["allocations"][1:] == [r["allocations"][1]] * 5
        assert all(p == r["ptrs"][1] for p in r["ptrs"][1:])
        mask_syncs = [x for x in r["records"] if x["op"] == "mask_sync"]
        assert sorted(x["iteration"] for x in mask_syncs) == ([0, 1] if r["records"][0]["rank"] % 2 == 0 else [])
