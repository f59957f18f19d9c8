"""Wait-free communication time (prunex.comm.waitfree) and what the analysis builds on it, on hand-computed tables.

Per call the last arriver's seconds (the group's minimum), the rest each member's wait; concurrent
groups' maximum on the critical path; Fig. 8's wait category; Fig. 7's wait-free column; the per-sync
ratio claim per repeat and its "not decidable here" verdict; the regime check (within / outside).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from fixtures.logs import write_run

from analysis import fig7_latency, fig8_latency_breakdown, report
from analysis.common import load_experiment, read_regime, regime_caption
from analysis.measurements import Logs
from analysis.verdicts import NOT_DECIDABLE, NOT_REGIME_MATCHED, OUTSIDE, WITHIN, regime_table, regime_verdict
from prunex.comm.waitfree import last_arriver_comm, per_call, wait_split

REGIME = {
    "target_share": 0.6044,
    "paper_ddp_comm_s": 0.50,
    "paper_compute_s": 0.3273,
    "paper_compute_status": "estimate",
    "derivation": "0.50 s DDP communication (sec. 5.3.2) over 0.50 + 0.33 s",
    "probe": {"compute_s": 0.31, "iterations": 20, "nodes": 2, "procs_per_node": 2, "cores": 2},
    "ddp_link_bytes": 1634800,
    "predicted_ddp_comm_s": 0.47,
    "bandwidth_mbit": 27.9,
    "tc_rate": "27900kbit",
    "oversubscription": "4 processes on 2 cores (2 per core)",
    "binding": "one core per process, round robin",
    "hardware": "AMD EPYC",
    "created": "2026-11-25T00:00:00",
}


def _call(iteration: int, rank: int, node: int, level: str, op: str, seconds: float) -> dict:
    return {
        "run_id": "x",
        "link_model": "alpha-beta",
        "iteration": iteration,
        "rank": rank,
        "node": node,
        "level": level,
        "op": op,
        "bytes": 1000,
        "seconds": seconds,
        "inter_bytes": 0.0,
        "intra_bytes": 0.0,
    }


def test_one_allreduce_two_ranks() -> None:
    comm = pd.DataFrame([_call(0, 0, 0, "flat", "allreduce", 0.3), _call(0, 1, 1, "flat", "allreduce", 0.1)])
    c = per_call(comm).set_index("rank")
    assert c["waitfree_s"].tolist() == pytest.approx([0.1, 0.1])
    assert c.loc[0, "wait_s"] == pytest.approx(0.2) and c.loc[1, "wait_s"] == pytest.approx(0.0)
    assert last_arriver_comm(comm).tolist() == pytest.approx([0.1])


def _hierarchy() -> pd.DataFrame:
    """2 nodes x 2 ranks, one iteration: a barrier, the nodes' intra AllReduces side by side, the leaders'
    inter AllReduce, a broadcast per node."""
    rows = []
    for rank, barrier in enumerate((2.0, 0.01, 1.0, 0.5)):
        rows.append(_call(0, rank, rank // 2, "flat", "barrier", barrier))
    for rank, s in enumerate((0.5, 0.2, 0.4, 0.3)):  # node 0: min 0.2; node 1: min 0.3
        rows.append(_call(0, rank, rank // 2, "intra", "allreduce", s))
    rows += [_call(0, 0, 0, "inter", "allreduce", 0.6), _call(0, 2, 1, "inter", "allreduce", 0.7)]
    for rank, s in enumerate((0.05, 0.08, 0.04, 0.04)):  # node 0: min 0.05; node 1: min 0.04
        rows.append(_call(0, rank, rank // 2, "intra", "broadcast", s))
    return pd.DataFrame(rows)


def test_concurrent_groups_take_the_slowest_minimum_and_barriers_are_wait() -> None:
    comm = _hierarchy()
    # intra: max(0.2, 0.3); inter: 0.6; broadcast: max(0.05, 0.04); barrier: min 0.01
    assert last_arriver_comm(comm, exclude_ops=("barrier",)).tolist() == pytest.approx([0.3 + 0.6 + 0.05])
    assert last_arriver_comm(comm).tolist() == pytest.approx([0.3 + 0.6 + 0.05 + 0.01])  # the perf model's view
    split = wait_split(comm)
    assert (split["own_s"] + split["wait_s"]).tolist() == pytest.approx(split["seconds"].tolist())
    barrier = split[split["op"] == "barrier"]
    assert barrier["own_s"].tolist() == [0.0] * 4 and barrier["wait_s"].tolist() == pytest.approx([2.0, 0.01, 1.0, 0.5])
    intra = split[(split["level"] == "intra") & (split["op"] == "allreduce")].set_index("rank")
    assert intra["own_s"].tolist() == pytest.approx([0.2, 0.2, 0.3, 0.3])
    assert intra["wait_s"].tolist() == pytest.approx([0.3, 0.0, 0.1, 0.0])


def test_the_sharded_exchanges_groups_are_one_per_local_rank() -> None:
    """Review (2026-11-28): the sharded exchange's AllReduces (level `shard`, one group per local rank across
    the nodes, running side by side) were lumped into one group of all ranks, which took the minimum over every
    rank instead of the slowest group's minimum, understating PruneX's wait-free time."""
    comm = pd.DataFrame(
        [
            _call(0, r, r // 2, "shard", "allreduce", s) | {"local_rank": r % 2}
            for r, s in enumerate((0.1, 0.9, 0.5, 0.8))
        ]
    )
    c = per_call(comm).set_index("rank")
    assert c["group"].tolist() == [0, 1, 0, 1]  # ranks 0, 2 (local rank 0) and 1, 3 (local rank 1)
    assert c["waitfree_s"].tolist() == pytest.approx([0.1, 0.8, 0.1, 0.8])
    assert last_arriver_comm(comm).tolist() == pytest.approx([0.8])  # max(min(.1, .5), min(.9, .8))


def test_fig8_categories_are_wait_free_and_wait_is_its_own() -> None:
    per_rank = fig8_latency_breakdown.seconds_per_rank(_hierarchy())
    cat = fig8_latency_breakdown.CATEGORIES
    inter, intra, bcast, other, wait = cat
    assert per_rank[inter].tolist() == pytest.approx([0.6, 0.0, 0.6, 0.0])
    assert per_rank[intra].tolist() == pytest.approx([0.2, 0.2, 0.3, 0.3])
    assert per_rank[bcast].tolist() == pytest.approx([0.05, 0.05, 0.04, 0.04])
    assert per_rank[other].tolist() == pytest.approx([0.0] * 4)
    # rank 0: barrier 2.0 + intra 0.3 + broadcast 0; rank 2: barrier 1.0 + intra 0.1 + inter 0.1
    assert per_rank[wait].tolist() == pytest.approx([2.3, 0.01 + 0.03, 1.0 + 0.1 + 0.1, 0.5])
    assert per_rank.sum(axis=1).tolist() == pytest.approx(_hierarchy().groupby("rank")["seconds"].sum().tolist())


def _latency_run(root: Path, method: str, seed: int, seconds: tuple[float, ...], iterations: int = 4) -> Path:
    """A latency run whose every iteration holds one flat AllReduce with these per-rank seconds (iteration 0
    doubled, to check that medians leave it out)."""
    name = f"{method}-resnet20" + (f"-s{seed}" if seed else "")
    run = write_run(root, "latency", method, iterations=iterations, name=name)
    config = json.loads((run / "config.json").read_text())
    (run / "config.json").write_text(json.dumps(config | {"seed": seed}))
    rows = [
        _call(k, rank, rank // 2, "flat", "allreduce", s * (2 if k == 0 else 1))
        for k in range(iterations)
        for rank, s in enumerate(seconds)
    ]
    pd.DataFrame(rows).assign(run_id=name).to_parquet(run / "comm.parquet", index=False)
    return run


def test_fig7_plots_the_wait_free_time_and_keeps_the_old_columns(tmp_path: Path) -> None:
    _latency_run(tmp_path, "ddp", 0, (0.5, 0.1, 0.2, 0.3))
    df, _ = fig7_latency.compute(load_experiment(tmp_path, "latency"))
    assert df["waitfree_comm_s"].tolist() == pytest.approx([0.2, 0.1, 0.1, 0.1])
    steps = pd.read_parquet(tmp_path / "latency" / "ddp-resnet20" / "steps.parquet")
    assert df["comm_s"].tolist() == pytest.approx(steps["comm_s"].tolist())  # mean over ranks, as before
    assert fig7_latency.medians(df)["ddp"] == pytest.approx(0.1)  # iteration 0 left out


def _claim(table: pd.DataFrame, claim: str) -> pd.Series:
    return table.set_index("claim_id").loc[claim]


def test_per_sync_ratio_is_judged_per_repeat(tmp_path: Path) -> None:
    # seed 0: DDP 0.5 s / PruneX 0.1 s = 5x; seed 1: 0.5 / 0.2 = 2.5x (outside +-25%)
    for seed, px in ((0, 0.1), (1, 0.2)):
        _latency_run(tmp_path, "ddp", seed, (0.9, 0.5, 0.7, 0.6))
        _latency_run(tmp_path, "hsadmm", seed, (px, px + 0.3, px + 0.1, px))
    table, _ = report.write_report(tmp_path, tmp_path / "figures")
    row = _claim(table, "latency_per_sync_ratio")
    assert row["verdict"] == NOT_DECIDABLE
    assert (row["measured_min"], row["measured_max"], row["repeats"]) == (pytest.approx(2.5), pytest.approx(5.0), 2)
    assert row["measured_value"] == pytest.approx(3.75)  # the median of the repeats
    assert "seed 0: 5 reproduced" in row["detail"] and "seed 1: 2.5 not reproduced" in row["detail"]
    assert row["tolerance"] == "+-25%" and "factor claim" in row["tolerance_reason"]
    text = (tmp_path / "figures" / "REPORT.md").read_text()
    assert "1 not decidable here" in text and "(2.5-5, n=2)" in text
    # both repeats inside the band: reproduced, with the spread
    _latency_run(tmp_path, "hsadmm", 2, (0.11,) * 4)
    _latency_run(tmp_path, "ddp", 2, (0.5,) * 4)
    shutil.rmtree(tmp_path / "latency" / "hsadmm-resnet20-s1")
    shutil.rmtree(tmp_path / "latency" / "ddp-resnet20-s1")
    row = _claim(report.claims_table(Logs(tmp_path)), "latency_per_sync_ratio")
    assert row["verdict"] == report.REPRODUCED and row["repeats"] == 2
    assert row["measured_min"] == pytest.approx(0.5 / 0.11) and row["measured_max"] == pytest.approx(5.0)


def test_single_runs_are_one_repeat(tmp_path: Path) -> None:
    _latency_run(tmp_path, "ddp", 0, (0.9, 0.5, 0.7, 0.6))
    _latency_run(tmp_path, "hsadmm", 0, (0.2, 0.3, 0.2, 0.2))
    row = _claim(report.claims_table(Logs(tmp_path)), "latency_per_sync_ratio")
    assert row["verdict"] == report.NOT_REPRODUCED and row["measured_value"] == pytest.approx(2.5)
    assert row["repeats"] == 1


def test_regime_verdicts() -> None:
    assert regime_verdict(0.6, [0.6 * 1.25]) == WITHIN
    assert regime_verdict(0.6, [0.6 * 0.74]) == OUTSIDE
    assert regime_verdict(0.6, [0.5, 0.3]) == NOT_DECIDABLE  # 0.5 within, 0.3 outside
    assert regime_verdict(0.6, [0.5, 0.55]) == WITHIN


def _ddp_share_run(root: Path, waitfree: float, iter_s: float = 1.0) -> None:
    """A time_to_accuracy DDP run whose wait-free comm is `waitfree` s per step and iter_s `iter_s`."""
    run = write_run(root, "time_to_accuracy", "ddp", iterations=5, iter_s=iter_s)
    rows = [
        _call(k, rank, rank // 2, "flat", "allreduce", waitfree + 0.1 * rank + (1.0 if k == 0 else 0.0))
        for k in range(5)
        for rank in range(4)
    ]
    pd.DataFrame(rows).to_parquet(run / "comm.parquet", index=False)


def test_regime_share_within_and_outside(tmp_path: Path) -> None:
    results = tmp_path / "regime"
    _ddp_share_run(results, waitfree=0.5)  # share 0.5 / 1.0 = 50%: within 25% of 60.44%
    (results / "regime.json").write_text(json.dumps(REGIME))
    row = regime_table(Logs(results)).iloc[0]
    assert row["measured_share"] == pytest.approx(0.5) and row["verdict"] == WITHIN
    assert row["bandwidth_mbit"] == pytest.approx(27.9) and row["probe_compute_s"] == pytest.approx(0.31)
    report.write_report(results, tmp_path / "out")
    text = (tmp_path / "out" / "REPORT.md").read_text()
    assert "## Regime" in text and "| chosen inter-node bandwidth | 27.9 Mbit/s (tc rate 27900kbit) |" in text
    assert "**within**" in text
    assert pd.read_csv(tmp_path / "out" / "regime.csv")["verdict"].tolist() == [WITHIN]

    local = tmp_path / "local"
    _ddp_share_run(local, waitfree=0.2)  # 20%: outside; and no regime.json
    row = regime_table(Logs(local)).iloc[0]
    assert row["measured_share"] == pytest.approx(0.2) and row["verdict"] == NOT_REGIME_MATCHED
    (local / "regime.json").write_text(json.dumps(REGIME))
    assert regime_table(Logs(local)).iloc[0]["verdict"] == OUTSIDE
    (local / "regime.json").unlink()
    report.write_report(local, tmp_path / "out2")
    text = (tmp_path / "out2" / "REPORT.md").read_text()
    assert "**not regime-matched**" in text and "**20.0%**" in text


def test_regime_caption_line(tmp_path: Path) -> None:
    assert regime_caption(None) == ""
    assert regime_caption(REGIME) == (
        "regime: DDP comm share target 60% (paper: 0.50 s comm / 0.33 s V100 compute, estimate), probe compute "
        "0.31 s/iteration, inter-node link 27.9 Mbit/s (tc), 2 x 2 runs: 4 processes on 2 cores (2 per core); "
        "1 process per node: one core each"
    )
    run = write_run(tmp_path, "latency", "ddp", iterations=2)
    runs = load_experiment(tmp_path, "latency").runs
    assert read_regime(tmp_path, runs) is None
    meta = json.loads((run / "meta.json").read_text())
    (run / "meta.json").write_text(json.dumps(meta | {"regime": REGIME}))
    assert read_regime(tmp_path, load_experiment(tmp_path, "latency").runs) == REGIME
    # runs at the regime's rate (meta.json link_mbit, read from tc) add nothing; runs at another rate (the regime
    # profile's link-free Pareto, at the local profile's 1 Gbit/s) say which
    for mbit, extra in ((27.9, ""), (1000.0, "; the runs shown had 1000 Mbit/s links instead")):
        (run / "meta.json").write_text(json.dumps(meta | {"regime": REGIME, "link_mbit": mbit}))
        assert regime_caption(REGIME, load_experiment(tmp_path, "latency").runs) == regime_caption(REGIME) + extra


def test_every_caption_names_the_regime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from analysis import common
    from analysis.measurements import SPECS

    _latency_run(tmp_path, "ddp", 0, (0.5, 0.1, 0.2, 0.3))
    (tmp_path / "regime.json").write_text(json.dumps(REGIME))
    captions: list[list[str]] = []
    monkeypatch.setattr(common, "add_caption", lambda fig, lines: captions.append(lines))
    for spec in SPECS:  # one real figure, the others placeholders: each says it
        common.render(spec, tmp_path, tmp_path / "figures")
    assert len(captions) == len(SPECS)
    assert all(regime_caption(REGIME) in lines for lines in captions)


def test_a_damaged_regime_file_is_refused_in_one_line(tmp_path: Path) -> None:
    from analysis.common import InputError, check_results

    _latency_run(tmp_path, "ddp", 0, (0.5, 0.1, 0.2, 0.3))
    (tmp_path / "regime.json").write_text("{not json")
    with pytest.raises(InputError, match="regime.json"):
        check_results(tmp_path, ["latency"])


def test_report_sections_of_the_model_validation_and_the_exchange_bench(tmp_path: Path) -> None:
    """The report quotes the perf model's iteration-time validation and the issue-18 exchange rows when their
    tables lie under RESULTS (written by run_all.sh and prunex.bench.exchange --out)."""
    from analysis.report import exchange_section, model_validation_section

    results, out = tmp_path / "r", tmp_path / "o"
    (results / "perfmodel").mkdir(parents=True)
    (results / "bench").mkdir()
    out.mkdir()
    assert model_validation_section(results, out) == [] and exchange_section(results, out) == []
    pd.DataFrame(
        [
            {
                "run_id": "ddp-resnet20-2x1",
                "predicted_compute_s": 0.1,
                "predicted_exposed_comm_s": 0.3,
                "predicted_iter_s": 0.4,
                "measured_iter_s": 0.42,
                "err_pct": -4.8,
                "compute_source": "run ddp-1x1",
            },
            {
                "run_id": "topk-resnet20-2x1",
                "predicted_compute_s": 0.1,
                "predicted_exposed_comm_s": 0.01,
                "predicted_iter_s": 0.11,
                "measured_iter_s": 0.2,
                "err_pct": -45.0,
                "compute_source": "run topk-1x1",
            },
        ]
    ).to_csv(results / "perfmodel" / "iteration_validation.csv", index=False)
    text = "\n".join(model_validation_section(results, out))
    assert "**1 of 2 within 15%**" in text and "-45.0%" in text
    how = "measured on the mini Slurm cluster"
    rows = [
        ("DDP step (fp32 gradients)", 1.6e6, 0.5),
        ("PruneX, paper (leader, fp32)", 0.6e6, 0.2),
        ("all together", 0.3e6, 0.09),
        ("+ --wire-dtype bf16", 0.3e6, 0.0625),
    ]
    pd.DataFrame(
        [
            {
                "row": n,
                "bytes_per_node_link": b,
                "inter_s": t,
                "bytes_x_less_than_ddp": 1.6e6 / b,
                "time_x_less_than_ddp": 0.5 / t,
                "how": how,
            }
            for n, b, t in rows
        ]
    ).to_csv(results / "bench" / "exchange.csv", index=False)
    lines = exchange_section(results, out)
    verdicts = {ln.split(" | ")[0].strip("| "): ln.split("**")[-2] for ln in lines if ln.count("**") == 2}
    assert verdicts == {  # 2.5x, 5.56x, 8x against 5x +-25% (3.75x-6.25x)
        "PruneX, paper (leader, fp32)": "not reproduced",
        "all together": "reproduced",
        "+ --wire-dtype bf16": "exceeded",
    }
    assert (out / "exchange.csv").exists() and (out / "model_validation.csv").exists()
