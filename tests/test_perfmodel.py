"""The analytic performance model: formulas against hand-computed values, calibration, CLI on fixtures."""

from __future__ import annotations

import json
import math
import random
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
import torch

from prunex.comm import cost as commcost
from prunex.comm.bucket import Bucketer
from prunex.comm.volume import group_members, wire_bytes
from prunex.comm.waitfree import last_arriver_comm
from prunex.perfmodel import calibrate, formulas, measured, workload
from prunex.perfmodel.__main__ import main
from prunex.perfmodel.formulas import Collective, Link, Network
from prunex.perfmodel.project import project
from prunex.perfmodel.validate import RunData, find_runs, options_of, run_workloads
from prunex.training.config import ADMMConfig, RunConfig
from prunex.training.topology import Topology
from tests.fixtures.perfmodel.runs import write_run

L = Link(alpha_s=1e-3, beta=1e6)  # 1 ms per message, 1 MB/s: times in ms are easy to check by hand


# ------------------------------------------------------------------------------------------ formulas
def test_ring_formulas_match_hand_computed_values():
    # allreduce p=4, n=1000 B: 2*3*1 ms + 2*3/4*1000/1e6 s = 6 ms + 1.5 ms
    assert formulas.allreduce_time(1000, 4, L) == pytest.approx(7.5e-3)
    # allgather p=4: 3 ms + 3*1000 B / 1 MB/s = 3 ms + 3 ms
    assert formulas.allgather_time(1000, 4, L) == pytest.approx(6e-3)
    # broadcast p=8: tree 3*(1 ms + 1 ms); pipelined ring 7 ms + 1 ms
    assert formulas.broadcast_time(1000, 8, L, "tree") == pytest.approx(6e-3)
    assert formulas.broadcast_time(1000, 8, L, "ring") == pytest.approx(8e-3)
    assert formulas.allreduce_time(1000, 2, L) == pytest.approx(2e-3 + 1e-3)
    for op in commcost.OPS:
        assert commcost.collective_time(op, 1000, 1, L) == 0.0
    assert commcost.ring_steps("mask_sync", 5) == 4 and commcost.ring_steps("broadcast", 5, "tree") == 3  # an AllGather
    assert commcost.ring_steps("barrier", 5) == 8  # a 1-byte AllReduce, in the run's emulation too


def test_levels_pick_links_flat_uses_inter_when_spanning_nodes():
    intra, inter = Link(1e-6, 1e9), Link(1e-3, 1e6)
    net = Network(intra, inter)
    c = Collective("flat", "allreduce", 1000)
    # M=2, P=2: ring over N=4 at the inter-node pace
    assert formulas.time_of(c, 2, 2, net) == pytest.approx(6e-3 + 1.5e-3)
    # one node: the intra link
    assert formulas.time_of(c, 1, 4, net) == pytest.approx(6e-6 + 1.5e-6)
    # hsadmm's inter ring is over the M leaders only: M=4 leaders whatever P
    assert formulas.time_of(Collective("inter", "allreduce", 1000), 4, 8, net) == pytest.approx(7.5e-3)
    assert formulas.time_of(Collective("intra", "broadcast", 1000, count=2), 4, 2, net) == pytest.approx(2 * 2e-6)


def test_emulated_network_adds_the_alpha_beta_delay_to_the_loopback():
    loop, inter = Link(1e-4, 1e8), Link(1e-3, 1e6)
    net = Network(loop, inter, broadcast_algo="tree", emulated=True)
    c = Collective("flat", "allreduce", 1000)
    loopback = 6e-4 + 1500 / 1e8
    delay = 6e-3 + 1.5e-3  # AlphaBetaLink: 2(g-1) alpha + busiest crossing member's bytes / beta
    assert formulas.time_of(c, 2, 2, net) == pytest.approx(loopback + delay)
    undelayed = Network(loop, inter, broadcast_algo="tree", emulated=True, undelayed=frozenset({("flat", "allreduce")}))
    assert formulas.time_of(c, 2, 2, undelayed) == pytest.approx(loopback)
    # the delay is exactly what prunex.comm.collectives.AlphaBetaLink sleeps
    from prunex.comm.collectives import AlphaBetaLink
    from prunex.training.config import LinkConfig

    link = AlphaBetaLink(LinkConfig(model="alpha-beta", alpha_s=5e-5, bandwidth_gbit=1.0))
    model = Link(5e-5, 1e9 / 8)
    cases = [
        ("flat", "allreduce", 2, 2),
        ("inter", "allreduce", 4, 2),
        ("flat", "allgather", 2, 3),
        ("inter", "mask_sync", 3, 1),
        ("flat", "broadcast", 2, 2),
        ("flat", "barrier", 2, 2),
    ]
    for level, op, m, p in cases:
        topo = Topology(0, m * p, m, p, emulated=True)
        g = commcost.group_size(level, m, p)
        crossing = Network(Link(0.0, 1e30), model, emulated=True)  # an instant loopback: the delay alone
        got = formulas.time_of(formulas.Collective(level, op, 4096), m, p, crossing)
        assert got == pytest.approx(link.delay(topo, level, op, 4096)), (level, op)
        assert got == pytest.approx(commcost.collective_time(op, 4096, g, model, "ring"))
    assert link.delay(Topology(0, 4, 2, 2), "intra", "allreduce", 4096) == 0.0


