"""The regime-matched profile (issue 16): the target share, the link rate it implies, the probe, the profile."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest

from experiments import cli, latency, strong_scaling
from experiments.common import profile
from prunex.cluster import regime
from prunex.comm import cost as commcost
from prunex.training.config import RunConfig


def test_target_share_is_the_papers_ddp_comm_over_its_iteration() -> None:
    puhti = json.loads(regime.PUHTI_FILE.read_text())["compute_s_per_sample"]["resnet152"]
    compute = 128 * puhti["value"]  # sec. 5.1.5: batch 128 per GPU
    t = regime.target_share()
    assert t["paper_compute_s"] == pytest.approx(compute)
    assert t["target_share"] == pytest.approx(0.50 / (0.50 + compute))  # sec. 5.3.2: 0.50 s of DDP comm
    assert 0.60 < t["target_share"] < 0.61
    assert t["paper_compute_status"] == "estimate"  # said wherever the number is used


def test_chosen_rate_gives_ddp_the_target_share() -> None:
    """At the chosen rate the ring model's DDP step takes compute x s / (1 - s): comm / (comm + compute) = s."""
    buckets = [1_000_000, 89_896]
    compute, share = 0.4, 0.6
    chosen = regime.choose_bandwidth(compute, buckets, 4, share, alpha_s=1e-4)
    link = commcost.Link(1e-4, chosen["bandwidth_bits_per_s"] / 8)
    comm = sum(commcost.collective_time("allreduce", b, 4, link) for b in buckets)
    assert comm / (comm + compute) == pytest.approx(share)
    with pytest.raises(ValueError, match="latency alone"):
        regime.choose_bandwidth(1e-6, buckets, 4, share, alpha_s=1e-3)


def test_ddp_step_bytes_of_resnet20_on_2x2() -> None:
    """ResNet-20's 272,474 fp32 gradients in one DDP bucket; on 2 x 2 the node link carries 2 (N-1)/N of them."""
    link_bytes, buckets = regime.ddp_step_bytes("resnet20", 2, 2)
    assert buckets == [272_474 * 4]
    assert link_bytes == pytest.approx(1.5 * 272_474 * 4)
    assert regime.ddp_step_bytes("resnet20", 1, 2)[0] == 0.0  # one node: no link


def test_probe_measures_bound_processes(tmp_path: Path) -> None:
    r = regime.probe_compute(1, 1, data_root=str(tmp_path / "data"), iterations=2, warmup=1)
    assert r["compute_s"] > 0 and len(r["per_rank_s"]) == 1
    if hasattr(os, "sched_getaffinity"):
        assert r["cores_used"][0] in os.sched_getaffinity(0)


def test_regime_profile() -> None:
    r = {"bandwidth_mbit": 25.0}
    p = profile("regime", "local", r)
    assert p.link.model == "alpha-beta" and p.link.bandwidth_gbit == pytest.approx(0.025)
    assert profile("regime", "slurm", r).link.model == "none"  # the mini cluster's tc shapes the links
    runs = strong_scaling.runs(p)
    assert {(c.nodes, c.procs_per_node) for c in runs} == {(1, 1), (2, 1)}  # 1 process per node
    assert all(c.bind_cores for c in runs)
    seeds = sorted({c.seed for c in latency.runs(p)})
    assert seeds == [0, 1, 2]
    assert {c.name for c in latency.runs(p) if c.seed == 0} == {c.name for c in latency.runs(profile("local"))}
    # seed 0's latency runs are time_to_accuracy's: one training
    from experiments import time_to_accuracy

    # time to accuracy runs on the profile's accuracy dataset (Fashion-MNIST), latency on digits: both in the
    # regime's topology and link
    tta = {c.method: c for c in time_to_accuracy.runs(p)}
    assert {c.dataset for c in tta.values()} == {"fashion-mnist"} and {c.dataset for c in latency.runs(p)} == {"digits"}
    assert all(c.link == p.link and (c.nodes, c.procs_per_node) == (2, 2) for c in tta.values())


def test_bind_cores_is_not_part_of_a_runs_identity() -> None:
    c = RunConfig(method="ddp")
    assert dataclasses.replace(c, bind_cores=True).training_key() == c.training_key()


def test_regime_profile_refuses_to_run_without_its_rate(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    args = cli.parser("latency", None).parse_args(["--profile", "regime", "--results", str(tmp_path)])
    configs = cli.resolve("latency", latency.runs, "regime", None, str(tmp_path))
    assert cli.run_experiments({"latency": configs}, args, "latency", cli.slurm_options(args)) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "python -m prunex.cluster.regime probe" in err
    assert list(tmp_path.iterdir()) == []  # nothing written
