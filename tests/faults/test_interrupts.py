"""Interrupting and killing the launcher of a local run, with real processes (issue 19).

One run (hsadmm, 1 node x 2 processes, 64 images) is launched three times with `python -m
prunex.run`: its launcher gets SIGINT, then SIGTERM, then SIGKILL, each while rank 0 holds at a
known iteration (PRUNEX_FAULT_HOLD_AT, prunex.training.faults). After every signal no process of the job
survives (its process group is empty) within a bound, and the next launch resumes from the
checkpoint. The run directory's job history shows one job at a time: each new job replaced the one
before, submitted only after it had gone, and every iteration is logged once. That a re-run after
SIGKILL of the launcher resumes and ends bitwise like an uninterrupted run is tests/test_resume.py.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from prunex.cluster.jobs import group_members
from prunex.cluster.lock import claim_run, job_history, release_claim

ROOT = Path(__file__).resolve().parents[2]
GONE_BOUND_S = 60.0  # SIGTERM to the group, 10 s grace, then SIGKILL; generous: the machine may be shared
NAME = "interrupted"
RESUME = "run the same command again to resume from the checkpoint"


def _command(results: Path, data_root: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "prunex.run",
        "--method",
        "hsadmm",
        "--nodes",
        "1",
        "--procs-per-node",
        "2",
        "--iterations",
        "4",
        "--local-epochs",
        "1",
        "--freeze-iteration",
        "2",
        "--train-subset",
        "64",
        "--bn-batches",
        "1",
        "--checkpoint-every-min",
        "0",  # a checkpoint at every evaluation point, so an interrupt has one to resume from
        "--data-root",
        str(data_root),
        "--results",
        str(results),
        "--name",
        NAME,
    ]


def _launch_and_hold(cmd: list[str], run_dir: Path, hold_at: int, hold_file: Path) -> tuple[subprocess.Popen, int]:
    """Start the launcher (its own session, so a signal reaches it alone) and wait until rank 0 holds."""
    env = dict(os.environ, PRUNEX_FAULT_HOLD_AT=str(hold_at), PRUNEX_FAULT_HOLD_FILE=str(hold_file))
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    deadline = time.monotonic() + 120
    while True:
        job = json.loads((run_dir / "job.json").read_text()) if (run_dir / "job.json").exists() else {}
        log = run_dir / "submitit" / f"{job.get('job_id')}_0_log.out"
        if job.get("launcher_pid") == proc.pid and log.exists() and "holding" in log.read_text(errors="replace"):
            return proc, int(job["job_id"])
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the job never reached its hold point"
        time.sleep(0.1)


def _gone_after(proc: subprocess.Popen, pgid: int, since: float) -> tuple[float, float]:
    """Seconds from `since` until the job's process group was empty, and until every process,
    the launcher included, had exited."""
    job_gone = None
    while proc.poll() is None or group_members(pgid):
        if job_gone is None and not group_members(pgid):
            job_gone = time.monotonic() - since
        assert time.monotonic() - since < GONE_BOUND_S + 30, f"job {pgid} or its launcher outlived the bound"
        time.sleep(0.02)
    every = time.monotonic() - since
    return (every if job_gone is None else job_gone), every


@pytest.mark.slow
def test_launcher_interrupted_or_killed_never_leaves_ranks_and_a_rerun_resumes(
    data_root: Path, tmp_path: Path, fault_report
) -> None:
    results, hold = tmp_path / "results", tmp_path / "hold"
    hold.touch()
    run_dir = results / "adhoc" / NAME
    cmd = _command(results, data_root)
    jobs_seen = []
    # hold points: iteration 1 (after 1 checkpoint), 2 (resumed from it, after one more), 2 again (held at once)
    for sig, hold_at, after in ((signal.SIGINT, 1, 1), (signal.SIGTERM, 2, 2), (signal.SIGKILL, 2, None)):
        proc, pgid = _launch_and_hold(cmd, run_dir, hold_at, hold)
        jobs_seen.append(pgid)
        assert len(group_members(pgid)) == 3  # the controller and two ranks, in the job's own process group
        t0 = time.monotonic()
        os.kill(proc.pid, sig)  # the launcher alone, not its job
        job_gone, gone = _gone_after(proc, pgid, t0)
        _, err = proc.communicate(timeout=60)
        assert gone < GONE_BOUND_S, gone
        name = signal.Signals(sig).name
        if sig == signal.SIGKILL:
            assert proc.returncode == -signal.SIGKILL
            message = "(killed: no message)"
        else:
            assert proc.returncode == 128 + sig, (proc.returncode, err)
            message = err.strip().splitlines()[-1]
            assert message == f"interrupted after iteration {after}; {RESUME}"
        fault_report(
            f"launcher of a local 1x2 run gets {name} while its job runs",
            gone,
            message,
            f"job {pgid}'s processes gone {job_gone:.1f} s after the signal; checkpoints of iteration "
            f"{after or 2}; the next launch takes the run over",
        )
    # the second and third jobs resumed; after SIGKILL the dead job's run is taken over by the next launcher
    for job, after in zip(jobs_seen[1:], (1, 2), strict=True):  # the count the interrupt message gave
        assert (
            f"resumed after iteration {after} ({after}/4 done)"
            in (run_dir / "submitit" / f"{job}_0_log.out").read_text()
        )
    claim = claim_run(run_dir, NAME)
    assert claim.attach is None and claim.previous.job_id == str(jobs_seen[-1])
    release_claim(run_dir)
    history = job_history(run_dir)
    assert [int(h["job_id"]) for h in history] == jobs_seen
    assert [h.get("replaces") for h in history] == [None] + [h["job_id"] for h in history[:2]]
    ranks = pd.concat(pd.read_parquet(p) for p in sorted((run_dir / "parts").glob("rank_steps.rank*.parquet")))
    assert sorted(ranks.groupby("rank")["iteration"].apply(list)) == [[0, 1], [0, 1]]  # each iteration once
    # the console's loss is what steps.parquet records, the mean over ranks (the second job printed iteration 2)
    log = (run_dir / "submitit" / f"{jobs_seen[1]}_0_log.out").read_text()
    printed = float(re.search(r"iteration 2/4 .* loss (\S+)", log).group(1))
    assert printed == round(ranks[ranks["iteration"] == 1]["train_loss"].mean(), 4)