@pytest.mark.parametrize("m,p", [(1, 4), (2, 2), (3, 2), (4, 1), (2, 3)])
def test_ring_bytes_equal_the_logged_volume_summed_over_ranks(m, p):
    n = 1000
    for level in commcost.LEVELS:
        for op in commcost.OPS:
            want_inter = want_intra = 0.0
            for rank in range(m * p):
                topo = Topology(rank, m * p, m, p, emulated=True)
                members = group_members(topo, level)
                if rank in members:
                    i, a = wire_bytes(topo, level, op, n, min(members))
                    want_inter, want_intra = want_inter + i, want_intra + a
            got = commcost.ring_bytes(level, op, n, m, p)
            assert got == pytest.approx((want_inter, want_intra)), (level, op)


def test_buckets_match_the_bucketer_and_ddp():
    rng = random.Random(0)
    for _ in range(20):
        numels = [rng.randint(1, 5000) for _ in range(rng.randint(1, 30))]
        cap = rng.randint(100, 20000)
        bucketer = Bucketer(1.0, torch.float32, torch.device("cpu"))
        bucketer.bucket_bytes = cap
        bucketer.layout(numels)  # what the engines allocate, against what the model prices
        assert [4 * b.numel() for b in bucketer.buffers] == commcost.bucket_bytes(numels, 4, cap)
    # DDP closes a bucket once it reaches the cap: 30+30+50 | 100 | 20
    assert commcost.ddp_bucket_sizes([30, 30, 50, 100, 20], 100) == [110, 100, 20]


# ------------------------------------------------------------------------------------------ workloads
def _tiny() -> workload.ModelSpec:
    P = workload.ParamSpec
    return workload.ModelSpec(
        "tiny",
        (
            P("conv.weight", (8, 4, 3, 3), True),
            P("bn.weight", (8,), False),
            P("fc.weight", (10, 8), False),
            P("fc.bias", (10,), False),
        ),
        (8, 8),
    )


def _ddp_buckets(rank: int, model: str, cap_mb: float) -> list[tuple[int, int]]:
    """(bytes, first parameter index) of each bucket torch's DDP reduces, in launch order, in its second
    iteration (the first runs one bucket of everything, then the Reducer rebuilds its buckets)."""
    from torch.nn.parallel import DistributedDataParallel

    from prunex.training.models import build_model

    torch.manual_seed(0)
    net = build_model(model)
    index = {id(p): i for i, p in enumerate(net.parameters())}
    ddp = DistributedDataParallel(net, bucket_cap_mb=cap_mb, broadcast_buffers=False)
    seen: list[tuple[int, int]] = []

    def hook(state, bucket):
        seen.append((4 * bucket.buffer().numel(), min(index[id(p)] for p in bucket.parameters())))
        fut = torch.futures.Future()
        fut.set_result(bucket.buffer())
        return fut

    ddp.register_comm_hook(None, hook)
    x, y = torch.randn(2, 3, 32, 32), torch.tensor([0, 1])
    for _ in range(2):
        seen.clear()
        torch.nn.functional.cross_entropy(ddp(x), y).backward()
    return seen


def test_ddp_buckets_and_the_last_one_are_torchs():
    """The model's DDP buckets are torch's, and the bucket that cannot overlap the backward pass (the last
    launched) is the one holding the first parameters."""
    from distributed import run_distributed

    seen = run_distributed(_ddp_buckets, 1, "resnet20", 0.25)[0]
    w = workload.ddp_workload(workload.model_spec("resnet20"), workload.Options(ddp_bucket_mb=0.25))
    assert len(seen) > 2  # several buckets, so the last one is a choice
    assert [c.nbytes for c in w.collectives] == [b for b, _ in seen]
    assert seen[-1][1] == 0 and w.overlap_last_bytes == seen[-1][0]
    # --grad-dtype bf16: torch's buckets are the same float32 ones, each sent at half its bytes (review 2026-11-28:
    # the model bucketed 2-byte gradients, half as many buckets of the cap's size)
    half = workload.ddp_workload(
        workload.model_spec("resnet20"), workload.Options(ddp_bucket_mb=0.25, ddp_grad_bytes=2)
    )
    assert [c.nbytes for c in half.collectives] == [b // 2 for b, _ in seen] and half.overlap_last_bytes == seen[-1][
        0
    ] // 2


