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


def test_the_link_free_pareto_runs_at_the_local_link_in_the_regime_profile(capsys: pytest.CaptureFixture) -> None:
    """The Pareto's accuracies and FLOPs do not depend on the link (experiments.common.LINK_FREE): the regime
    profile runs it at the local profile's link, modelled with the local executor; on Slurm the links are the
    cluster's, which ./run_all.sh reshapes to the same rate (experiments/run_all.py, stdlib only, keeps copies)."""
    from experiments import all as all_experiments
    from experiments import common, pareto, run_all

    r = {"bandwidth_mbit": 25.0}
    local = profile("regime", "local", r)
    assert {c.link for c in pareto.runs(local)} == {profile("local").link} != {local.link}
    assert all(c.bind_cores for c in pareto.runs(local))  # still one run at a time, bound: its bench is timed
    assert {c.link for c in latency.runs(local)} == {local.link}  # what is timed keeps the regime's link
    slurm = profile("regime", "slurm", r)
    assert {c.link for c in pareto.runs(slurm)} == {slurm.link}  # the cluster's links: not modelled
    assert {c.link for c in pareto.runs(profile("local"))} == {profile("local").link}
    assert run_all.LOCAL_INTER_BW == common.LOCAL_TC_RATE and run_all.LINK_FREE == common.LINK_FREE
    # ./run_all.sh leaves them out of experiments.all (--skip) and runs them after the others
    assert all_experiments.main(["--profile", "smoke", "--only", "pareto", "--skip", "pareto"]) == 0
    assert "nothing to run" in capsys.readouterr().out
    assert all_experiments.main(["--profile", "smoke", "--skip", "pareto,volume", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "[pareto]" not in out and "[volume]" not in out and "[latency]" in out


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


class _Recorder:
    """Children (experiments/run_all.py) that start nothing: each command is recorded as its module and
    arguments and succeeds; no Slurm answers."""

    def __init__(self) -> None:
        self.env, self.cluster_dir, self.calls = {"PATH": os.environ.get("PATH", "")}, None, []

    def _record(self, cmd: list[str]) -> int:
        self.calls.append(cmd[cmd.index("-m") + 1 :] if "-m" in cmd else cmd)
        return 0

    def step(self, cmd: list[str], stdout: int | None = None, stderr: int | None = None) -> int:
        return self._record(cmd)

    def run(self, cmd: list[str], stdout: int | None = None) -> int:
        return self._record(cmd)

    def output(self, cmd: list[str]) -> tuple[int, str]:
        return self._record(cmd), ""

    def which(self, name: str) -> str | None:
        return None if name == "sinfo" else f"/usr/bin/{name}"


@pytest.mark.parametrize("profile_name, only", [("regime", ""), ("regime", "pareto"), ("local", "")])
def test_run_all_runs_the_link_free_experiments_last_on_reshaped_links(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, profile_name: str, only: str
) -> None:
    """The main job's steps on a mini cluster: the regime profile leaves the Pareto out of experiments.all,
    then reshapes the node links to the local profile's rate and runs it; the local profile runs it in place."""
    from experiments import run_all

    (tmp_path / "regime.json").write_text(json.dumps({"tc_rate": "27733kbit", "bandwidth_mbit": 27.733}))
    monkeypatch.setattr(run_all, "root_on_linux", lambda: True)
    kids = _Recorder()
    argv = ["--profile", profile_name, "--results", str(tmp_path)] + (["--only", only] if only else [])
    assert run_all.main_job(argv, kids) == 0
    modules = [c[0] for c in kids.calls]
    main = next(c for c in kids.calls if c[0] == "experiments.all" and "--dry-run" not in c)
    shape = ["prunex.minicluster", "shape", "--inter-bw", "1gbit", "--dir", str(run_all.CLUSTER_DIR)]
    if profile_name == "regime":
        up = next(c for c in kids.calls if c[:2] == ["prunex.minicluster", "up"])
        assert up[up.index("--inter-bw") + 1] == "27733kbit"  # everything else runs at the regime's rate
        assert main[-2:] == ["--skip", "pareto"]
        order = [m for m in modules if m in ("experiments.all", "experiments.wire_dtype", "experiments.pareto")]
        assert order[-1] == "experiments.pareto" and kids.calls.index(shape) == modules.index("experiments.pareto") - 1
        assert ("experiments.wire_dtype" in modules) == (only == "")
        assert modules.index("experiments.pareto") < kids.calls.index(
            ["prunex.minicluster", "down", "--dir", str(run_all.CLUSTER_DIR)]
        )
    else:
        assert "--skip" not in main and shape not in kids.calls and "experiments.pareto" not in modules


def test_the_probe_times_the_runs_the_regime_profile_times(monkeypatch: pytest.MonkeyPatch) -> None:
    """Review (2026-11-28): ./run_all.sh probed ResNet-20 on digits whatever PRUNEX_LOCAL_DATASET said, so with another
    dataset the link rate was chosen from the compute of images the timed runs never trained on."""
    from experiments import run_all

    parser_defaults = vars(regime.build_parser().parse_args(["probe", "--out", "x"]))
    monkeypatch.delenv("PRUNEX_LOCAL_DATASET", raising=False)
    timed = profile("regime", "local", {"bandwidth_mbit": 25.0})
    assert (parser_defaults["model"], parser_defaults["dataset"]) == (timed.model, timed.dataset)
    assert (parser_defaults["nodes"], parser_defaults["procs_per_node"]) == (timed.nodes, timed.procs_per_node)
    assert "--dataset" not in run_all.probe_command("R", {})
    monkeypatch.setenv("PRUNEX_LOCAL_DATASET", "fashion-mnist")
    assert profile("regime", "local", {"bandwidth_mbit": 25.0}).dataset == "fashion-mnist"
    cmd = run_all.probe_command("R", {"PRUNEX_LOCAL_DATASET": "fashion-mnist"})
    assert cmd[cmd.index("--dataset") + 1] == "fashion-mnist" and cmd[cmd.index("--out") + 1] == "R/regime.json"


def test_the_mini_clusters_alpha_per_ring_step_is_the_saved_sweeps() -> None:
    """MINICLUSTER_ALPHA_S names its source: the flat AllReduce's fitted alpha in the saved 2 x 2 sweep, per ring step
    (review 2026-11-28: the 63 us it said came from that file was in no column of it)."""
    import pandas as pd

    root = Path(__file__).resolve().parents[1]
    fit = pd.read_parquet(root / "saved-logs/perfmodel/minicluster-2x2/collectives.fit.parquet")
    flat = fit[(fit["level"] == "flat") & (fit["op"] == "allreduce")].iloc[0]
    per_step = flat["alpha_s"] / commcost.ring_steps("allreduce", int(flat["members"]))
    assert regime.MINICLUSTER_ALPHA_S == pytest.approx(per_step, rel=0.005)
