"""Preemption on the mini cluster: `scontrol requeue` of a running job; Slurm requeues it, the
requeued job resumes from its checkpoints and ends with the same final parameters and logs as an
uninterrupted run (CPU, deterministic), each iteration logged once. The uninterrupted reference
runs on the same cluster while Slurm holds the requeued job (both fit: one task per node each, 2
CPUs per node), so the two share executor, placement and thread counts. The file name sorts
before test_minicluster.py, whose last test takes the session cluster down.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
import torch

import prunex
from prunex.cluster.launch import launch
from prunex.cluster.rundir import run_dir_for
from prunex.cluster.slurm import SlurmOptions
from prunex.training.config import ADMMConfig, RunConfig

pytestmark = pytest.mark.minicluster
SRC = str(Path(prunex.__file__).resolve().parents[1])


def _config(data_root: Path, results: Path, name: str) -> RunConfig:
    admm = ADMMConfig(
        iterations=3,
        local_epochs=1,
        channel_keep=0.5,
        rho_intra=0.05,
        rho_inter=0.005,
        freeze_iteration=2,
        stop_on_convergence=False,
    )
    return RunConfig(
        method="hsadmm",
        nodes=2,
        procs_per_node=1,
        executor="slurm",
        device="cpu",  # the mini cluster has no GPUs (the slurm executor defaults to cuda)
        admm=admm,
        train_subset=128,
        bn_batches=1,
        checkpoint_every_min=0,  # a checkpoint set at every evaluation point
        data_root=str(data_root),
        results=str(results),
        name=name,
    )


def _state(job_id: str) -> str:
    res = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True)
    return res.stdout.strip() or "GONE"


def test_requeued_job_resumes_to_the_same_result(
    minicluster, data_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The requeued run's rank 0 holds before iteration 1 (once iteration 0's checkpoints are complete)
    # until Slurm has taken the attempt off the node: a short run would otherwise finish within
    # KillWait of the requeue (seen in a full suite run: the job completed and was never requeued).
    hold = tmp_path / "hold"
    hold.touch()
    for key, value in {"AT": "1", "FILE": str(hold), "RUNS": "requeued"}.items():
        monkeypatch.setenv(f"PRUNEX_FAULT_HOLD_{key}", value)  # the jobs inherit the environment
    results: dict[str, Path] = {}
    errors: list[BaseException] = []

    def target(name: str) -> None:
        try:
            # separate results roots: the two ask for the same training, which would otherwise be one shared run
            results[name] = launch(_config(data_root, tmp_path / name, name), SlurmOptions(time_min=15), echo=False)
        except BaseException as e:  # noqa: BLE001 - asserted below
            errors.append(e)

    requeued = threading.Thread(target=target, args=("requeued",), daemon=True)
    requeued.start()
    run_dir = run_dir_for(_config(data_root, tmp_path / "requeued", "requeued"))
    deadline = time.monotonic() + 240
    ckpts = run_dir / "checkpoints"
    while not (ckpts / "it0000000" / "COMPLETE").exists():
        assert time.monotonic() < deadline and requeued.is_alive(), "the run ended or stalled before the requeue"
        time.sleep(0.1)
    job_id = next((run_dir / "submitit").glob("*_submission.sh")).name.split("_")[0]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([SRC] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    subprocess.run(["scontrol", "requeue", job_id], check=True, env=env)
    # the held attempt is ended: SIGTERM (which submitit ignores), SIGKILL after KillWait (COMPLETING), then
    # the job waits for its next start (PENDING); released earlier, the attempt could still finish the run
    while _state(job_id) != "PENDING":
        assert time.monotonic() < deadline, f"Slurm did not end the requeued attempt ({_state(job_id)})"
        time.sleep(0.2)
    hold.unlink()  # the requeued attempt runs through
    plain = threading.Thread(target=target, args=("plain",), daemon=True)
    plain.start()  # the reference, while Slurm holds the requeued job (cred_expire + 1 s)
    for t in (requeued, plain):
        t.join(timeout=300)
    assert not requeued.is_alive() and not plain.is_alive() and not errors, errors
    logs = "".join(p.read_text(errors="replace") for p in (run_dir / "submitit").glob("*_0_log.out"))
    assert "resumed after iteration" in logs, logs[-2000:]
    assert (run_dir / "DONE").exists() and not ckpts.exists()  # checkpoints removed once the run is done
    za = torch.load(results["plain"] / "final_model.pt", weights_only=True)
    zb = torch.load(run_dir / "final_model.pt", weights_only=True)
    assert za.keys() == zb.keys() and all(torch.equal(za[k], zb[k]) for k in za)
    timing = ["wall_s", "comm_s", "compute_s", "iter_s", "run_id"]
    sa, sb = (pd.read_parquet(r / "steps.parquet").drop(columns=timing) for r in (results["plain"], run_dir))
    pd.testing.assert_frame_equal(sa, sb)
    assert list(sb["iteration"]) == [0, 1, 2]  # each iteration logged once, none lost, none repeated
    ra, rb = (
        pd.read_parquet(r / "residuals.parquet").drop(columns=["run_id"], errors="ignore")
        for r in (results["plain"], run_dir)
    )
    pd.testing.assert_frame_equal(ra, rb)