def test_hsadmm_workload_by_hand():
    spec = _tiny()  # conv 288, bn 8, fc 80 + 10, buffers 16: 402 floats
    opts = workload.Options(batch_size=10, local_epochs=2, channel_keep=0.5, average_bn_stats=True)
    kept = workload.kept_from_keep(spec, 1.0, 0.5)
    assert kept == {"conv.weight": (8, 2)}
    w = workload.hsadmm_workload(spec, kept, opts, shard=25, dynamic=1.0)
    got = [(c.level, c.op, c.nbytes) for c in w.collectives]
    assert got == [
        ("flat", "barrier", 1),
        ("intra", "allreduce", 4 * 402),
        ("inter", "mask_sync", 2),  # 12 flags, packed eight to a byte
        ("intra", "broadcast", 12),
        ("inter", "allreduce", 4 * (144 + 8 + 90 + 16)),
        ("intra", "broadcast", 4 * 258),
        ("intra", "allreduce", 4 * 9 * 4),  # the float32 residual table: in the node,
        ("inter", "allreduce", 4 * 9 * 4),  # across nodes by the leaders,
        ("intra", "broadcast", 4 * 9 * 4),  # back to the workers
    ]
    assert w.samples == 50 and w.steps == 2 * 3
    assert workload.compact_fraction(spec, kept) == 0.5
    frozen = workload.hsadmm_workload(spec, kept, opts, shard=25, dynamic=0.0)
    assert [c.op for c in frozen.collectives].count("mask_sync") == 0
    # BatchNorm statistics re-estimated before evaluation (the default): not exchanged at all
    lean = workload.hsadmm_workload(spec, kept, workload.Options(channel_keep=0.5), shard=25, dynamic=0.0)
    got = [(c.level, c.op, c.nbytes) for c in lean.collectives if c.op == "allreduce"]
    assert got == [
        ("intra", "allreduce", 4 * 386),
        ("inter", "allreduce", 4 * 242),
        ("intra", "allreduce", 4 * 9 * 4),
        ("inter", "allreduce", 4 * 9 * 4),
    ]
    # bucketing: a 1000-byte cap splits the 1608-byte intra buffer after the conv weight
    small = workload.hsadmm_workload(spec, kept, workload.Options(bucket_mb=1e-3, average_bn_stats=True), shard=25)
    intra = [c.nbytes for c in small.collectives if c.level == "intra" and c.op == "allreduce"]
    assert intra == [1152, 456, 4 * 9 * 4]  # two theta+u buckets, then the residual table


def test_iteration_cost_by_hand():
    spec = _tiny()
    net = Network(Link(0.0, 1e9), Link(1e-3, 1e6))
    dev = workload.Device(compute_s_per_sample=1e-3, mem_bw=1e12, launch_s=0.0)
    w = workload.ddp_workload(spec, workload.Options(batch_size=4, ddp_overlap=0.0))
    cost = workload.iteration_cost(w, 2, 2, net, dev, workload.Options(ddp_overlap=0.0))
    n = 4 * spec.numel  # one DDP bucket of all gradients
    assert cost.flat_allreduce_s == pytest.approx(6e-3 + 1.5 * n / 1e6)
    assert cost.compute_s == pytest.approx(4e-3) and cost.hidden_s == 0.0
    assert cost.iter_s == pytest.approx(cost.compute_s + cost.comm_s)
    assert cost.inter_bytes == pytest.approx(2 * 1.5 * n)  # the two node-last ranks cross
    # with overlap the whole comm except the last bucket can hide behind 2/3 of the compute
    hid = workload.iteration_cost(w, 2, 2, net, dev, workload.Options(ddp_overlap=1.0))
    assert hid.hidden_s == 0.0  # a single bucket is the last bucket
    topk = workload.topk_workload(spec, workload.Options(topk_ratio=0.1), world=4)
    assert [c.nbytes for c in topk.collectives] == [4 * (29 + 8), 4 * (29 + 8), 4 * 18]


def test_epoch_cost_strong_scaling_shards():
    spec = _tiny()
    net = Network(Link(0.0, 1e12), Link(0.0, 1e12))
    dev = workload.Device(compute_s_per_sample=1e-3, mem_bw=1e15, launch_s=0.0)
    opts = workload.Options(batch_size=16, local_epochs=5)
    e = workload.epoch_cost("ddp", spec, 2, 2, net, dev, opts, dataset_size=1000)
    assert e["shard"] == 250 and e["steps_per_epoch"] == 16
    assert e["epoch_s"] == pytest.approx(0.25, rel=1e-3)  # compute-bound: 250 samples x 1 ms
    h = workload.epoch_cost("hsadmm", spec, 2, 2, net, dev, opts, dataset_size=1000)
    assert h["epoch_s"] == pytest.approx(0.25, rel=1e-3)  # 5 epochs per iteration, divided by 5


# ------------------------------------------------------------------------------------------ calibration
SIZES = [1024 * 4**i for i in range(10)]  # 1 KiB .. 256 MiB


@pytest.mark.parametrize(
    "op,members,algo", [("allreduce", 4, "ring"), ("broadcast", 2, "tree"), ("allgather", 3, "ring")]
)
def test_fit_recovers_alpha_and_beta(op, members, algo):
    true = Link(alpha_s=25e-6, beta=1.25e8)
    t = [commcost.collective_time(op, n, members, true, algo) for n in SIZES]
    exact = calibrate.fit_link(SIZES, t, op, members, algo)
    assert exact.link.alpha_s == pytest.approx(true.alpha_s, rel=1e-6)
    assert exact.link.beta == pytest.approx(true.beta, rel=1e-6)
    assert exact.r2 == pytest.approx(1.0)
    rng = random.Random(1)
    noisy = [x * (1 + 0.01 * rng.gauss(0, 1)) for x in t]
    fit = calibrate.fit_link(SIZES, noisy, op, members, algo)
    assert fit.link.alpha_s == pytest.approx(true.alpha_s, rel=0.1)
    assert fit.link.beta == pytest.approx(true.beta, rel=0.03)


