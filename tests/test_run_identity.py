"""Run identity: a run is its training configuration. Experiments asking for the same training share one
run directory, trained once; each finds it under its own name, and so does the analysis; the report
lists which experiments used which run."""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
from pathlib import Path

import pytest

from analysis import fig5a_time_to_accuracy, fig7_latency, report
from analysis.common import load_experiment, render
from experiments import cli
from prunex.cluster.rundir import experiment_path, link_run, run_dir_for
from prunex.training.config import ADMMConfig, ConfigError, RunConfig
from prunex.training.log import export_logs

REPO = Path(__file__).resolve().parents[1]


def test_the_committed_runs_keep_their_directories_under_todays_configuration() -> None:
    """A results directory made before a training field was added keeps its finished runs on resume: every
    committed run's directory is still the one its config.json names today (`KEY_OMITS_AT_DEFAULT`)."""
    runs = sorted((REPO / "saved-logs").glob("*/runs/*/config.json"))
    assert len(runs) >= 80, runs  # the regime and local profiles' logs
    moved = [
        (p.parent.name, sid)
        for p in runs
        if (sid := RunConfig.from_dict(json.loads(p.read_text())).shared_id) != p.parent.name
    ]
    assert not moved, moved
    a = RunConfig(method="hsadmm", admm=ADMMConfig(phase1_start="z"))
    assert a.training_key() != dataclasses.replace(a, admm=ADMMConfig()).training_key()  # a variant is another run


def test_the_training_key_ignores_who_asked_and_how_the_job_runs() -> None:
    base = RunConfig(method="hsadmm", nodes=2, procs_per_node=2, experiment="time_to_accuracy", name="a")
    same = [
        dataclasses.replace(base, experiment="volume", name="hsadmm-x", results="/elsewhere"),
        dataclasses.replace(base, checkpoint_every_min=0.0, collective_timeout_s=30.0),
    ]
    for c in same:
        assert c.training_key() == base.training_key()
    assert run_dir_for(dataclasses.replace(base, experiment="volume", name="b")) == run_dir_for(base)
    assert experiment_path(dataclasses.replace(base, experiment="volume", name="b")) != experiment_path(base)
    different = [
        dataclasses.replace(base, lr=0.01),
        dataclasses.replace(base, seed=1),
        dataclasses.replace(base, nodes=1),
        dataclasses.replace(base, admm=ADMMConfig(channel_keep=0.25)),
        dataclasses.replace(base, profile="paper"),
        dataclasses.replace(base, executor="slurm"),
    ]
    assert len({c.training_key() for c in [base, *different]}) == 1 + len(different)
    assert base.shared_id == f"hsadmm-resnet20-digits-2x2-s0-{base.training_key()}"
    with pytest.raises(ConfigError, match="reserved"):
        RunConfig(method="ddp", experiment="runs")


def test_links_follow_the_asked_training_and_old_run_directories_are_refused(tmp_path: Path) -> None:
    a = RunConfig(method="ddp", experiment="latency", name="ddp-resnet20", results=str(tmp_path))
    link = link_run(a)
    assert link.is_symlink() and os.readlink(link) == f"../runs/{a.shared_id}"
    b = dataclasses.replace(a, lr=0.2)  # the experiment now asks for another training: the link follows
    assert link_run(b) == link and os.readlink(link) == f"../runs/{b.shared_id}"
    exp = load_experiment(tmp_path, "latency")  # nothing trained yet: the analysis says so
    assert not exp.runs and any("a link to a missing run directory" in n for n in exp.notes)
    old = RunConfig(method="ddp", experiment="volume", name="ddp-resnet20", results=str(tmp_path))
    (tmp_path / "volume" / "ddp-resnet20").mkdir(parents=True)  # a run directory of the layout before
    with pytest.raises(ConfigError, match="layout before shared runs") as refused:
        link_run(old)
    assert "\n" not in str(refused.value)
    assert (tmp_path / "volume" / "ddp-resnet20").is_dir() and not (tmp_path / "volume" / "ddp-resnet20").is_symlink()


@pytest.mark.slow
def test_experiments_share_one_run_and_every_analysis_finds_it(
    data_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "r"
    argv = ["--profile", "smoke", "--results", str(results), "--only", "ddp*"]
    # smoke runs are 1 x 1: time_to_accuracy's ddp-resnet20, latency's ddp-resnet20 and
    # strong_scaling's ddp-resnet20-1x1 are one training
    for name in ("time_to_accuracy", "latency", "strong_scaling"):
        assert cli.main(name, importlib.import_module(f"experiments.{name}").runs, None, argv) == 0
    out = capsys.readouterr().out
    assert "[latency] 1 runs, 1 already done" in out and "[strong_scaling] 1 runs, 1 already done" in out
    assert out.count("submitted job") == 1  # trained once
    runs = list((results / "runs").iterdir())
    assert len(runs) == 1 and (runs[0] / "DONE").exists()
    names = {
        "time_to_accuracy": "ddp-resnet20",
        "latency": "ddp-resnet20",
        "strong_scaling": "ddp-resnet20-1x1",
    }
    for exp_name, run_name in names.items():
        entry = results / exp_name / run_name
        assert entry.is_symlink() and entry.resolve() == runs[0].resolve()
        exp = load_experiment(results, exp_name)
        run = exp.run(run_name)  # found under the experiment's own name
        assert set(run.table("steps")["run_id"]) == {run_name} and run.shared
    for spec in (fig5a_time_to_accuracy.SPEC, fig7_latency.SPEC):
        fig = render(spec, results, tmp_path / "fig")
        assert not fig.placeholder and set(fig.data["run_id"]) == {"ddp-resnet20"}, (spec.name, fig.notes)
    lines = report.run_users(results)
    row = next(ln for ln in lines if runs[0].name in ln)
    assert all(f"{e}/{n}" in row for e, n in names.items()), row
    assert "3 runs asked for by the experiments are 1 training, 1 of them" in "\n".join(lines)
    # saved logs keep the sharing: each run copied once, the experiments' links with it
    saved = tmp_path / "saved"
    assert export_logs(results, saved) == 1
    assert load_experiment(saved, "latency").run("ddp-resnet20").table("steps") is not None
    assert (saved / "strong_scaling" / "ddp-resnet20-1x1").is_symlink()


def test_a_debug_job_leaves_the_drivers_environment_as_it_was(data_root: Path, tmp_path: Path, monkeypatch) -> None:
    """A debug job runs in the driver's process and exports RANK, MASTER_PORT, ... there. They stayed, and
    sbatch exports the driver's environment: every later Slurm job of the driver got that one MASTER_PORT, and
    two such jobs on one node failed with EADDRINUSE (seen in the suite's mini cluster tests)."""
    from prunex.cluster.launch import launch

    for key in ("MASTER_PORT", "MASTER_ADDR", "RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(key, raising=False)
    before = dict(os.environ)
    config = RunConfig(
        method="ddp", executor="debug", epochs=1, train_subset=64, bn_batches=1, name="x", results=str(tmp_path)
    )
    launch(dataclasses.replace(config, data_root=str(data_root)), echo=False)
    assert dict(os.environ) == before
