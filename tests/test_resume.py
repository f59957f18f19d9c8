"""A run killed mid-way resumes from its checkpoints and ends exactly like an uninterrupted run; so does
one that submitit's preemption signal stops: it checkpoints at the next evaluation point, is requeued
and resumes. Checkpoints come on the clock, not at every evaluation point."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import torch

from prunex.training import checkpoint

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow

ARGS = [
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
    "--train-subset",
    "128",
    "--rho-intra",
    "0.05",
    "--rho-inter",
    "0.005",
    "--freeze-iteration",
    "3",
    "--bn-batches",
    "2",
    "--name",
    "resume",
]


def _run(
    results: Path, *extra: str, kill_after_iteration: int | None = None, env: dict | None = None
) -> subprocess.CompletedProcess | None:
    cmd = [sys.executable, "-m", "prunex.run", *ARGS, *extra, "--executor", "local", "--results", str(results)]
    env = dict(os.environ, **(env or {}))
    if kill_after_iteration is None:
        return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300, check=True, env=env)
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    complete = results / "adhoc" / "resume" / "checkpoints" / f"it{kill_after_iteration:07d}" / "COMPLETE"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        if complete.exists():
            break
        assert proc.poll() is None, "the run finished before it could be interrupted"
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)  # the launcher and every rank, mid-run
    proc.wait()
    return None


def test_killed_and_preempted_run_resumes_to_the_same_result(data_root: Path, tmp_path: Path) -> None:
    # uninterrupted, default cadence (20 min): no checkpoint at all in a run this short. Its tasks are spawned, each
    # an interpreter of its own, and those of the killed and resumed run below are forked from the job's controller
    # (prunex.cluster.local_fork): the bitwise equality at the end holds across the two ways a task starts too
    _run(tmp_path / "a", env={"PRUNEX_LOCAL_FORK": "0"})
    run_a = tmp_path / "a" / "adhoc" / "resume"
    assert not (run_a / "checkpoints.parquet").exists()
    # a checkpoint at every evaluation point (cadence 0); SIGKILL once iteration 1's set is complete
    _run(tmp_path / "b", "--checkpoint-every-min", "0", kill_after_iteration=1)
    run_b = tmp_path / "b" / "adhoc" / "resume"
    assert not (run_b / "DONE").exists()
    # the newest complete set (the kill may have come before rank 0 removed set 0: the next save does)
    assert checkpoint.newest_complete(run_b) == checkpoint.set_dir(run_b, 1)
    files = ["node00000.pt", "rank00000.pt", "rank00001.pt", "replicated.pt"]  # each with its SHA-256 beside it
    assert sorted(p.name for p in (run_b / "checkpoints" / "it0000001").iterdir()) == sorted(
        ["COMPLETE", *files, *(f"{f}.sha256" for f in files)]
    )
    # relaunched with a 60-minute cadence; rank 1 receives submitit's preemption signal in iteration 2:
    # the ranks checkpoint at its end, submitit requeues the job, the requeued job resumes and finishes
    out = _run(tmp_path / "b", "--checkpoint-every-min", "60", env={"PRUNEX_FAULT_PREEMPT_AT": "2"})
    assert "resumed after iteration 2 (2/" in out.stdout and "resumed after iteration 3 (3/" in out.stdout, out.stdout
    assert "checkpoint (preemption signal)" in out.stdout
    ckpts = pd.read_parquet(run_b / "checkpoints.parquet")
    reasons = ckpts.groupby("iteration")["reason"].agg(set).to_dict()
    assert reasons == {0: {"every evaluation"}, 1: {"every evaluation"}, 2: {"preemption signal"}}
    written = ckpts[ckpts["iteration"] == 2].set_index("rank")
    assert written.loc[0, "files"] == 3 and written.loc[1, "files"] == 1  # replicated + node + own; own
    za = torch.load(run_a / "final_model.pt", weights_only=True)
    zb = torch.load(run_b / "final_model.pt", weights_only=True)
    assert za.keys() == zb.keys() and all(torch.equal(za[k], zb[k]) for k in za)
    timing = ["wall_s", "comm_s", "compute_s", "iter_s"]
    sa, sb = (pd.read_parquet(r / "steps.parquet").drop(columns=timing) for r in (run_a, run_b))
    pd.testing.assert_frame_equal(sa, sb)
    ra, rb = (pd.read_parquet(r / "residuals.parquet") for r in (run_a, run_b))
    pd.testing.assert_frame_equal(ra, rb)
    # every collective logged once: a resumed attempt's construction-time collectives are not logged again
    calls = ["iteration", "rank", "level", "op", "bytes", "inter_bytes", "intra_bytes"]
    ca, cb = (pd.read_parquet(r / "comm.parquet")[calls].sort_values(calls, ignore_index=True) for r in (run_a, run_b))
    pd.testing.assert_frame_equal(ca, cb)
    assert not (run_b / "checkpoints").exists()  # removed once the run is done
    # each attempt keeps its own meta: the resumed attempt did not overwrite the first one's
    first, second = (json.loads((run_b / name).read_text()) for name in ("meta.json", "meta.attempt2.json"))
    assert (first["attempt"], second["attempt"]) == (1, 2) and first["started"] <= second["started"]
    forked = "forked from the local job's controller after it loaded prunex.training.train"
    assert json.loads((run_a / "meta.json").read_text())["task_start"] == "its own interpreter"
    assert first["task_start"] == second["task_start"] == forked
    assert not (run_a / "meta.attempt2.json").exists()


def test_a_resumed_ddp_run_logs_its_parameter_broadcast_once(data_root: Path, tmp_path: Path) -> None:
    """Review (2026-11-28): DDP's constructor broadcasts the parameters, logged as iteration 0's; a resumed attempt
    builds DDP again and logged that broadcast as a second iteration-0 row, so steps.parquet's iteration 0 counted
    the model's bytes twice. The resumed attempt's construction-time collectives are now dropped."""
    cmd = [sys.executable, "-m", "prunex.run", "--method", "ddp", "--nodes", "1", "--procs-per-node", "2"]
    cmd += ["--epochs", "3", "--train-subset", "128", "--bn-batches", "2", "--name", "rd", "--checkpoint-every-min"]
    cmd += ["60", "--executor", "local", "--results", str(tmp_path)]
    env = dict(os.environ, PRUNEX_FAULT_PREEMPT_AT="3")  # checkpointed at the end of epoch 2, requeued, resumed
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300, check=True, env=env)
    assert "resumed after iteration 4 (4/" in out.stdout, out.stdout
    run = tmp_path / "adhoc" / "rd"
    comm = pd.read_parquet(run / "comm.parquet")
    broadcasts = comm[comm["op"] == "broadcast"]
    assert sorted(broadcasts["rank"]) == [0, 1] and set(broadcasts["iteration"]) == {0}, broadcasts