def test_fit_table_to_network():
    intra, inter = Link(20e-6, 1e9), Link(50e-6, 1.25e8)
    rows = []
    for level, link, g in [("intra", intra, 2), ("inter", inter, 2), ("flat", inter, 4)]:
        for n in SIZES[:8]:
            rows.append(
                {
                    "level": level,
                    "op": "allreduce",
                    "size_bytes": n,
                    "members": g,
                    "seconds": formulas.allreduce_time(n, g, link),
                }
            )
    fit = calibrate.fit_measurements(pd.DataFrame(rows))
    # the sweep's alpha is per call: 2(g-1) steps
    assert fit.set_index("level").loc["flat", "alpha_s"] == pytest.approx(6 * 50e-6, rel=1e-6)
    net = calibrate.network_from_fit(fit)
    assert net.intra.alpha_s == pytest.approx(20e-6) and net.inter.beta == pytest.approx(1.25e8)
    assert net.flat.alpha_s == pytest.approx(50e-6)
    emu = calibrate.network_from_fit(fit, emulated=True, inter=Link(1e-4, 1e6))
    assert emu.emulated and emu.inter == Link(1e-4, 1e6) and emu.intra.beta == pytest.approx(1e9)


@pytest.mark.parametrize("members", [2, 3, 4, 8])
def test_sweep_fit_of_a_tree_broadcast_prices_the_same_broadcast(members):
    """gloo's binomial-tree broadcast, timed by the sweep and fitted on its chain bandwidth term (b(n) = n), gives
    back the link, so the network prices that broadcast at the time it was measured, for any group size."""
    link = Link(30e-6, 1e8)
    seconds = [formulas.broadcast_time(n, members, link, "tree") for n in SIZES[:8]]
    x = [calibrate.bytes_factor("broadcast", members) * n for n in SIZES[:8]]  # the sweep's bytes_term
    row = calibrate.fit_row(x, seconds, "absolute")
    fit = pd.DataFrame(
        [
            {"level": lv, "op": op, **row, "members": members, "bytes_factor": calibrate.bytes_factor(op, members)}
            for lv, op in (("intra", "allreduce"), ("inter", "broadcast"))
        ]
    )
    bcast = calibrate.links_from_fit_table(fit, "tree")[("inter", "broadcast")]
    assert bcast.alpha_s == pytest.approx(link.alpha_s, rel=1e-6) and bcast.beta == pytest.approx(link.beta, rel=1e-6)
    # a table without bytes_factor (older sweeps) is read as the sweep's chain term
    bare = calibrate.links_from_fit_table(fit.drop(columns="bytes_factor"), "tree")[("inter", "broadcast")]
    assert bare == bcast
    # measurement rows fitted directly (`fit_measurements`, the tree of `measure_loopback`) give the same link
    rows = [
        {"level": "inter", "op": "broadcast", "size_bytes": n, "members": members, "seconds": t}
        for n, t in zip(SIZES[:8], seconds, strict=True)
    ]
    direct = calibrate.links_from_fit_table(
        calibrate.fit_measurements(pd.DataFrame(rows), broadcast_algo="tree"), "tree"
    )
    assert direct[("inter", "broadcast")].beta == pytest.approx(link.beta, rel=1e-6)
    net = Network(Link(0.0, 1e12), Link(0.0, 1e12), inter_broadcast=bcast, broadcast_algo="tree")
    m = members  # one process per node: the inter group has `members` members, and crosses nodes
    priced = [formulas.time_of(Collective("inter", "broadcast", n), m, 1, net) for n in SIZES[:8]]
    assert priced == pytest.approx(seconds, rel=1e-6)


def test_puhti_cluster_file():
    c = calibrate.load_cluster("puhti")
    assert c.gpus_per_node == 4
    assert c.network.inter.beta == pytest.approx(12.5e9 * 0.8)
    assert c.network.intra.beta == pytest.approx(150e9 * 0.87)
    assert set(c.compute_s_per_sample) >= {"resnet152", "resnet18", "wide_resnet50_2"}
    assert any("[estimate]" in a for a in c.assumptions) and any("[assumption]" in a for a in c.assumptions)


# ------------------------------------------------------------------------------------------ CLI on fixtures
def test_validate_on_fixture_runs(tmp_path, capsys):
    for method in ("hsadmm", "ddp", "topk"):
        write_run(tmp_path / "results", method)
    assert len(find_runs(tmp_path / "results")) == 3
    out = tmp_path / "out"
    from tests.fixtures.perfmodel.runs import LOOPBACK

    rc = main(
        [
            "validate",
            "--results",
            str(tmp_path / "results"),
            "--out",
            str(out),
            "--strict",
            "--loopback-alpha-s",
            str(LOOPBACK.alpha_s),
            "--loopback-beta",
            str(LOOPBACK.beta),
        ]
    )
    assert rc == 0, capsys.readouterr().out
    df = pd.read_csv(out / "validation.csv")
    assert (out / "validation.png").stat().st_size > 0
    assert set(df["method"]) == {"hsadmm", "ddp", "topk"}
    assert df["err_pct"].abs().max() < 1e-6
    assert df["err_waitfree_pct"].abs().max() < 1e-6
    assert df["bytes_err_pct"].abs().max() < 1e-6
    assert (df["undelayed"] == "-").all()
    assert "3 of 3 predictions within" in capsys.readouterr().out
    by_op = pd.read_csv(out / "validation_by_op.csv")
    assert by_op["err_last_arriver_pct"].abs().max() < 1e-6
    hs = by_op[by_op["run_id"].str.startswith("hsadmm")].set_index(["level", "op"])
    assert {("flat", "barrier"), ("inter", "mask_sync"), ("intra", "broadcast")} <= set(hs.index)


