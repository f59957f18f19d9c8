"""Iteration-time validation (`prunex.perfmodel.iterations`): compute + exposed communication on fixture runs."""

from __future__ import annotations

import pandas as pd
import pytest

from prunex.comm.cost import ddp_bucket_sizes, topk_count
from prunex.perfmodel import calibrate, measured
from prunex.perfmodel.__main__ import main
from prunex.perfmodel.formulas import Link, Network
from prunex.perfmodel.iterations import CSV_NAME, ITERATION_COLUMNS, validate_iterations
from prunex.perfmodel.workload import Device, Options, model_spec
from prunex.training.config import DDPConfig
from tests.fixtures.perfmodel.runs import write_run

# A sweep at one process per node on links shaped to 30 Mbit/s: inter and flat groups of two members,
# no intra level. Alpha per call 2 ms: 2 ring steps of 1 ms for an allreduce, 1 of 2 ms for a (tree) broadcast.
ALPHA_CALL, BETA = 2e-3, 30e6 / 8
STEP = Link(ALPHA_CALL / 2, BETA)
NET = Network(STEP, STEP, STEP, Link(ALPHA_CALL, BETA), STEP, broadcast_algo="tree")
SMALL_BUCKETS = {"ddp": DDPConfig(bucket_cap_mb=0.25)}  # several DDP buckets, so some overlap the backward pass


def fit_table(intra: bool = False) -> pd.DataFrame:
    """The sweep's fit table (alpha per call, bus bandwidth), as `prunex.bench.collectives` writes it."""
    rows = [
        {"level": level, "op": op, "alpha_s": ALPHA_CALL, "beta_bytes_per_s": BETA, "members": 2}
        for level in ("inter", "flat")
        for op in ("allreduce", "broadcast")
    ]
    if intra:  # a sweep at 2 processes per node has the intra level too
        rows += [
            {"level": "intra", "op": op, "alpha_s": 1e-4, "beta_bytes_per_s": 1e9, "members": 2}
            for op in ("allreduce", "broadcast")
        ]
    return pd.DataFrame(rows)


def ddp_by_hand(compute_s: float) -> tuple[float, float]:
    """(comm, hidden) seconds of a DDP step on 2 nodes x 1 process, by the ring formula and Li et al.'s overlap."""
    spec = model_spec("resnet20")
    # in launch order: torch buckets the gradients as they become ready, the parameters reversed; the last bucket
    # holds the first layers and cannot overlap the backward pass
    buckets = ddp_bucket_sizes((4 * p.numel for p in reversed(spec.params)), int(0.25 * 2**20))
    t = [ALPHA_CALL + 2 * (2 - 1) / 2 * n / BETA for n in buckets]  # 2(p-1) alpha + 2(p-1)/p n / beta, p = 2
    comm = sum(t)
    return comm, min(comm - t[-1], 2 / 3 * compute_s)


def write_ddp_pair(root, compute_s: float = 0.5):
    comm, hidden = ddp_by_hand(compute_s)
    kw = {"link_model": "netns-tc", "network": NET, "config": SMALL_BUCKETS}
    write_run(root, "ddp", nodes=1, procs=1, iterations=3, compute_s=compute_s, **kw)
    run = write_run(root, "ddp", nodes=2, procs=1, iterations=4, compute_s=compute_s, hidden_s=hidden, **kw)
    return run, comm, hidden


def test_ddp_2x1_iteration_is_compute_plus_exposed_comm(tmp_path):
    run, comm, hidden = write_ddp_pair(tmp_path)
    assert hidden > 0.05  # the overlap is exercised
    measured = pd.read_parquet(run / "steps.parquet")["iter_s"]
    assert measured.iloc[1] == pytest.approx(0.5 + comm - hidden, rel=1e-9)  # the fixture's times are the hand model's
    df = validate_iterations(tmp_path, fit_table())
    assert list(df.columns) == ITERATION_COLUMNS
    assert len(df) == 1  # the 1x1 run gives compute, it is not validated
    r = df.iloc[0]
    assert (r.run_id, r.nodes, r.procs_per_node) == ("ddp-fixture-2x1", 2, 1)
    assert r.compute_source == "run ddp-fixture-1x1"
    assert r.compute_s_per_sample == pytest.approx(0.5 / 32)
    assert r.predicted_compute_s == pytest.approx(0.5)
    assert r.predicted_comm_s == pytest.approx(comm, rel=1e-9)
    assert r.predicted_hidden_s == pytest.approx(hidden, rel=1e-9)
    assert r.predicted_exposed_comm_s == pytest.approx(comm - hidden, rel=1e-9)
    assert abs(r.err_pct) < 1.0 and r.within
    assert r.measured_iter_s == pytest.approx(0.5 + comm - hidden)


