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


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--budget-scale", "0"], "--budget-scale must be a whole number >= 1, got 0"),
        (["--budget-scale", "2", "--rho-max", "0.2"], "--budget-scale and --rho-max are variants of their own"),
        (["--keeps", "1", "--method", "ddp"], "--method must be one of hsadmm, flat_admm, got 'ddp'"),
        (
            ["--keeps", "1", "--admm", "rho_schedule"],
            "--admm takes FIELD=VALUE with FIELD an ADMMConfig field, got 'rho_schedule'",
        ),
        (
            ["--keeps", "1", "--admm", "retrain_epochs=9"],
            "--admm retrain_epochs: the budget and the keep are the benchmark's",
        ),
        (
            ["--keeps", "1", "--admm", "channel_keep=0.3"],
            "--admm channel_keep: the budget and the keep are the benchmark's",
        ),
        (["--keeps", "1", "--admm", "adaptive_rho=1"], "--admm adaptive_rho takes true or false, got '1'"),
        (["--keeps", "1", "--admm", "rho_intra=big"], "--admm rho_intra takes a float, got 'big'"),
        (["--keeps", "1", "--admm", "rho_schedule=fast"], "rho_schedule must be one of grow, balance, got 'fast'"),
        (["--keeps", "1", "--admm", "layers=conv*"], "--admm layers: not a variant this benchmark runs"),
        (
            ["--keeps", "1", "--admm", "rho_max=0.2", "--rho-max", "0.2"],
            "--rho-max and --method/--admm are variants of their own",
        ),
        (
            ["--keeps", "0.5", "--localsgd-on-hsadmm-mask", "--method", "flat_admm"],
            "--localsgd-on-hsadmm-mask goes with the fixed configuration's H-SADMM runs, not a variant",
        ),
    ],
)
def test_a_bad_variant_is_one_line_before_any_launch(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "results"
    assert pruned.main([*argv, "--results", str(results)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert not results.exists()


def test_the_budget_variant_scales_every_epoch_count_after_the_start() -> None:
    admm = pruned.scaled_admm(2, channel_keep=0.5)
    assert (admm.iterations, admm.freeze_iteration, admm.retrain_epochs) == (10, 6, 6)
    assert admm.iterations * admm.local_epochs + admm.retrain_epochs == 2 * pruned.BUDGET_EPOCHS
    assert (admm.rho_intra, admm.rho_inter, admm.rho_max, admm.channel_keep) == (0.05, 0.005, pruned.ADMM.rho_max, 0.5)
    assert pruned.scaled_admm(1) == pruned.ADMM


def test_the_budget_variants_report_compares_runs_of_its_own_budget_and_judges_nothing() -> None:
    budget = 2 * pruned.BUDGET_EPOCHS
    rows = [  # the fixed budget's dense run of seed 0 is in the table too, and must not be read
        {"seed": 0, "run": "ddp-s0", "method": "ddp", "epochs": pruned.BUDGET_EPOCHS, "acc_pct": 70.0}
    ]
    for s, dense, hs, ptf in ((0, 84.0, 80.0, 82.0), (1, 83.0, 81.0, 81.5)):
        rows += [
            {"seed": s, "run": f"ddp-x2-s{s}", "method": "ddp", "epochs": budget, "acc_pct": dense},
            {
                "seed": s,
                "run": f"hsadmm-keep0.5-x2-s{s}",
                "method": "hsadmm",
                "epochs": budget,
                "acc_pct": hs,
                "froze_after": 3,
                "freeze_reason": "settled",
                "drift_zero_from": 1.0,
            },
            {"seed": s, "run": f"ptf-keep0.5-x2-s{s}", "method": "prune_finetune", "epochs": budget, "acc_pct": ptf},
        ]
    (dense, line), ok = pruned.verdicts(pd.DataFrame(rows), (0.5,), scale=2)
    assert dense == "dense DDP: median 83.5% (range 83.0-84.0)"
    assert "3.0 points below dense (per seed 4.0, 2.0; target <= 5, collapsed seeds none): variant, not judged" in line
    assert "vs prune-then-finetune -1.2 points (range -2.0 to -0.5" in line and "settled, settled" in line, line


def test_a_consensus_variant_has_typed_settings_and_run_names_of_its_own() -> None:
    plain = pruned.parse_variant("hsadmm", [])
    assert not plain and plain.run_name(1.0, "-x2", 0) == "hsadmm-keep1-x2-s0"  # the fixed configuration's run
    v = pruned.parse_variant("hsadmm", ["rho_schedule=balance", "adaptive_rho=false", "rho_mu=4"])
    assert v and v.overrides == (("rho_schedule", "balance"), ("adaptive_rho", False), ("rho_mu", 4.0))
    assert v.run_name(0.5, "", 2) == "hsadmm-keep0.5-rho-schedule=balance-adaptive-rho=False-rho-mu=4.0-s2"
    flat = pruned.parse_variant("flat_admm", [])
    assert flat and flat.run_name(1.0, "-x2", 1) == "flat-admm-keep1-x2-s1" and flat.label() == "flat_admm"
    for name in (v.run_name(0.5, "", 2), flat.run_name(1.0, "-x2", 1)):
        pruned._config(name, "hsadmm", 0, Path("r"), "")  # RunConfig accepts the name


def test_a_consensus_variants_report_compares_each_seed_with_the_fixed_configuration() -> None:
    budget = 2 * pruned.BUDGET_EPOCHS
    variant = pruned.parse_variant("flat_admm", [])
    rows = [{"seed": 0, "run": "ddp-s0", "method": "ddp", "epochs": pruned.BUDGET_EPOCHS, "acc_pct": 70.0}]
    for s, dense, fixed, var in ((0, 85.0, 78.0, 81.0), (1, 84.0, 79.0, 78.5)):
        rows += [
            {"seed": s, "run": f"ddp-x2-s{s}", "method": "ddp", "epochs": budget, "acc_pct": dense},
            {"seed": s, "run": f"hsadmm-keep1-x2-s{s}", "method": "hsadmm", "epochs": budget, "acc_pct": fixed},
            {
                "seed": s,
                "run": f"flat-admm-keep1-x2-s{s}",
                "method": "flat_admm",
                "epochs": budget,
                "acc_pct": var,
                "froze_after": 5,
                "freeze_reason": "T_freeze",
                "rho1_by_iteration": "0.05 0.1",
            },
        ]
    dense, fixed, line = pruned.consensus_lines(pd.DataFrame(rows), (1.0,), 2, variant)
    assert dense == "dense DDP: median 84.5% (range 84.0-85.0)"
    assert (
        fixed == "keep 1, the fixed configuration: H-SADMM median 78.5% (range 78.0-79.0), 6.0 points below dense "
        "(per seed 7.0, 5.0)"
    ), fixed
    assert "keep 1, flat_admm (variant, no target): median 79.8% (range 78.5-81.0), 4.8 points below dense" in line
    assert "(per seed 4.0, 5.5); against the fixed configuration +1.2 points (per seed +3.0, -0.5)" in line, line
    assert "froze after iteration 5, 5 (T_freeze, T_freeze)" in line, line


def test_the_mask_diagnostics_set_each_run_on_hsadmms_mask_beside_the_others() -> None:
    rows = [
        {"seed": s, "run": f"{p}-keep0.5-x2-s{s}", "acc_pct": acc}
        for s, accs in ((0, (77.0, 84.0, 82.0, 80.0)), (1, (76.0, 83.0, 83.5, 79.0)))
        for p, acc in zip(("hsadmm", "ptf", "ptfmask", "lsgdmask"), accs, strict=True)
    ]
    ptf, lsgd = pruned.mask_lines(pd.DataFrame(rows), (1.0, 0.5))  # keep 1 has no mask: no line
    assert (
        "keep 0.5, prune-then-finetune on H-SADMM's mask (diagnostic, no target): median 82.8% (range 82.0-83.5)" in ptf
    )
    assert "against H-SADMM +6.2 points (per seed +5.0, +7.5)" in ptf, ptf
    assert "against prune-then-finetune on its L1 mask -0.8 points (per seed -2.0, +0.5)" in ptf, ptf
    assert "same mask" not in ptf
    assert "keep 0.5, local SGD (one average per epoch) on H-SADMM's mask (diagnostic, no target): median 79.5%" in lsgd
    assert "against H-SADMM +3.0 points (per seed +3.0, +3.0)" in lsgd, lsgd
    assert "against prune-then-finetune on the same mask -3.2 points (per seed -2.0, -4.5)" in lsgd, lsgd
    only_ptf = pd.DataFrame([r for r in rows if not r["run"].startswith("lsgdmask")])
    assert pruned.mask_lines(only_ptf, (0.5,)) == [ptf]


def test_the_local_sgd_diagnostic_without_its_plugin_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if pruned.LOCAL_SGD_ON_MASK in pruned.METHOD_NAMES:
        pytest.skip("this pytest process was started with the example registered")
    results = tmp_path / "results"
    assert pruned.main(["--keeps", "0.5", "--localsgd-on-hsadmm-mask", "--results", str(results)]) == 2
    (err,) = capsys.readouterr().err.strip().splitlines()
    assert err == (
        "error: --localsgd-on-hsadmm-mask runs local_sgd_epoch_on_mask: set PRUNEX_METHODS=examples.local_sgd"
    )
    assert not results.exists()


def test_the_results_directory_is_named_before_the_first_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An hour of runs that stops half way (a failed run, Ctrl-C) leaves its finished runs in the results directory
    (by default a temporary one): the header names it, with the command that takes them up again."""

    def stopped(*args: object, **kwargs: object) -> list:
        raise KeyboardInterrupt

    monkeypatch.setattr(pruned, "load_dataset", lambda *a, **k: None)  # the data's refusals are tested above
    monkeypatch.setattr(pruned, "run_seed", stopped)
    with pytest.raises(KeyboardInterrupt):
        pruned.main(["--keeps", "0.5"])
    out = capsys.readouterr().out
    root = out.split("runs in ", 1)[1].split(" ", 1)[0]
    assert Path(root).is_dir() and f"with --results {root} finds the finished ones" in out, out
    Path(root).rmdir()
