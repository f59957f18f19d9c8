"""`./run_all.sh` never touches the committed figures after a failure, an interrupt or a typo (issue 19).

Run in a temporary clone of this checkout (its uncommitted changes committed on top), so that
`git status` there shows anything the main job wrote into tracked files: an interrupted main job,
`--figures-only` on a missing results directory and an unknown experiment must all leave it clean,
each refusal in one line with exit code 2, the interrupt with the resume line and exit code 130.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dst = tmp_path_factory.mktemp("clone") / "prunex"
    subprocess.run(["git", "clone", "-q", "--shared", str(ROOT), str(dst)], check=True)
    changed = [p for p in _git(ROOT, "ls-files", "-m", "-o", "--exclude-standard", "-z").split("\0") if p]
    for rel in changed:
        if (ROOT / rel).is_file():
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, dst / rel)
    for rel in (p for p in _git(ROOT, "ls-files", "-d", "-z").split("\0") if p):
        (dst / rel).unlink(missing_ok=True)
    if _git(dst, "status", "--porcelain"):
        _git(dst, "add", "-A")
        _git(dst, "-c", "user.name=test", "-c", "user.email=test@localhost", "commit", "-q", "-m", "working tree")
    assert _git(dst, "status", "--porcelain") == ""
    return dst


def _env(**extra: str) -> dict[str, str]:
    """This interpreter's environment as the active one (run_all.sh then builds nothing)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["VIRTUAL_ENV"] = sys.prefix
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env | extra


@pytest.mark.parametrize(
    "args, message",
    [
        (["--figures-only", "--results", "/nonexistent/typo"], "results directory /nonexistent/typo does not exist"),
        (["--only", "nosuch"], "unknown experiment 'nosuch'"),  # a bad --profile takes the same path
    ],
)
def test_refusals_are_one_line_and_write_nothing(clone: Path, args: list[str], message: str, fault_report) -> None:
    t0 = time.monotonic()
    proc = subprocess.run(["./run_all.sh", *args], cwd=clone, env=_env(), capture_output=True, text=True, timeout=300)
    elapsed = time.monotonic() - t0
    errors = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2 and len(errors) == 1 and message in errors[0], (proc.stdout, proc.stderr)
    # nothing written at all, but Python's own import caches (there unless PYTHONDONTWRITEBYTECODE is set)
    written = [ln for ln in _git(clone, "status", "--porcelain", "--ignored").splitlines() if ln]
    assert [ln for ln in written if not ln.endswith("__pycache__/")] in ([], ["!! .venv"]), written
    fault_report(f"./run_all.sh {' '.join(args)}", elapsed, errors[0], "nothing: git status clean")