def test_validate_detects_undelayed_collectives(tmp_path):
    d = write_run(tmp_path, "ddp", iterations=3)
    comm = pd.read_parquet(d / "comm.parquet")
    comm["seconds"] = 1e-6  # as DDP's hook logs them: the emulation never slept
    comm.to_parquet(d / "comm.parquet", index=False)
    from prunex.perfmodel.validate import RunData, run_network

    net, _ = run_network(RunData(d))
    assert net.undelayed == frozenset({("flat", "allreduce")})
    assert last_arriver_comm(comm).tolist() == pytest.approx([1e-6] * 3)


def test_project_on_a_fixture_cluster(tmp_path, capsys):
    cluster = {
        "name": "fixture",
        "gpus_per_node": 2,
        "intra": {"alpha_s": 1e-6, "beta_bytes_per_s": 1e11},
        "inter": {"alpha_s": 1e-5, "nominal_bytes_per_s": 1e10, "efficiency": 0.5},
        "compute_s_per_sample": {"resnet20": {"value": 1e-4, "status": "estimate"}},
    }
    path = tmp_path / "fixture.json"
    path.write_text(json.dumps(cluster))
    rc = main(
        [
            "project",
            "--cluster",
            str(path),
            "--model",
            "resnet20",
            "--dataset",
            "digits",
            "--gpus",
            "2,4",
            "--extend-to",
            "16",
            "--out",
            str(tmp_path / "out"),
        ]
    )
    assert rc == 0
    df = pd.read_csv(tmp_path / "out" / "projection_fixture_resnet20.csv")
    assert sorted(df["gpus"].unique()) == [2, 4, 8, 16]
    assert set(df["method"]) == {"hsadmm", "ddp", "topk"}
    base = df[df["gpus"] == 2]
    assert (base["speedup"] == 1.0).all()
    assert (df["efficiency_pct"] <= 100.0 + 1e-9).all()
    assert (tmp_path / "out" / "projection_fixture_resnet20.png").stat().st_size > 0


def test_project_puhti_series_has_paper_column(tmp_path):
    c = calibrate.load_cluster("puhti")
    from prunex.perfmodel.project import PAPER_SPEEDUP, gpu_series, project

    df = project(c, "resnet18", "cifar10", ("hsadmm", "ddp", "topk"), gpu_series((8, 16, 32, 64), 128))
    at64 = df[df["gpus"] == 64].set_index("method")
    assert at64["paper_speedup"].to_dict() == PAPER_SPEEDUP
    assert df.groupby("method")["gpus"].apply(list).map(lambda g: g == [8, 16, 32, 64, 128]).all()
    assert all(math.isfinite(x) and x > 0 for x in df["epoch_s"])


