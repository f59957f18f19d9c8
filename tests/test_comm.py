"""The instrumented communication layer on 4 real gloo processes, as 2 emulated nodes x 2."""

import pytest
import torch
import torch.distributed as dist
from distributed import run_distributed

from prunex.comm import Comm, wire_bytes
from prunex.training.config import LinkConfig
from prunex.training.topology import Topology, build_groups, discover

N = 1000  # float32 elements -> 4000 bytes


def _levels(rank: int) -> dict:
    topo = discover(2, 2)
    groups = build_groups(topo, 60)
    comm = Comm(topo, groups, torch.device("cpu"))
    comm.iteration = 3
    out = {"intra_members": dist.get_process_group_ranks(groups.intra), "leader": topo.is_leader}
    out["inter_members"] = dist.get_process_group_ranks(groups.inter) if groups.inter is not None else None
    t = torch.full((N,), float(rank))
    out["intra_sum"] = comm.all_reduce(t.clone(), "intra")[0].item()
    if topo.is_leader:
        out["inter_avg"] = comm.all_reduce(t.clone(), "inter", "avg")[0].item()
        masks = torch.zeros(8, dtype=torch.uint8)
        masks[rank] = 1  # leader 0 sets bit 0, leader 2 sets bit 2
        out["mask"] = comm.mask_sync(masks).tolist()
    out["flat_sum"] = comm.all_reduce(t.clone(), "flat")[0].item()
    b = t.clone() if topo.is_leader else torch.zeros(N)
    out["bcast"] = comm.broadcast(b, "intra")[0].item()
    out["gather"] = [g[0].item() for g in comm.all_gather(torch.full((N // 10,), float(rank)), "flat")]
    out["records"] = comm.drain()
    return out


def test_groups_and_one_collective_per_level() -> None:
    res = run_distributed(_levels, 4)
    for rank, r in enumerate(res):
        node = rank // 2
        assert r["intra_members"] == [2 * node, 2 * node + 1]
        assert r["leader"] == (rank % 2 == 0)
        assert r["inter_members"] == ([0, 2] if rank % 2 == 0 else None)
        assert r["intra_sum"] == 4 * node + 1
        assert r["flat_sum"] == 6
        assert r["bcast"] == 2 * node  # the node leader's value
        assert r["gather"] == [0, 1, 2, 3]
        if r["leader"]:
            assert r["inter_avg"] == 1.0  # (0 + 2) / 2
            assert r["mask"] == [1, 0, 1, 0, 0, 0, 0, 0]  # union of the node masks, eq. (14)
        recs = {(x["level"], x["op"]): x for x in r["records"]}
        assert all(x["iteration"] == 3 and x["rank"] == rank and x["node"] == node for x in r["records"])
        # payload bytes as passed in
        assert recs[("intra", "allreduce")]["bytes"] == 4 * N
        assert recs[("flat", "allgather")]["bytes"] == 4 * N // 10
        # intra-node traffic never crosses; the ring over 2 members sends 2(2-1)/2 * n
        assert recs[("intra", "allreduce")]["inter_bytes"] == 0
        assert recs[("intra", "allreduce")]["intra_bytes"] == 4 * N
        # flat ring 0-1-2-3-0: ranks 1 and 3 send across the node boundary, 2(4-1)/4 * n each
        crosses = rank % 2 == 1
        assert recs[("flat", "allreduce")]["inter_bytes"] == (6000 if crosses else 0)
        assert recs[("flat", "allreduce")]["intra_bytes"] == (0 if crosses else 6000)
        assert recs[("flat", "allgather")]["inter_bytes"] == (3 * 400 if crosses else 0)
        # broadcast chain leader -> follower stays inside the node; the follower sends nothing
        assert recs[("intra", "broadcast")]["inter_bytes"] == 0
        assert recs[("intra", "broadcast")]["intra_bytes"] == (4 * N if rank % 2 == 0 else 0)
        if r["leader"]:
            assert recs[("inter", "allreduce")]["inter_bytes"] == 4 * N  # each leader's link
            # 8 flags packed in 1 byte, all-gathered: each leader sends (2-1) * 1 byte
            assert recs[("inter", "mask_sync")]["bytes"] == 1
            assert recs[("inter", "mask_sync")]["inter_bytes"] == 1
        assert all(x["seconds"] >= 0 for x in r["records"])


def test_flat_allreduce_volume_matches_the_ring_formula() -> None:
    # 4 nodes x 4: a flat allreduce puts 2(N-1)/N * n on every node's link; the leader ring
    # puts 2(M-1)/M * n.
    n = 1_000_000
    total_flat = sum(wire_bytes(Topology(r, 16, 4, 4), "flat", "allreduce", n)[0] for r in range(16))
    assert total_flat == pytest.approx(4 * 2 * 15 / 16 * n)
    leaders = [r for r in range(16) if r % 4 == 0]
    total_inter = sum(wire_bytes(Topology(r, 16, 4, 4), "inter", "allreduce", n)[0] for r in leaders)
    assert total_inter == pytest.approx(4 * 2 * 3 / 4 * n)
    # one node: nothing crosses
    assert sum(wire_bytes(Topology(r, 4, 1, 4), "flat", "allreduce", n)[0] for r in range(4)) == 0


def test_alpha_beta_delay() -> None:
    from prunex.comm import AlphaBetaLink

    link = AlphaBetaLink(LinkConfig(model="alpha-beta", alpha_s=1e-3, bandwidth_gbit=1.0))
    topo = Topology(0, 4, 2, 2)
    # leader ring of 2: 2 steps * alpha + n bytes / (125e6 B/s)
    assert link.delay(topo, "inter", "allreduce", 125_000_000) == pytest.approx(2e-3 + 1.0)
    assert link.delay(topo, "intra", "allreduce", 125_000_000) == 0.0
    # a barrier is a 1-byte AllReduce: 2 (g-1) steps, like every AllReduce (it used to be charged g-1)
    assert link.delay(Topology(0, 8, 4, 2), "flat", "barrier", 1) == pytest.approx(2 * 7 * 1e-3 + 2 * 7 / 8 / 125e6)


def _mask_union(rank: int, flags: int) -> dict:
    topo = discover(4, 1)  # four leaders: the inter group is every rank
    comm = Comm(topo, build_groups(topo, 60), torch.device("cpu"))
    gen = torch.Generator().manual_seed(rank)
    mine = (torch.rand(flags, generator=gen) < 0.2).to(torch.uint8)  # sparse: ORs of 4 differ from each
    reference = comm.all_reduce(mine.clone(), "inter", "max")  # the one-byte-per-flag AllReduce-MAX
    union = comm.mask_sync(mine.clone())
    return {"mine": mine, "union": union, "reference": reference, "records": comm.drain()}


@pytest.mark.parametrize("flags", [1, 13, 1440])
def test_bitset_mask_sync_equals_the_uint8_or(flags: int) -> None:
    res = run_distributed(_mask_union, 4, flags)
    expected = torch.stack([r["mine"] for r in res]).amax(dim=0)  # OR on {0, 1}
    for r in res:
        assert r["union"].dtype == torch.uint8 and torch.equal(r["union"], expected)
        assert torch.equal(r["reference"], expected)
        sync = next(x for x in r["records"] if x["op"] == "mask_sync")
        assert sync["bytes"] == (flags + 7) // 8  # eight flags a byte
        assert sync["inter_bytes"] == 3 * ((flags + 7) // 8)  # ring AllGather of 4: (4-1) payloads
