"""On one GPU: the export job of a multi-task `--export` run (issue 27) runs on the GPU it is given.

    pytest tests/gpu -q        # skipped where torch sees no CUDA GPU

A TRAINED 1 x 2 run is made by hand (as `tests/test_export.py` does on the CPU) with `--device cuda`; the
launcher submits its export job (local executor: one task), which must export on cuda:0 and bench the dense and
the compact model on the CPU and the GPU, then mark the run DONE.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import torch

from prunex.bench import inference
from prunex.bench.inference import mask_randomly_
from prunex.cluster.launch import launch
from prunex.cluster.lock import job_history
from prunex.cluster.preflight import preflight
from prunex.pruning import export
from prunex.training.config import RunConfig
from prunex.training.export_step import export_device
from prunex.training.log import write_marker
from prunex.training.models import build_model

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
    run_dir = preflight(config)
    (run_dir / "config.json").write_text(json.dumps(config.to_dict()))
    model = mask_randomly_(build_model("resnet20").eval(), filter_keep=0.5, channel_keep=0.5, seed=1)
    torch.save(model.state_dict(), run_dir / "final_model.pt")
    export.write_checksum(run_dir / "final_model.pt")
    write_marker(run_dir / "TRAINED")

    assert launch(config, echo=False) == run_dir
    assert (run_dir / "DONE").exists() and not (run_dir / "TRAINED").exists()
    assert [j["tasks"] for j in job_history(run_dir)] == [1]
    df = pd.read_parquet(run_dir / inference.INFERENCE_FILE)
    print(df.to_string())
    assert any(str(d).startswith("cuda") for d in df["device"]), df["device"].unique()
    summary = json.loads((run_dir / export.EXPORT_JSON).read_text())
    assert summary["compact_params"] < summary["dense_params"], summary
