"""analysis.compare_runs: runs paired by their training, not by their links, cadence or paths."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from analysis.compare_runs import CompareError, compare, main, summary


def _run(root: Path, name: str, losses: list[float], accs: list[float | None], **config) -> Path:
    run = root / name
    run.mkdir(parents=True)
    base = {"method": "ddp", "dataset": "digits", "seed": 0, "lr": 0.1, "results": str(root), "experiment": "x"}
    (run / "config.json").write_text(json.dumps(base | config))
    steps = pd.DataFrame(
        {
            "iteration": list(range(len(losses))),
            "train_loss": losses,
            "test_acc": accs,
            "wall_s": [10.0 * (i + 1) for i in range(len(losses))],
        }
    )
    steps.to_parquet(run / "steps.parquet")
    (run / "DONE").touch()
    return run


def test_runs_pair_by_training_and_report_what_is_equal(tmp_path: Path) -> None:
    new, saved = tmp_path / "new", tmp_path / "saved"
    # the same training at another link rate and cadence, from a start of the same name (another hash)
    _run(new, "a-1", [2.5, 2.0], [None, 0.75], link={"bandwidth_gbit": 0.01}, eval_every=1000)
    _run(saved, "a-2", [2.5, 2.1], [0.5, 0.70], link={"bandwidth_gbit": 1.0}, eval_every=1)
    _run(new, "b-1", [1.0, 0.5], [None, 0.9], init_from="/r/runs/start-s0-aaaa", seed=1)
    _run(saved, "b-2", [1.0, 0.5], [None, 0.9], init_from="/other/runs/start-s0-bbbb", seed=1)
    _run(saved, "c-2", [1.0, 0.5], [None, 0.9], seed=1, lr=0.2)  # another training: nobody's partner
    table = compare(new, saved).set_index("run")
    assert table.loc["a-1", "saved_run"] == "a-2" and table.loc["b-1", "saved_run"] == "b-2"
    assert table.loc["a-1", "first_loss_bitwise_equal"] and not table.loc["a-1", "all_losses_equal"]
    assert table.loc["b-1", "all_losses_equal"]
    assert table.loc["a-1", "final_test_acc"] == 0.75 and table.loc["a-1", "saved_final_test_acc"] == 0.70
    assert table.loc["a-1", "wall_s"] == 20.0
    lines = summary(table.reset_index())
    assert lines[0].startswith("2 runs paired; first loss bitwise equal in 2, every loss in 1, the final accuracy in 1")


def test_a_run_without_partner_or_log_is_refused_in_one_line(tmp_path: Path, capsys) -> None:
    new, saved = tmp_path / "new", tmp_path / "saved"
    _run(new, "a-1", [2.5], [0.5], lr=0.3)
    _run(saved, "a-2", [2.5], [0.5])
    with pytest.raises(CompareError, match="a-1: no run of the same training"):
        compare(new, saved)
    assert main([str(new), str(saved)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no run of the same training" in err
    _run(saved, "a-3", [2.5], [0.5], lr=0.3)
    (saved / "a-3" / "DONE").unlink()
    with pytest.raises(CompareError, match="not a finished run"):
        compare(new, saved)
    assert main([str(tmp_path / "missing"), str(saved)]) == 2
    # a results directory given for its runs/ (2026-12-07): the line says where its runs are
    _run(tmp_path / "results" / "runs", "a-4", [2.5], [0.5], lr=0.3)
    with pytest.raises(CompareError, match=f"; {tmp_path / 'results' / 'runs'} holds a results directory's runs$"):
        compare(tmp_path / "results", saved)


def test_a_field_added_after_a_saved_run_pairs_at_its_default(tmp_path: Path) -> None:
    """A saved config.json written before `admm.phase1_start` existed is the same training as a new one that holds
    the field's default (the behaviour the saved run had), and not as one that changes it."""
    new, saved = tmp_path / "new", tmp_path / "saved"
    admm = {"iterations": 2, "local_epochs": 1}
    _run(saved, "h-2", [1.0], [0.5], method="hsadmm", admm=admm)
    _run(new, "h-1", [1.0], [0.5], method="hsadmm", admm=admm | {"phase1_start": "theta"})
    assert compare(new, saved).set_index("run").loc["h-1", "saved_run"] == "h-2"
    _run(new, "h-3", [1.0], [0.5], method="hsadmm", admm=admm | {"phase1_start": "z"})
    with pytest.raises(CompareError, match="h-3: no run of the same training"):
        compare(new, saved)


def test_a_config_the_library_refuses_is_one_line(tmp_path: Path) -> None:
    new, saved = tmp_path / "new", tmp_path / "saved"
    _run(saved, "a-2", [2.5], [0.5])
    _run(new, "a-1", [2.5], [0.5], admm={"phase1_start": "anywhere"})
    with pytest.raises(CompareError, match="a-1: config.json: phase1_start must be one of theta, z") as e:
        compare(new, saved)
    assert "\n" not in str(e.value)