@pytest.mark.slow
def test_interrupted_main_job_leaves_the_committed_figures(clone: Path, data_root: Path, tmp_path: Path, fault_report):
    hold = tmp_path / "hold"
    hold.touch()
    env = _env(PRUNEX_FAULT_HOLD_AT="1", PRUNEX_FAULT_HOLD_FILE=str(hold), PRUNEX_DATA=str(data_root))
    proc = subprocess.Popen(
        ["./run_all.sh", "--profile", "smoke", "--executor", "debug"],
        cwd=clone,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    lines = []
    for line in proc.stdout:  # until the first run holds at iteration 1
        lines.append(line)
        if "fault injection: holding" in line:
            break
    assert proc.poll() is None, "".join(lines)
    t0 = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the terminal signals the whole foreground group
    out, _ = proc.communicate(timeout=120)
    elapsed = time.monotonic() - t0
    text = "".join(lines) + out
    assert proc.returncode == 130, text
    # the first checkpoint is 20 minutes in (--checkpoint-every-min's default), so there is none to resume from
    assert "interrupted before its first checkpoint; run the same command again to start it over" in text
    assert "no figures drawn" in text and "figures:" not in text
    assert _git(clone, "status", "--porcelain") == ""  # figures/ and REPORT.md untouched
    assert (clone / "results" / "smoke").is_dir()  # the runs went to the ignored results directory
    message = next(ln for ln in text.splitlines() if ln.startswith("[time_to_accuracy-") or "interrupted" in ln)
    fault_report(
        "Ctrl-C of ./run_all.sh (main job) while a run trains",
        elapsed,
        message,
        "results/smoke (ignored), no checkpoint yet (first one due at 20 min); no figures drawn; git status clean",
    )


def test_submit_driver_sends_a_one_core_driver_job(clone: Path, tmp_path: Path) -> None:
    """`--submit-driver` with stand-ins for sinfo and sbatch that record what they were asked."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "sinfo").write_text("#!/bin/sh\necho 'gpu up 1 idle'\n")
    (fake / "sbatch").write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {tmp_path / "sbatch.args"}\necho 4242\n')
    for f in fake.iterdir():
        f.chmod(0o755)
    results = tmp_path / "results"
    env = _env()
    env["PATH"] = os.pathsep.join([str(fake), env["PATH"]])
    env.pop("PRUNEX_MINICLUSTER_DIR", None)
    env.pop("PRUNEX_SLURM_ACCOUNT", None)
    cmd = ["./run_all.sh", "--submit-driver", "--profile", "smoke", "--results", str(results), "--only", "latency"]
    # no account given, none in the environment: the preflight check the driver would run first refuses it before
    # anything is queued (review, 2026-11-28: the driver was queued and failed in its log)
    proc = subprocess.run(cmd, cwd=clone, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1 and "the preflight check failed" in proc.stdout, proc.stdout + proc.stderr
    assert not (tmp_path / "sbatch.args").exists()
    # with an account (of the command line, which goes to the driver's job too: issue 27 had only the environment's)
    proc = subprocess.run([*cmd, "--account", "project_x"], cwd=clone, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"driver submitted as Slurm job 4242 (one core); log: {results}/driver-4242.out" in proc.stdout
    args = (tmp_path / "sbatch.args").read_text().splitlines()
    assert {"--ntasks=1", "--cpus-per-task=1", "--nodes=1", "--export=ALL,PRUNEX_DRIVER_JOB=1"} <= set(args)
    assert f"--output={results}/driver-%j.out" in args and any(a.startswith("--time=") for a in args)
    wrap = args[args.index("--wrap") + 1]
    assert f"./run_all.sh --profile smoke --executor slurm --results {results} --detach " in wrap
    assert "--only latency" in wrap and "--account project_x" in wrap and "--account=project_x" in args
    assert _git(clone, "status", "--porcelain") == ""
    # without a Slurm cluster that answers: refused in one line
    (fake / "sinfo").write_text("#!/bin/sh\necho 'Unable to contact slurm controller' >&2\nexit 1\n")
    proc = subprocess.run(cmd, cwd=clone, env=env, capture_output=True, text=True, timeout=300)
    errors = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2 and len(errors) == 1 and "--submit-driver needs a Slurm cluster" in errors[0]


def test_on_a_cluster_nothing_is_built_in_home_unasked(clone: Path, tmp_path: Path, fault_report) -> None:
    """Issue 27: on a cluster whose Python lacks a package, run_all.sh built the ~5 GB pinned environment in
    the home cache without a word (home quotas are small). Now it names what is missing and the one command
    that adds it, and builds nothing unless PRUNEX_VENV_CACHE says where."""
    fake, home, bare = tmp_path / "bin", tmp_path / "home", tmp_path / "bare"
    fake.mkdir()
    (fake / "sinfo").write_text("#!/bin/sh\necho 'gpu up 1 idle'\n")  # a Slurm cluster that answers
    (fake / "sinfo").chmod(0o755)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)  # a Python without them
    unset = ("PRUNEX_MINICLUSTER_DIR", "XDG_CACHE_HOME", "PRUNEX_VENV_CACHE")
    env = {k: v for k, v in _env().items() if k not in unset}
    env |= {"HOME": str(home), "VIRTUAL_ENV": str(bare)}
    env["PATH"] = os.pathsep.join([str(fake), str(bare / "bin"), "/usr/bin", "/bin"])
    t0 = time.monotonic()
    proc = subprocess.run(["./run_all.sh", "--check"], cwd=clone, env=env, capture_output=True, text=True, timeout=120)
    errors = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2 and len(errors) == 1, (proc.stdout, proc.stderr)
    assert f"{bare}/bin/python lacks torch torchvision submitit" in errors[0], errors[0]
    assert "-m pip install --user torch==2.14.1 torchvision==0.29.1 submitit==1.5.4" in errors[0]
    assert "scikit-learn==" in errors[0] and "PRUNEX_VENV_CACHE=DIR" in errors[0]
    assert not (home / ".cache").exists() and not (clone / ".venv").exists()
    fault_report(
        "./run_all.sh --check on a cluster whose Python lacks packages",
        time.monotonic() - t0,
        errors[0],
        "nothing (no environment built)",
    )
