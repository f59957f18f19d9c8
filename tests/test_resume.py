"""A run killed mid-way resumes from its checkpoints and ends exactly like an uninterrupted run."""

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


def _run(results: Path, kill_after_iteration: int | None = None) -> subprocess.CompletedProcess | None:
    cmd = [sys.executable, "-m", "prunex.run", *ARGS, "--executor", "local", "--results", str(results)]
    if kill_after_iteration is None:
        return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300, check=True)
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    ckpts = results / "adhoc" / "resume" / "checkpoints"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        if any(ckpts.glob(f"rank00000-it{kill_after_iteration:07d}.pt")):
            break
        assert proc.poll() is None, "the run finished before it could be interrupted"
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)  # the launcher and every rank, mid-run
    proc.wait()
    return None


def test_killed_run_resumes_to_the_same_result(data_root: Path, tmp_path: Path) -> None:
    _run(tmp_path / "a")
    _run(tmp_path / "b", kill_after_iteration=1)
    run_b = tmp_path / "b" / "adhoc" / "resume"
    assert not (run_b / "DONE").exists() and any((run_b / "checkpoints").iterdir())
    out = _run(tmp_path / "b")
    assert "resumed after iteration" in out.stdout
    run_a = tmp_path / "a" / "adhoc" / "resume"
    za = torch.load(run_a / "final_model.pt", weights_only=True)
    zb = torch.load(run_b / "final_model.pt", weights_only=True)
    assert za.keys() == zb.keys() and all(torch.equal(za[k], zb[k]) for k in za)
    timing = ["wall_s", "comm_s", "compute_s", "iter_s"]
    sa, sb = (pd.read_parquet(r / "steps.parquet").drop(columns=timing) for r in (run_a, run_b))
    pd.testing.assert_frame_equal(sa, sb)
    ra, rb = (pd.read_parquet(r / "residuals.parquet") for r in (run_a, run_b))
    pd.testing.assert_frame_equal(ra, rb)
    assert not (run_b / "checkpoints").exists()  # removed once the run is done
    # each attempt keeps its own meta: the resumed attempt did not overwrite the first one's
    first, second = (json.loads((run_b / name).read_text()) for name in ("meta.json", "meta.attempt2.json"))
    assert (first["attempt"], second["attempt"]) == (1, 2) and first["started"] <= second["started"]
    assert not (run_a / "meta.attempt2.json").exists()
