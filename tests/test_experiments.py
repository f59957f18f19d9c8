"""The experiment suite: every module, every profile, dry runs, golden Slurm parameters, smoke."""

import dataclasses
import importlib
import json
from pathlib import Path

import pandas as pd
import pytest

from experiments import all as all_experiments
from experiments import cli
from experiments.common import PROFILE_NAMES, profile
from prunex.config import ConfigError, RunConfig
from prunex.launch import SlurmOptions, executor_parameters

GOLDEN = Path(__file__).parent / "golden" / "slurm_paper.json"
MODULES = all_experiments.EXPERIMENTS


@pytest.mark.parametrize("name", MODULES)
@pytest.mark.parametrize("profile", PROFILE_NAMES)
def test_runs_are_unique_and_valid(name: str, profile: str) -> None:
    module = importlib.import_module(f"experiments.{name}")
    assert module.NAME == name and "Paper claim" in module.__doc__
    configs = cli.resolve(name, module.runs, profile, None, "results")
    assert configs and all(isinstance(c, RunConfig) for c in configs)
    assert len({c.name for c in configs}) == len(configs)
    assert {c.experiment for c in configs} == {name} and {c.profile for c in configs} == {profile}
    if profile == "paper":
        assert {c.dataset for c in configs} == {"cifar10"} and {c.executor for c in configs} == {"slurm"}
        assert all(c.procs_per_node == 4 and c.batch_size == 128 and c.lr == 1e-3 for c in configs)


def test_dry_run_prints_every_run_and_submits_nothing(tmp_path: Path, capsys) -> None:
    results = tmp_path / "r"
    argv = ["--profile", "paper", "--results", str(results), "--dry-run", "--partition", "gpu"]
    assert cli.main("pareto", importlib.import_module("experiments.pareto").runs, None, argv) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.strip().splitlines()]
    assert len(lines) == 3 * (10 + 1 + 9)  # per model: hsadmm at 10 keep rates, dense ddp, 9 prune-then-finetune
    assert all(x["params"]["slurm_partition"] == "gpu" for x in lines)
    assert not results.exists()


def test_golden_slurm_parameters_of_the_paper_profile() -> None:
    slurm = SlurmOptions(partition="gpu", account="project_2001234", time_min=120, gres="gpu:v100:4", cpus_per_task=10)
    golden = json.loads(GOLDEN.read_text())
    for name in ("volume", "strong_scaling"):
        module = importlib.import_module(f"experiments.{name}")
        got = {c.name: executor_parameters(c, slurm) for c in cli.resolve(name, module.runs, "paper", None, "r")}
        assert got == golden[name]


def test_bad_input_is_one_line_before_launch(tmp_path: Path, capsys) -> None:
    runs = importlib.import_module("experiments.latency").runs
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert cli.main("latency", runs, None, ["--profile", "smoke", "--results", str(blocker / "r")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not writable" in err[0]


@pytest.mark.slow
def test_whole_smoke_profile_end_to_end(data_root: Path, tmp_path: Path) -> None:
    results = tmp_path / "smoke"
    assert all_experiments.main(["--profile", "smoke", "--results", str(results)]) == 0
    for name in MODULES:
        module = importlib.import_module(f"experiments.{name}")
        for c in cli.resolve(name, module.runs, "smoke", None, str(results)):
            run_dir = results / name / c.name
            assert (run_dir / "DONE").exists(), run_dir
            steps = pd.read_parquet(run_dir / "steps.parquet")
            assert len(steps) > 0 and steps["test_acc"].notna().any()
    # a second invocation finds everything done and runs nothing
    assert all_experiments.main(["--profile", "smoke", "--results", str(results)]) == 0


def test_prune_finetune_runs_wait_for_the_runs_they_need() -> None:
    from experiments import pareto

    configs = cli.resolve("pareto", pareto.runs, "local", None, "/tmp/unused")
    waves = cli.waves(configs)
    assert [sorted({c.method for c in w}) for w in waves] == [["ddp", "hsadmm"], ["prune_finetune"]]
    first = {c.name for c in waves[0]}
    for c in waves[1]:
        assert set(c.depends_on) <= first and c.epochs == pareto.retrain_epochs(profile("local")) == 4
    assert all(c.export for c in configs)
    # a dependency that is already done (not in the list) does not hold a run back
    assert cli.waves(waves[1]) == [waves[1]]
    with pytest.raises(ConfigError, match="init-from"):
        dataclasses.replace(configs[0], method="prune_finetune")