def test_sweep_without_intra_level_prices_one_process_per_node_only():
    with pytest.raises(calibrate.CalibrationError, match="intra"):
        calibrate.network_from_fit(fit_table())
    net = calibrate.network_from_fit(fit_table(), intra_unused=True)
    assert (net.flat.alpha_s, net.flat.beta) == pytest.approx((ALPHA_CALL / 2, BETA))
    raw = measured.cluster_from_sweep(fit_table(), name="x", procs_per_node=1, device=(1e10, 1e-6))
    assert raw["intra"]["beta_bytes_per_s"]["status"] == "assumption"
    with pytest.raises(calibrate.CalibrationError, match="intra"):
        measured.cluster_from_sweep(fit_table(), name="x", procs_per_node=2, device=(1e10, 1e-6))


def test_cli_writes_the_csv_and_skips_two_processes_per_node(tmp_path, capsys):
    results = tmp_path / "results"
    write_ddp_pair(results)
    kw = {"link_model": "netns-tc", "network": NET, "iterations": 3}
    write_run(results, "ddp", nodes=1, procs=2, **kw)
    write_run(results, "ddp", nodes=2, procs=2, **kw)
    sweep = tmp_path / "collectives.fit.parquet"
    fit_table(intra=True).to_parquet(sweep, index=False)
    out = tmp_path / "out"
    base = ["validate-iterations", "--results", str(results), "--collectives", str(sweep)]
    assert main([*base, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "ddp-fixture-2x1" in printed and "1 of 1 predicted iteration times within 15%" in printed
    df = pd.read_csv(out / CSV_NAME)
    assert df["run_id"].tolist() == ["ddp-fixture-2x1"]  # 2x2 left out: 2 processes per node
    assert bool(df["within"].iloc[0])
    assert main([*base, "--procs-per-node", "2", "--out", str(out / "p2")]) == 0
    df2 = pd.read_csv(out / "p2" / CSV_NAME)
    assert df2["run_id"].tolist() == ["ddp-fixture-2x2"]
    assert df2["compute_source"].tolist() == ["run ddp-fixture-1x2"]
    capsys.readouterr()
    assert main([*base, "--min-nodes", "3", "--out", str(out / "none")]) == 2  # nothing to validate: one-line error
    assert "no runs on >= 3 nodes" in capsys.readouterr().err


def test_hsadmm_and_topk_from_named_compute_runs(tmp_path):
    kw = {"link_model": "netns-tc", "network": NET}
    # one outer iteration trains E epochs of the rank's shard: 1438 images at 1 x 1, 719 at 2 x 1
    hs1 = write_run(tmp_path / "c", "hsadmm", nodes=1, procs=1, iterations=3, compute_s=2.0, **kw)
    tk1 = write_run(tmp_path / "c", "topk", nodes=1, procs=1, iterations=3, compute_s=0.5, **kw)
    write_run(tmp_path / "r", "hsadmm", nodes=2, procs=1, iterations=4, compute_s=1.0, **kw)
    write_run(tmp_path / "r", "topk", nodes=2, procs=1, iterations=4, compute_s=0.5, **kw)
    df = validate_iterations(tmp_path / "r", fit_table(), compute_runs=[hs1, tk1]).set_index("method")
    assert df.loc["hsadmm", "predicted_compute_s"] == pytest.approx(1.0, rel=2e-3)  # 719 / 1438 x 2 s (rounding)
    assert df.loc["hsadmm", "predicted_overhead_s"] == pytest.approx(0.0, abs=1e-9)  # shrink/recover in its compute
    for m in ("hsadmm", "topk"):
        assert df.loc[m, "compute_source"].startswith("named run(s)")
        assert abs(df.loc[m, "err_pct"]) < 1.0
    # Top-K at 2 ranks scatters (world - 1) k more values than the compute run did: the change is added
    spec, opts, dev = model_spec("resnet20"), Options(), Device(0.0)
    k = sum(topk_count(p.numel, opts.topk_ratio) for p in spec.params if len(p.shape) > 1)
    extra = opts.random_access_bytes * k / dev.mem_bw + dev.launch_s
    assert df.loc["topk", "predicted_overhead_s"] == pytest.approx(extra, rel=1e-9)
