"""Preemption on the mini cluster: `scontrol requeue` of a running job; Slurm requeues it, the
requeued job resumes from its checkpoints and finishes with complete logs, each iteration once.
(That a resumed run ends bitwise equal to an uninterrupted one is tests/test_resume.py's check;
here the Slurm path is under test: requeue, resubmission through submitit, checkpoint pick-up.)
The file name sorts before test_minicluster.py, whose last test takes the session cluster down.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

import prunex
from prunex.config import ADMMConfig, RunConfig
from prunex.launch import SlurmOptions, launch, run_dir_for

pytestmark = pytest.mark.minicluster
SRC = str(Path(prunex.__file__).resolve().parents[1])


def _config(data_root: Path, results: Path, name: str) -> RunConfig:
    admm = ADMMConfig(iterations=3, local_epochs=1, channel_keep=0.5, rho_intra=0.05, rho_inter=0.005,
                      freeze_iteration=2, stop_on_convergence=False)  # fmt: skip
    return RunConfig(method="hsadmm", nodes=2, procs_per_node=1, executor="slurm", admm=admm, train_subset=128,
                     bn_batches=1, data_root=str(data_root), results=str(results), name=name)  # fmt: skip


def test_requeued_job_resumes_where_it_stopped(minicluster, data_root: Path, tmp_path: Path) -> None:
    cfg = _config(data_root, tmp_path, "requeued")
    run_dir = run_dir_for(cfg)
    errors: list[BaseException] = []

    def target() -> None:
        try:
            launch(cfg, SlurmOptions(time_min=15), echo=False)
        except BaseException as e:  # noqa: BLE001 - asserted below
            errors.append(e)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    deadline = time.monotonic() + 240
    ckpts = run_dir / "checkpoints"
    while not all(any(ckpts.glob(f"rank{r:05d}-it0000000.pt")) for r in (0, 1)):
        assert time.monotonic() < deadline and thread.is_alive(), "the run ended or stalled before the requeue"
        time.sleep(0.1)
    job_id = next((run_dir / "submitit").glob("*_submission.sh")).name.split("_")[0]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([SRC] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    subprocess.run(["scontrol", "requeue", job_id], check=True, env=env)
    thread.join(timeout=300)
    assert not thread.is_alive() and not errors, errors
    logs = "".join(p.read_text(errors="replace") for p in (run_dir / "submitit").glob("*_0_log.out"))
    assert "resumed after iteration" in logs, logs[-2000:]
    assert (run_dir / "DONE").exists() and (run_dir / "final_model.pt").exists()
    assert not ckpts.exists()  # removed once the run is done
    steps = pd.read_parquet(run_dir / "steps.parquet")
    assert list(steps["iteration"]) == [0, 1, 2]  # each iteration logged once, none lost, none repeated
    res = pd.read_parquet(run_dir / "residuals.parquet")
    assert sorted(res["iteration"].unique()) == [0, 1, 2]
    assert not res.duplicated(["iteration", "rank", "level", "layer"]).any()
