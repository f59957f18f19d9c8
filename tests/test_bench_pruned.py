"""benchmarks.pruned's refusals and its report of a `--rho-max` variant (the benchmark's runs are not run here)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from benchmarks import pruned

REPO = Path(__file__).resolve().parents[1]


def test_a_cap_below_the_initial_penalties_is_one_line_before_any_launch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "results"
    assert pruned.main(["--rho-max", "0.01", "--results", str(results)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "rho_intra must be in (0, rho_max=0.01]" in err[0], err
    assert not results.exists()


def test_a_runs_penalties_are_read_from_its_residual_table() -> None:
    """The regime logs' Pareto run at keep 1 (seed 0): rho_1 starts at its initial 0.05 and grows towards the cap
    while the mask is dynamic (`--rho-schedule grow`), then is reset at the freeze."""
    (run,) = (REPO / "saved-logs/regime/runs").glob("hsadmm-resnet20-fashion-mnist-2x2-s0-9667bbd3*")
    rho = [float(v) for v in pruned._final(run)["rho1_by_iteration"].split()]
    assert rho[0] == 0.05 and rho[1] > rho[0] and len(rho) == 6, rho


def test_a_variants_report_sets_each_seed_beside_its_own_dense_model() -> None:
    rows = [
        {"seed": s, "run": f"ddp-s{s}", "method": "ddp", "epochs": pruned.BUDGET_EPOCHS, "acc_pct": dense}
        for s, dense in ((0, 82.0), (1, 80.0))
    ] + [
        {
            "seed": s,
            "run": f"hsadmm-keep0.5-rhomax0.2-s{s}",
            "method": "hsadmm",
            "epochs": pruned.BUDGET_EPOCHS,
            "acc_pct": acc,
            "froze_after": 2,
            "freeze_reason": "T_freeze",
            "drift_zero_from": 1.0,
            "rho1_by_iteration": "0.05 0.08",
        }
        for s, acc in ((0, 79.0), (1, 78.5))
    ]
    (dense, line) = pruned.variant_lines(pd.DataFrame(rows), (0.5,), 0.2)
    assert dense == "dense DDP: median 81.0% (range 80.0-82.0)"
    assert "keep 0.5, rho_max 0.2 (variant, no target): H-SADMM median 78.8% (range 78.5-79.0)" in line
    assert "2.2 points below dense (per seed 3.0, 1.5)" in line and "froze after iteration 2, 2" in line, line
