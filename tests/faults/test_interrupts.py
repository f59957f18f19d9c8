"""Interrupting and killing the launcher of a local run, with real processes (issue 19).

One run (hsadmm, 1 node x 2 processes, 64 images) is launched four times with `python -m
prunex.run`: its launcher gets SIGINT, then SIGTERM, then SIGKILL, each while rank 0 holds at a
known iteration (PRUNEX_FAULT_HOLD_AT, prunex.train), and the fourth launch runs to the end. After
every signal no process of the job survives (its process group is empty) within a bound, and the
next launch resumes from the checkpoint. The run directory's job history shows one job at a time:
each new job was submitted only after the one it replaces had gone, and every iteration is logged
exactly once.
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

from prunex.jobs import group_members
from prunex.lock import job_history

ROOT = Path(__file__).resolve().parents[2]
GONE_BOUND_S = 15.0  # SIGTERM to the group, 10 s grace, then SIGKILL; SIGKILL of the launcher is immediate
NAME = "interrupted"


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


def _gone_after(pgid: int, since: float) -> float:
    while group_members(pgid):
        assert time.monotonic() - since < GONE_BOUND_S + 30, f"job {pgid} outlived its launcher"
        time.sleep(0.05)
    return time.monotonic() - since


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
        _, err = proc.communicate(timeout=GONE_BOUND_S + 60)
        gone = _gone_after(pgid, t0)
        assert gone < GONE_BOUND_S, gone
        name = signal.Signals(sig).name
        if sig == signal.SIGKILL:
            assert proc.returncode == -signal.SIGKILL
            message = "(killed: no message)"
        else:
            assert proc.returncode == 128 + sig, (proc.returncode, err)
            message = err.strip().splitlines()[-1]
            assert (
                message
                == f"interrupted after iteration {after}; run the same command again to resume from the checkpoint"
            )
        fault_report(
            f"launcher of a local 1x2 run gets {name} while its job runs",
            gone,
            message,
            f"no process of job {pgid}; checkpoints of iteration {after if after else 2}; the next launch resumes",
        )
    # the fourth launch: no hold, resumes and finishes
    t0 = time.monotonic()
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    log = next((run_dir / "submitit").glob(f"{json.loads((run_dir / 'job.json').read_text())['job_id']}_0_log.out"))
    assert "resumed after iteration 1 (2/4 done)" in log.read_text()
    steps = pd.read_parquet(run_dir / "steps.parquet")
    assert list(steps["iteration"]) == [0, 1, 2, 3] and (run_dir / "DONE").exists()  # each iteration once
    # the console's loss is what steps.parquet records: the mean over ranks
    printed = [float(m) for m in re.findall(r"iteration \d/4 .* loss (\S+)", log.read_text())]
    assert printed == [round(x, 4) for x in steps["train_loss"].iloc[2:]], (printed, steps["train_loss"])
    history = job_history(run_dir)
    assert [int(h["job_id"]) for h in history[:3]] == jobs_seen and len(history) == 4
    # one job at a time: each job replaces the one before, submitted only once that one had gone
    assert [h.get("replaces") for h in history] == [None] + [h["job_id"] for h in history[:3]]
    fault_report(
        "re-run after the three interrupts",
        time.monotonic() - t0,
        "resumed after iteration 1 (2/4 done)",
        "DONE; iterations 0-3 logged once each; jobs.jsonl: 4 jobs, each replacing the previous one",
    )
