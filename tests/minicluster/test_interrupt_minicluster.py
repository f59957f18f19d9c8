"""Interrupts and restarts on the mini Slurm cluster (issues 19 and 14), with real launchers.

- Ctrl-C of `python -m prunex.run --executor slurm --detach` leaves the job running and says how to
  reattach; the same command again reattaches to that job (no second job is submitted); Ctrl-C of
  the reattached launcher cancels the job, waits until Slurm no longer runs it, and prints the
  resume line.
- The driver (`python -m experiments.all`) SIGKILLed mid-experiment and started again: it skips the
  finished run, reattaches to the running one, deletes no file of it, submits nothing twice, and
  every run completes. Both experiments' runs went out together, as one job array.

Runs hold at a known iteration with PRUNEX_FAULT_HOLD_* (prunex.training.faults) until the test releases
them. The file name sorts before test_minicluster.py, whose last test takes the session cluster down.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from prunex.cluster.jobs import SLURM_LIVE_STATES, slurm_states
from prunex.cluster.lock import job_history

pytestmark = pytest.mark.minicluster
ROOT = Path(__file__).resolve().parents[2]
CANCEL_BOUND_S = 60.0  # scancel -> Slurm no longer runs the job (KillWait 2 s in the mini cluster, plus polling)


def _wait_for(predicate, what: str, timeout: float = 600.0, proc: subprocess.Popen | None = None):
    deadline = time.monotonic() + timeout
    while True:
        ended = proc is not None and proc.poll() is not None  # read before the predicate: no race with its output
        value = predicate()
        if value:
            return value
        assert not ended, f"the launcher ended before {what}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def _text(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


def _holding(run_dir: Path) -> str | None:
    """The job id of the run's job once its rank 0 holds."""
    job = json.loads(_text(run_dir / "job.json") or "{}").get("job_id")
    if job and "holding" in _text(Path(json.loads(_text(run_dir / "job.json"))["folder"]) / f"{job}_0_log.out"):
        return job
    return None


def _live(job: str) -> bool:
    return slurm_states([job]).get(job) in SLURM_LIVE_STATES


def _launch(cmd: list[str], out: Path, **env: str) -> subprocess.Popen:
    return subprocess.Popen(
        cmd,
        cwd=ROOT,
        env=dict(os.environ, **env),
        stdout=out.open("w"),
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # signals reach the launcher alone, as `kill PID` does
    )


def test_ctrl_c_detaches_or_cancels_and_a_rerun_reattaches(minicluster, data_root, tmp_path, fault_report) -> None:
    hold, results = tmp_path / "hold", tmp_path / "results"
    hold.touch()
    run_dir = results / "adhoc" / "held"
    cmd = [sys.executable, "-m", "prunex.run", "--method", "hsadmm", "--executor", "slurm", "--nodes", "2"]
    cmd += ["--iterations", "3", "--local-epochs", "1", "--train-subset", "64", "--bn-batches", "1", "--time-min", "10"]
    cmd += [
        "--device",
        "cpu",
        "--checkpoint-every-min",
        "0",
    ]  # the mini cluster has no GPUs; resume from every iteration
    cmd += ["--data-root", str(data_root), "--results", str(results), "--name", "held"]
    hold_env = {"PRUNEX_FAULT_HOLD_AT": "1", "PRUNEX_FAULT_HOLD_FILE": str(hold)}
    first = _launch([*cmd, "--detach"], tmp_path / "first.out", **hold_env)
    job = _wait_for(lambda: _holding(run_dir), "the job to hold at iteration 1", proc=first)
    t0 = time.monotonic()
    first.send_signal(signal.SIGINT)
    assert first.wait(timeout=60) == 130
    detached = _text(tmp_path / "first.out").strip().splitlines()[-1]
    assert detached == (
        f"detached: Slurm job {job} goes on running; run the same command again to reattach, or stop it with: "
        f"scancel {job}"
    )
    assert _live(job)
    elapsed = time.monotonic() - t0
    fault_report("Ctrl-C of a Slurm run's launcher with --detach", elapsed, detached, f"job {job} runs on")

    second = _launch(cmd, tmp_path / "second.out")
    _wait_for(lambda: "reattached to slurm job" in _text(tmp_path / "second.out"), "the reattach", proc=second)
    assert f"reattached to slurm job {job}" in _text(tmp_path / "second.out")
    assert [h["job_id"] for h in job_history(run_dir)] == [job]  # nothing submitted a second time
    t0 = time.monotonic()
    second.send_signal(signal.SIGINT)
    assert second.wait(timeout=CANCEL_BOUND_S + 60) == 130
    elapsed = time.monotonic() - t0
    last = _text(tmp_path / "second.out").strip().splitlines()[-1]
    assert last == "interrupted after iteration 1; run the same command again to resume from the checkpoint"
    assert not _live(job) and elapsed < CANCEL_BOUND_S
    fault_report(
        "Ctrl-C of the re-run that reattached to it (no --detach)",
        elapsed,
        last,
        f"job {job} cancelled and gone; one job in jobs.jsonl; checkpoint of iteration 1",
    )