def test_cli_errors_are_one_line(tmp_path, capsys):
    assert main(["validate", "--results", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    assert "no runs" in capsys.readouterr().err
    assert main(["project", "--cluster", "no-such-cluster", "--out", str(tmp_path / "o")]) == 2
    assert "no cluster file" in capsys.readouterr().err


def test_compute_per_sample_from_a_run(tmp_path):
    ddp = write_run(tmp_path, "ddp", iterations=3)  # compute_s 0.5 per step of 32 digits images
    assert calibrate.compute_per_sample(ddp) == pytest.approx(0.5 / 32)
    hs = write_run(tmp_path, "hsadmm", iterations=3)  # 5 local epochs of 1438 // 4 = 359 images
    assert calibrate.compute_per_sample(hs) == pytest.approx(0.5 / (5 * 359))


def _with_compute(run, per_sample: float, samples: list[int], epochs: list[float] | None = None):
    """``run``'s steps.parquet with a compute of ``per_sample`` seconds per training sample of each iteration
    (and the trainer's ``epoch`` column, when given)."""
    path = run / "steps.parquet"
    steps = pd.read_parquet(path)
    steps["compute_s"] = [per_sample * n for n in samples]
    if epochs is not None:
        steps["epoch"] = epochs
    steps.to_parquet(path, index=False)
    return RunData(run)


def test_an_epochs_last_smaller_batch_is_its_own_samples(tmp_path):
    # digits on 2 x 2 ranks: a shard of 1438 // 4 = 359 images in 12 steps of 32, the last holding 359 - 11 x 32 = 7
    # (the sampler drops the dataset's tail, the loader keeps the shard's: prunex.training.data.shard_loader)
    samples = [32] * 11 + [7] + [32] * 3
    run = _with_compute(write_run(tmp_path, "ddp", iterations=15), 1e-3, samples)
    assert calibrate.compute_per_sample(run.path) == pytest.approx(1e-3)
    assert calibrate.compute_per_sample(run.path, stat="median") == pytest.approx(1e-3)
    works = run_workloads(run, workload.model_spec("resnet20"), options_of(run.config))
    assert [works[k].samples for k in sorted(works)] == samples[1:]


def test_masked_retraining_iterations_are_one_local_epoch(tmp_path):
    # K = 3 outer iterations of E = 5 local epochs, then R = 2 masked-retraining iterations of one epoch each
    # (prunex.methods.hsadmm.ADMMMethod.train_iteration); the trainer logs the epochs done after each iteration
    admm = ADMMConfig(iterations=3, local_epochs=5, retrain_epochs=2, freeze_iteration=2)
    shard = 1438 // 4
    run = write_run(tmp_path, "hsadmm", iterations=5, config={"admm": admm})
    run = _with_compute(run, 1e-3, [5 * shard] * 3 + [shard] * 2, epochs=[5.0, 10.0, 15.0, 16.0, 17.0])
    assert calibrate.compute_per_sample(run.path) == pytest.approx(1e-3)
    works = run_workloads(run, workload.model_spec("resnet20"), options_of(run.config))
    assert [works[k].samples for k in sorted(works)] == [5 * shard] * 2 + [shard] * 2
    assert [works[k].steps for k in sorted(works)] == [5 * 12] * 2 + [12] * 2
    # the projection's epoch: (K T(E) + R T(1)) / (K E + R), the mask dynamic in the same share of both
    spec, net = workload.model_spec("resnet20"), Network(Link(1e-4, 1e9), Link(1e-3, 1e8))
    dev = workload.Device(compute_s_per_sample=1e-3, mem_bw=1e11, launch_s=1e-6)
    opts = workload.Options.from_config(RunConfig(method="hsadmm", batch_size=32, admm=admm))
    kept = workload.kept_from_keep(spec, 1.0, opts.channel_keep)

    def iteration(epochs: int) -> float:
        w = workload.hsadmm_workload(spec, kept, replace(opts, local_epochs=epochs), shard, opts.dynamic_fraction)
        return workload.iteration_cost(w, 2, 2, net, dev, opts).iter_s

    e = workload.epoch_cost("hsadmm", spec, 2, 2, net, dev, opts, 1438, kept)
    assert e["epoch_s"] == pytest.approx((3 * iteration(5) + 2 * iteration(1)) / (3 * 5 + 2), rel=1e-12)
    assert e["epoch_s"] > iteration(5) / 5  # a consensus per retraining epoch


# ------------------------------------------------------------------------------------------ cluster-from-sweep
def _sweep_fit(members: dict[str, int]) -> pd.DataFrame:
    """A fit table as prunex.bench.collectives writes it: alpha per call, bus bandwidth, group size."""
    rows = [
        ("intra", "allreduce", 2e-4, 1e9),
        ("intra", "broadcast", 1e-4, 2e9),
        ("inter", "allreduce", 4e-4, 1.2e8),
        ("inter", "broadcast", 3e-4, 1.1e8),
        ("flat", "allreduce", 1.2e-3, 1e8),
    ]
    return pd.DataFrame(
        [
            {"level": lv, "op": op, "alpha_s": a, "beta_bytes_per_s": b, "members": members[lv], "procs_per_node": 2}
            for lv, op, a, b in rows
        ]
    )


def _topk_own_s(world: int, mem_bw: float, launch_s: float) -> float:
    """Top-K's selection and scatter on ResNet-20 (`workload.topk_workload`), seconds per step."""
    w = workload.topk_workload(workload.model_spec("resnet20"), workload.Options(), world)
    return w.compress_bytes / mem_bw + w.compress_launches * launch_s


def test_cluster_from_sweep_projects_each_method_with_its_own_compute(tmp_path):
    fit = _sweep_fit({"intra": 2, "inter": 2, "flat": 4})
    runs = [
        write_run(tmp_path / "a", "ddp", iterations=3),
        write_run(tmp_path / "b", "topk", iterations=3, compute_s=0.25),
    ]
    raw = measured.cluster_from_sweep(fit, name="mc", procs_per_node=2, compute_runs=runs, device=(5e9, 2e-6))
    (tmp_path / "mc.json").write_text(json.dumps(raw))
    c = calibrate.load_cluster(tmp_path / "mc.json")
    df = project(c, "resnet20", "digits", ("ddp", "topk", "pactrain"), (2, 4)).set_index(["method", "gpus"])
    shard = 1438 // 2  # SGD methods: an epoch's compute is the shard's samples x c
    ddp, topk = 0.5 / 32, (0.25 - _topk_own_s(4, 5e9, 2e-6)) / 32
    assert df.loc[("ddp", 2), "compute_s"] == pytest.approx(shard * ddp)
    assert df.loc[("topk", 2), "compute_s"] == pytest.approx(shard * topk)
    # a method without runs of its own: the median over all runs
    assert df.loc[("pactrain", 2), "compute_s"] == pytest.approx(shard * (ddp + topk) / 2)


def test_cluster_from_sweep_round_trips_through_load_cluster(tmp_path):
    fit = _sweep_fit({"intra": 2, "inter": 2, "flat": 4})
    a, b = write_run(tmp_path / "a", "ddp", iterations=3), write_run(tmp_path / "b", "topk", iterations=3)
    raw = measured.cluster_from_sweep(fit, name="mc", procs_per_node=2, compute_runs=[a, b], device=(5e9, 2e-6))
    path = tmp_path / "mc.json"
    path.write_text(json.dumps(raw))
    c = calibrate.load_cluster(path)
    net = c.network

    # per ring step: allreduce of 2 members has 2(2-1) = 2 steps, of 4 members 6; gloo's tree broadcast of 2: 1
    def same(a, b):
        return a.alpha_s == pytest.approx(b.alpha_s) and a.beta == pytest.approx(b.beta)

    assert same(net.intra, Link(1e-4, 1e9)) and same(net.inter, Link(2e-4, 1.2e8))
    assert same(net.flat, Link(2e-4, 1e8))
    assert same(net.intra_broadcast, Link(1e-4, 2e9)) and same(net.inter_broadcast, Link(3e-4, 1.1e8))
    assert net.broadcast_algo == "tree" and c.gpus_per_node == 2
    assert c.mem_bw == 5e9 and c.launch_s == 2e-6
    # both fixture runs log 0.5 s of compute per step of 32; Top-K's selection and scatter are taken off its own
    ddp, topk = 0.5 / 32, (0.5 - _topk_own_s(4, 5e9, 2e-6)) / 32
    assert c.method_compute_s_per_sample == {"resnet20": {"ddp": pytest.approx(ddp), "topk": pytest.approx(topk)}}
    assert c.compute_s_per_sample == {"resnet20": pytest.approx((ddp + topk) / 2)}  # the median over both runs
    assert any("[measured]" in n and str(a) in n for n in c.assumptions)
    # the flat link prices a flat allreduce spanning nodes: 6 steps x 0.2 ms + 2*3/4 * 1e6 B / 1e8 B/s
    assert formulas.time_of(Collective("flat", "allreduce", 1e6), 2, 2, net) == pytest.approx(1.2e-3 + 0.015)


def test_cluster_from_sweep_cli_then_project(tmp_path, capsys):
    sweep = tmp_path / "coll.fit.parquet"
    _sweep_fit({"intra": 2, "inter": 2, "flat": 4}).to_parquet(sweep)
    run = write_run(tmp_path / "r", "hsadmm", iterations=3)
    out = tmp_path / "mc.json"
    assert (
        main(["cluster-from-sweep", "--collectives", str(sweep), "--compute-from-run", str(run), "--out", str(out)])
        == 0
    )
    raw = json.loads(out.read_text())
    assert raw["name"] == "mc" and raw["compute_s_per_sample"]["resnet20"]["status"] == "measured"
    assert raw["device"]["memory_bytes_per_s"]["value"] > 0
    assert (
        main(
            [
                "project",
                "--cluster",
                str(out),
                "--model",
                "resnet20",
                "--dataset",
                "digits",
                "--gpus",
                "2,4",
                "--extend-to",
                "8",
                "--batch-size",
                "32",
                "--local-epochs",
                "1",
                "--out",
                str(tmp_path / "p"),
            ]
        )
        == 0
    )
    df = pd.read_csv(tmp_path / "p" / "projection_mc_resnet20.csv")
    assert set(df["cluster"]) == {"mc"} and set(df["dataset"]) == {"digits"}
    assert sorted(df["gpus"].unique()) == [2, 4, 8]
    assert df.set_index(["method", "gpus"]).loc[("ddp", 8), ["nodes", "procs_per_node"]].tolist() == [4, 2]
    # no inter-node allreduce fit: a one-line error
    bad = tmp_path / "bad.fit.parquet"
    _sweep_fit({"intra": 2, "inter": 2, "flat": 4}).query("level == 'intra'").to_parquet(bad)
    capsys.readouterr()
    assert main(["cluster-from-sweep", "--collectives", str(bad), "--out", str(tmp_path / "x.json")]) == 2
    assert "needs intra and inter allreduce fits" in capsys.readouterr().err


def test_sweep_fit_on_last_arriver_times_recovers_the_link(tmp_path):
    # members leave the barrier at different times: the slowest member's time carries a 3 ms skew on top of
    # alpha + b(n)/beta, the last arriver's does not; "last" refits on the latter and recovers alpha and beta
    from prunex.perfmodel.calibrate import bytes_factor

    alpha, beta, sizes = 5e-4, 1.25e8, [1024 * 4**i for i in range(8)]
    rows = []
    for level, op, g in (("intra", "allreduce", 2), ("inter", "allreduce", 2)):
        for n in sizes:
            term = bytes_factor(op, g) * n
            rows.append(
                {
                    "level": level,
                    "op": op,
                    "size_bytes": n,
                    "seconds": alpha + term / beta + 3e-3,
                    "seconds_last": alpha + term / beta,
                    "members": g,
                    "bytes_term": term,
                    "link_model": "netns-tc",
                    "nodes": 2,
                    "procs_per_node": 2,
                    "link_bytes_per_s": beta,
                }
            )
    sweep = tmp_path / "coll.parquet"
    pd.DataFrame(rows).to_parquet(sweep)
    last = calibrate.read_fit_table(sweep, "last").set_index(["level", "op"])
    assert last.loc[("inter", "allreduce"), "alpha_s"] == pytest.approx(alpha, rel=1e-6)
    assert last.loc[("inter", "allreduce"), "beta_bytes_per_s"] == pytest.approx(beta, rel=1e-6)
    assert set(last["time_stat"]) == {"last arriver"}
    slowest = calibrate.read_fit_table(sweep, "slowest").set_index(["level", "op"])
    assert slowest.loc[("inter", "allreduce"), "alpha_s"] > alpha + 2e-3 and set(slowest["time_stat"]) == {
        "slowest member"
    }
    # a sweep without seconds_last falls back to the slowest member's time
    pd.DataFrame(rows).drop(columns="seconds_last").to_parquet(sweep)
    assert set(calibrate.read_fit_table(sweep, "last")["time_stat"]) == {"slowest member"}
    with pytest.raises(calibrate.CalibrationError):
        calibrate.read_fit_table(sweep, "fastest")


@pytest.mark.parametrize("filter_keep, channel_keep", [(1.0, 0.5), (0.5, 0.5), (0.5, 1.0), (0.25, 0.75)])
def test_model_constrains_the_layers_and_groups_that_runs_constrain(filter_keep, channel_keep):
    """The perf model's kept groups are those of `constrained_layers` on the real model: the RGB stem
    keeps its 3 channels (and is unconstrained without filter sparsity) in the model as in runs."""
    from prunex.pruning import constrained_layers, keep_count
    from prunex.training.models import build_model

    model = build_model("resnet20")
    shapes = {n: p.shape for n, p in model.named_parameters()}
    layers = constrained_layers(model, filter_keep=filter_keep, channel_keep=channel_keep)
    want = {
        n: (keep_count(shapes[n][0], sp.filter_keep), keep_count(shapes[n][1], sp.channel_keep))
        for n, sp in layers.items()
    }
    got = workload.kept_from_keep(workload.model_spec("resnet20"), filter_keep, channel_keep)
    assert got == want
    assert ("conv1.weight" in got) == (filter_keep < 1.0)
    if "conv1.weight" in got:
        assert got["conv1.weight"][1] == 3


def test_sharded_exchange_gains_only_where_a_node_has_several_nics():
    from prunex.bench.exchange import rows

    for cluster in ("puhti", "puhti-dual-rail"):
        table = {name: (nbytes, sec) for name, nbytes, sec in rows(cluster, "resnet20", 4, 0.5)}
        paper, sharded = table["PruneX, paper (leader, fp32)"], table["+ --inter-exchange sharded"]
        bf16, both = table["+ --wire-dtype bf16"], table["all together"]
        assert sharded[0] == pytest.approx(paper[0], rel=1e-3)  # the same bytes leave each node
        assert bf16[0] == pytest.approx(paper[0] / 2, rel=1e-2)  # half of them in bf16 (residual table: fp32)
        nics = calibrate.load_cluster(cluster).network.inter_nics
        if nics == 1:  # the leader already had the node's only link
            assert sharded[1] == pytest.approx(paper[1], rel=0.05)
        else:  # the leader drives one of the node's NICs, the P shard groups all of them
            assert sharded[1] < paper[1] and both[1] < bf16[1]


def test_cluster_from_sweep_takes_the_device_of_the_runs_machine_from_a_cluster_file(tmp_path: Path) -> None:
    """`--device-from`: a cluster file made again elsewhere keeps the memory bandwidth and per-op time of the machine
    its runs ran on (review 2026-11-28: remaking the committed local file on another VM put that VM's 16.8 GB/s in
    place of the 38.7 GB/s of the machine the runs were timed on), with their provenance."""
    from prunex.perfmodel.__main__ import main as perfmodel_main

    root = Path(__file__).resolve().parents[1]
    committed = root / "saved-logs/local/perfmodel/minicluster-2node-1gbit.json"
    before = json.loads(committed.read_text())["device"]
    out = tmp_path / "again.json"
    argv = [
        "cluster-from-sweep",
        "--collectives",
        str(root / "saved-logs/perfmodel/minicluster-2x2/collectives.parquet"),
    ]
    argv += ["--compute-from-run", str(root / "saved-logs/local/strong_scaling/hsadmm-resnet20-1x2")]
    assert perfmodel_main([*argv, "--device-from", str(committed), "--out", str(out)]) == 0
    device = json.loads(out.read_text())["device"]
    for key in ("memory_bytes_per_s", "kernel_launch_s"):
        assert device[key]["value"] == before[key]["value"] and device[key]["status"] == "measured"
        assert before[key]["source"] in device[key]["source"] and str(committed) in device[key]["source"]


def test_project_compute_from_run_is_forward_backward_and_step(tmp_path: Path, capsys) -> None:
    """`project --compute-from-run RUN` takes the run's compute per sample as a cluster file's is meant: less the
    method's own work, which the projection adds back (review 2026-11-28: it took the run's whole logged compute,
    so an ADMM run's vector work was counted twice)."""
    from prunex.perfmodel.__main__ import main as perfmodel_main
    from prunex.perfmodel.calibrate import compute_per_sample, load_cluster
    from prunex.perfmodel.measured import model_compute_per_sample

    root = Path(__file__).resolve().parents[1]
    cluster_file = root / "saved-logs/local/perfmodel/minicluster-2node-1gbit.json"
    run = root / "saved-logs/local/strong_scaling/hsadmm-resnet20-1x2"
    argv = ["project", "--cluster", str(cluster_file), "--model", "resnet20", "--dataset", "digits", "--gpus", "2,4"]
    argv += ["--extend-to", "0", "--batch-size", "32", "--local-epochs", "1", "--compute-from-run", str(run)]
    assert perfmodel_main([*argv, "--out", str(tmp_path)]) == 0
    cluster = load_cluster(cluster_file)
    want = model_compute_per_sample(run, cluster.mem_bw, cluster.launch_s)
    assert want < compute_per_sample(run)  # the run's own work is taken off
    printed = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("compute per sample from"))
    assert printed.endswith(f"{want * 1e3:.4f} ms"), printed
    table = pd.read_csv(next(tmp_path.glob("projection_*.csv")))
    got = table[(table["method"] == "ddp") & (table["gpus"] == 2)]
    assert got["compute_s"].iloc[0] == pytest.approx(want * got["shard"].iloc[0], rel=1e-9)
