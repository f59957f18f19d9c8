"""On one GPU: the export job of a multi-task `--export` run (issue 27) runs on the GPU it is given.

    pytest tests/gpu -q        # skipped where torch sees no CUDA GPU

A TRAINED 1 x 2 run is made by hand (`tests/test_export.py`'s `make_trained_run`) with `--device cuda`; the
launcher submits its export job (local executor: one task), which must export on cuda:0 and bench the dense and
the compact model on the CPU and the GPU, then mark the run DONE.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import torch
from test_export import make_trained_run

from prunex.bench import inference
from prunex.cluster.launch import launch
from prunex.cluster.lock import job_history
from prunex.pruning import export
from prunex.training.config import RunConfig
from prunex.training.export_step import export_device

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def test_the_export_job_exports_and_benches_on_the_gpu(data_root: Path, tmp_path: Path) -> None:
    config = RunConfig(
        method="hsadmm",
        nodes=1,
        procs_per_node=2,
        name="gx",
        device="cuda",
        export=True,
        bench_budget_s=0.05,
        bench_batch=8,
        executor="local",
        data_root=str(data_root),
        results=str(tmp_path / "r"),
    )
    assert config.export_job and export_device(config) == torch.device("cuda", 0)
    run_dir = make_trained_run(config)

    assert launch(config, echo=False) == run_dir
    assert (run_dir / "DONE").exists() and not (run_dir / "TRAINED").exists()
    assert [j["tasks"] for j in job_history(run_dir)] == [1]
    df = pd.read_parquet(run_dir / inference.INFERENCE_FILE)
    print(df.to_string())
    assert any(str(d).startswith("cuda") for d in df["device"]), df["device"].unique()
    summary = json.loads((run_dir / export.EXPORT_JSON).read_text())
    assert summary["compact_params"] < summary["dense_params"], summary
