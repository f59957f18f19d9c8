"""The preflight check (`python -m experiments.doctor`) and run_all.sh's refusals of an unusable Python."""

import importlib
import json
import os
import runpy
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from experiments import doctor
from experiments.all import EXPERIMENTS
from experiments.common import profile
from prunex.cluster.doctor import Context, check_cpu_compress
from prunex.cluster.slurm import SlurmOptions
from prunex.comm import bucket_kernels

ROOT = Path(__file__).resolve().parent.parent


def _script(folder: Path, name: str, body: str) -> None:
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def fake_slurm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A login node of a real Slurm cluster, as far as the doctor can tell: sinfo answers with one
    GPU partition, sacctmgr knows one account of this user."""
    bin_dir = tmp_path / "bin"
    _script(bin_dir, "sinfo", 'echo "gpu* up 80 gpu:v100:4"\necho "gputest up 2 gpu:v100:4"\n')
    _script(bin_dir, "sacctmgr", "echo project_2001234\n")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    for k in list(os.environ):
        if k.startswith("PRUNEX_SLURM_") or k in ("PRUNEX_SITE", "PRUNEX_MINICLUSTER_DIR"):
            monkeypatch.delenv(k)
    return bin_dir


def _doctor(capsys, *argv: str) -> tuple[int, list[str]]:
    rc = doctor.main(list(argv))
    return rc, capsys.readouterr().out.splitlines()


def _row(lines: list[str], name: str) -> str:
    return next(ln for ln in lines if ln.split()[1:2] == [name] or f"  {name} " in ln)


def test_missing_account_is_the_first_thing_to_fix(fake_slurm, data_root, capsys) -> None:
    rc, lines = _doctor(capsys, "--profile", "local", "--data-root", str(data_root))
    assert rc == 1
    assert lines[0] == "prunex doctor: profile local, executor slurm, device cpu, site none"  # Slurm answers
    assert _row(lines, "slurm").split()[0] == "ok" and "gpu* (80 nodes" in _row(lines, "slurm")
    assert _row(lines, "account").split()[0] == "FAIL"
    dataset = _row(lines, "dataset")  # both of the profile's datasets: digits, and Fashion-MNIST for accuracy
    assert dataset.split()[0] == "ok" and "1438 train / 359 test" in dataset and "60000 train / 10000 test" in dataset
    assert lines[-1].startswith("first to fix: account: missing: --account")


def test_a_clean_bill_of_health_exits_0(fake_slurm, data_root, capsys) -> None:
    argv = ("--profile", "local", "--account", "project_2001234", "--data-root", str(data_root))
    cluster = ROOT / "saved-logs/local/perfmodel/minicluster-2node-1gbit.json"  # measured: resnet20 on digits
    rc, lines = _doctor(capsys, *argv, "--cluster", str(cluster))
    assert rc == 0 and lines[-1] == "nothing to fix", lines
    assert _row(lines, "account").split()[:2] == ["ok", "account"]
    runs = _row(lines, "runs")
    asked = sum(len(importlib.import_module(f"experiments.{m}").runs(profile("local", "slurm"))) for m in EXPERIMENTS)
    assert runs.split()[0] == "ok" and f"{asked} runs (" in runs and "distinct trainings) of profile local" in runs
    assert "process-hours (CPU) estimated on" in runs
    from prunex.comm import native

    compress = _row(lines, "cpu compress")  # the native kernel's state, never a failure
    assert compress.split()[0] == ("ok" if native.available() else "--"), compress


def test_with_device_cuda_the_compress_row_names_the_gpus_bucket_path() -> None:
    """Review (2026-11-28): with `--device cuda` the row said the GPU compresses by index_select, while a GPU round
    packs each bucket with one Triton kernel wherever Triton imports (`BucketShrinkPlan`)."""
    ctx = Context("paper", "slurm", "cuda", SlurmOptions(), "data", None)
    row = check_cpu_compress(ctx)
    assert row.status == "--" and row.detail.startswith("not used: the GPU packs and unpacks with"), row
    assert ("one Triton kernel per bucket" in row.detail) == bucket_kernels.available(), row
    assert ("index_select / index_copy_ per bucket" in row.detail) == (not bucket_kernels.available()), row


def test_only_checks_and_estimates_the_selected_experiments(fake_slurm, data_root, capsys) -> None:
    """Review (2026-11-28): `./run_all.sh --only X` ran the doctor over the whole profile, so the GPU-hours it printed
    before submitting were those of every experiment, not of the runs the dry run then listed."""
    argv = ("--profile", "local", "--account", "project_2001234", "--data-root", str(data_root))
    cluster = ROOT / "saved-logs/local/perfmodel/minicluster-2node-1gbit.json"
    _, lines = _doctor(capsys, *argv, "--cluster", str(cluster))
    every = _row(lines, "runs")
    rc, lines = _doctor(capsys, *argv, "--cluster", str(cluster), "--only", "pareto")
    runs = _row(lines, "runs")
    asked = len(importlib.import_module("experiments.pareto").runs(profile("local", "slurm")))
    assert rc == 0 and f"{asked} runs (" in runs and "profile local (--only pareto)" in runs, runs

    def hours(row: str) -> float:
        return float(row.split("; ")[1].split()[0])

    assert 0 < hours(runs) < hours(every), (runs, every)
    rc, lines = _doctor(capsys, *argv, "--only", "no-such-experiment")
    assert rc == 1 and "has no runs matching --only no-such-experiment" in _row(lines, "runs"), lines


def test_a_given_time_limit_stands_where_the_cluster_file_cannot_estimate(
    fake_slurm, data_root, tmp_path, capsys
) -> None:
    """Review (2026-11-28): with a cluster file that has no compute time for the model, the dry run and the
    submission take `--time-min`, but the doctor failed the runs ("cannot estimate") and run_all.sh submitted
    nothing. Now: not an estimate, not a failure."""
    raw = json.loads((ROOT / "saved-logs/local/perfmodel/minicluster-2node-1gbit.json").read_text())
    raw["compute_s_per_sample"] = {}
    cluster = tmp_path / "cluster.json"
    cluster.write_text(json.dumps(raw))
    argv = ("--profile", "local", "--account", "project_2001234", "--data-root", str(data_root), "--cluster")
    rc, lines = _doctor(capsys, *argv, str(cluster))
    assert rc == 1 and _row(lines, "runs").split()[0] == "FAIL" and "give --time-min" in _row(lines, "runs")
    rc, lines = _doctor(capsys, *argv, str(cluster), "--time-min", "30")
    runs = _row(lines, "runs")
    assert rc == 0 and runs.split()[0] == "--" and "--time-min 30 for every job" in runs, lines


def test_unknown_partition_and_foreign_account_fail(fake_slurm, data_root, capsys) -> None:
    argv = ("--profile", "local", "--partition", "gpumedium", "--account", "project_9", "--data-root", str(data_root))
    rc, lines = _doctor(capsys, *argv)
    assert rc == 1
    assert "partition 'gpumedium' is not among gpu, gputest" in _row(lines, "slurm")
    assert "project_9 is not one of your accounts: project_2001234" in _row(lines, "account")
    assert lines[-1].startswith("first to fix: slurm:")


def test_the_old_module_path_names_the_new_command_in_one_line(capsys) -> None:
    with pytest.raises(SystemExit) as e:
        runpy.run_module("prunex.doctor", run_name="__main__")  # `python -m prunex.doctor`, the old path
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1 and "`python -m experiments.doctor`" in err


def test_bad_option_is_exit_2(capsys) -> None:
    assert doctor.main(["--sbatch", "=x"]) == 2
    assert capsys.readouterr().err.startswith("error: --sbatch")


# ------------------------------------------------------------------------------------ run_all.sh bootstrap
OLD_PYTHON = 'case "$*" in\n  *"sys.version_info[:3]"*) echo 3.6.8 ;;\n  *) exit 1 ;;\nesac\n'  # RHEL 8's python3


def _run_all(cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(cwd / "run_all.sh"), *args], cwd=cwd, env=env, capture_output=True, text=True)


def _prunex_python_refused(tmp_path: Path, problem: str) -> None:
    """`./run_all.sh --check` with PRUNEX_PYTHON=tmp_path/bin/python3 is refused in one line naming `problem`."""
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "PRUNEX_PYTHON": str(tmp_path / "bin/python3")}
    p = _run_all(ROOT, env, "--check")
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.strip() == (
        f"error: PRUNEX_PYTHON={tmp_path}/bin/python3 {problem}: name another one or unset PRUNEX_PYTHON"
    )


def test_run_all_refuses_an_old_prunex_python_in_one_line(tmp_path: Path) -> None:
    _script(tmp_path / "bin", "python3", OLD_PYTHON)
    _prunex_python_refused(tmp_path, "is Python 3.6.8; prunex needs >= 3.10")


def test_run_all_refuses_a_torch_out_of_range_by_its_installed_version(tmp_path: Path) -> None:
    """run_all.sh reads torch's version from its installed metadata (not by importing torch, ~4 s of CPU): an
    environment whose torch is 2.0.0 by its metadata is refused in one line, naming that version and the range."""
    fake = tmp_path / "site"
    (fake / "torch-2.0.0.dist-info").mkdir(parents=True)
    (fake / "torch-2.0.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.0.0\n")
    # this environment's python, its path led by the fake metadata (run_all.sh sets PYTHONPATH to the checkout)
    _script(tmp_path / "bin", "python3", f'PYTHONPATH="{fake}:$PYTHONPATH" exec {sys.executable} "$@"\n')
    _prunex_python_refused(tmp_path, "torch 2.0.0 is outside the supported range >=2.3, <3, !=2.7.0")


def test_run_all_refuses_to_build_its_env_with_an_old_system_python(tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"  # a fresh clone: no .venv, an empty cache
    checkout.mkdir()
    for name in ("run_all.sh", "requirements.txt"):
        shutil.copy(ROOT / name, checkout / name)
    _script(tmp_path / "bin", "python3", OLD_PYTHON)
    path = f"{tmp_path / 'bin'}{os.pathsep}/usr/bin{os.pathsep}/bin"
    env = {"PATH": path, "HOME": str(tmp_path), "PRUNEX_VENV_CACHE": str(tmp_path / "cache")}
    p = _run_all(checkout, env, "test")
    assert p.returncode == 2
    assert p.stderr.strip().splitlines() == [
        f"error: {tmp_path}/bin/python3 is Python 3.6.8; prunex needs >= 3.10: load a newer one (a site module, "
        "conda) or set PRUNEX_PYTHON=/path/to/python"
    ]
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())  # nothing half-built


def test_run_all_refuses_results_that_are_a_file_before_anything(tmp_path: Path, capsys) -> None:
    """Review (2026-11-28): with `--results FILE` the regime profile ran its link-rate probe in full and then failed
    with a traceback writing regime.json into the file. One line now, before the probe, and the file untouched."""
    from experiments import run_all

    afile = tmp_path / "afile"
    afile.write_text("mine\n")
    assert run_all.main(["--profile", "regime", "--results", str(afile)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is a file, not a directory" in err[0], err
    assert afile.read_text() == "mine\n"


def test_submit_driver_runs_the_preflight_check_before_queueing_the_driver(fake_slurm, data_root, tmp_path) -> None:
    """Review (2026-11-28): `--submit-driver` queued the driver before the preflight check, so a failing check (here:
    no account) showed only in the driver's log once it ran. The check now runs first and nothing is submitted."""
    _script(fake_slurm, "sbatch", f'echo "$@" >> {tmp_path / "sbatch.calls"}\necho 77\n')
    env = {**os.environ, "PRUNEX_DATA": str(data_root)}
    argv = ["--profile", "local", "--submit-driver", "--results", str(tmp_path / "r"), "--only", "pareto"]
    p = subprocess.run(
        [sys.executable, "-m", "experiments.run_all", *argv], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert p.returncode == 1, p.stdout + p.stderr
    assert "the preflight check failed" in p.stdout + p.stderr and "account" in p.stdout + p.stderr
    assert "of profile local (--only pareto)" in p.stdout, p.stdout  # the check is of the runs that would go out
    assert not (tmp_path / "sbatch.calls").exists()


def test_the_paper_profile_named_on_the_command_line_runs_the_preflight_check_first(
    fake_slurm, data_root, tmp_path
) -> None:
    """Review (2026-12-08): `./run_all.sh --profile paper` (the README's command on a cluster) skipped the preflight
    check that the profile chosen because sinfo answers runs: it went on to the experiments' own refusal, or, with an
    account, submitted without the check. Here the check (no account) stops it before anything is submitted."""
    _script(fake_slurm, "sbatch", f'echo "$@" >> {tmp_path / "sbatch.calls"}\necho 77\n')
    env = {**os.environ, "PRUNEX_DATA": str(data_root)}
    argv = ["--profile", "paper", "--results", str(tmp_path / "r"), "--only", "pareto"]
    p = subprocess.run(
        [sys.executable, "-m", "experiments.run_all", *argv], cwd=ROOT, env=env, capture_output=True, text=True
    )
    out = p.stdout + p.stderr
    assert p.returncode == 1, out
    assert "preflight check before submitting to Slurm" in out and "the preflight check failed" in out, out
    assert not (tmp_path / "sbatch.calls").exists()


def test_run_all_after_the_experiments_refusal_says_to_fix_it_not_to_resume(tmp_path: Path, capfd) -> None:
    """Review (2026-12-08): after experiments.all refused its input (exit code 2, nothing made), run_all said "The same
    command resumes (finished runs are skipped); to draw what exists: ./run_all.sh --figures-only --results R", for a
    results directory that did not exist. Here the results' folder is a file, which the dry run does not see."""
    from experiments import run_all

    afile = tmp_path / "afile"
    afile.write_text("mine\n")
    results = afile / "r"
    assert (
        run_all.main(["--profile", "local", "--executor", "local", "--results", str(results), "--only", "pareto"]) == 2
    )
    out, err = capfd.readouterr()
    assert (
        "not writable" in err
        and "no figures drawn: the experiments refused their input (the error above); fix it" in out
    )
    assert "resumes" not in out and "--figures-only" not in out, out
    assert afile.read_text() == "mine\n"