def test_driver_killed_mid_experiment_and_restarted(minicluster, data_root, tmp_path, fault_report) -> None:
    hold, results = tmp_path / "hold", tmp_path / "results"
    hold.touch()
    # residuals (hsadmm-resnet20) and sparsity_patterns (hsadmm-resnet20-filter0.5-channel0.5), 1 x 1 each
    cmd = [sys.executable, "-m", "experiments.all", "--profile", "smoke", "--executor", "slurm"]
    cmd += ["--results", str(results), "--only", "*s", "--time-min", "10"]
    held, other = results / "residuals" / "hsadmm-resnet20", results / "sparsity_patterns"
    hold_env = {"PRUNEX_FAULT_HOLD_AT": "1", "PRUNEX_FAULT_HOLD_FILE": str(hold), "PRUNEX_FAULT_HOLD_RUNS": held.name}
    # held until the test releases it, up to 240 s (0.8 x the collective timeout): with the default 60 s cap,
    # the hold ran out while the other run exported under CI's load and the held run was DONE at the restart
    hold_env["PRUNEX_FAULT_HOLD_S"] = "240"
    driver = _launch(cmd, tmp_path / "driver1.out", **hold_env)
    other_dir = _wait_for(lambda: next(other.glob("*/DONE"), None), "the other run to finish", proc=driver).parent
    job = _wait_for(lambda: _holding(held), "the held run to hold", proc=driver)
    files = sorted(p.relative_to(held) for p in held.rglob("*") if p.is_file())
    driver.kill()  # SIGKILL: the driver cannot cancel anything
    driver.wait(timeout=30)
    assert _live(job)

    t0 = time.monotonic()
    restarted = _launch(cmd, tmp_path / "driver2.out")
    out = tmp_path / "driver2.out"
    _wait_for(lambda: "reattached to slurm job" in _text(out), "the restarted driver to reattach", proc=restarted)
    assert "[all] 2 runs, 1 already done" in _text(out) and f"reattached to slurm job {job}" in _text(out)
    missing = [f for f in files if not (held / f).exists()]
    assert not missing, f"the restarted driver deleted files of a live job: {missing}"
    hold.unlink()  # release the held run
    assert restarted.wait(timeout=300) == 0, _text(out)[-3000:]
    elapsed = time.monotonic() - t0
    histories = {d.name: job_history(d) for d in (held, other_dir)}
    assert all(len(h) == 1 for h in histories.values()), histories  # no job submitted twice
    ids = sorted(h[0]["job_id"] for h in histories.values())
    assert len({i.split("_")[0] for i in ids}) == 1 and all("_" in i for i in ids), ids  # one array, both experiments
    assert (held / "DONE").exists() and (other_dir / "DONE").exists()
    fault_report(
        "driver (experiments.all on Slurm) SIGKILLed mid-experiment, then started again",
        elapsed,
        f"reattached to slurm job {job} (1 of 2 runs already done)",
        f"every run DONE; one job per run in jobs.jsonl ({', '.join(ids)}: one array); no file of the live run deleted",
    )


def test_a_job_that_asks_for_more_than_its_partition_holds_is_named_while_it_pends(
    minicluster, data_root, tmp_path, fault_report
) -> None:
    """Review (2026-12-08): `--nodes 3` on this 2-node partition (or `--cpus-per-task 64` on 2-CPU nodes) was accepted
    by sbatch and pended for ever while the launcher waited in silence. It now says why, once per reason, within a
    few of its polls; the job is left queued (a limit can change), and Ctrl-C cancels it as always."""
    cmd = [sys.executable, "-m", "prunex.run", "--method", "ddp", "--executor", "slurm", "--device", "cpu"]
    cmd += ["--nodes", "3", "--epochs", "1", "--train-subset", "64", "--time-min", "5", "--name", "toobig"]
    cmd += ["--data-root", str(data_root), "--results", str(tmp_path / "results")]
    out = tmp_path / "launcher.out"
    t0 = time.monotonic()
    proc = _launch(cmd, out)
    try:
        note = _wait_for(
            lambda: next((ln for ln in _text(out).splitlines() if ln.startswith("note: [toobig] Slurm job ")), None),
            "the note on the pending job",
            timeout=120,
            proc=proc,
        )
    except AssertionError:
        proc.send_signal(signal.SIGINT)  # the launcher cancels its job: nothing left pending in the session cluster
        proc.wait(timeout=CANCEL_BOUND_S + 60)
        raise
    noted_s = time.monotonic() - t0
    job = note.split()[4]
    assert " pends with reason Partition" in note and f"scancel {job}" in note, note
    assert _live(job)  # left queued
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=CANCEL_BOUND_S + 60) == 130
    assert not _live(job)
    fault_report(
        "a run of 3 nodes on a 2-node partition (Slurm accepts it, it pends), Ctrl-C after the note",
        time.monotonic() - t0,
        note,
        f"the note {noted_s:.1f} s after the launch; job {job} cancelled at Ctrl-C; nothing trained",
    )
