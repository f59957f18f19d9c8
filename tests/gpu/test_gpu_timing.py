"""On one GPU (world size 1, NCCL): every method logs communication and compute on the GPU's clock.

    pytest tests/gpu -q        # skipped where torch sees no CUDA GPU

Each method trains ResNet-20 on 256 digits images for a few iterations through the ordinary
launcher (debug executor: one process, `--device cuda`), then its logs must show, for every
iteration: comm_s > 0 with a collective of the size the method is known to send, and
comm_s + compute_s within 10% of iter_s (all three from CUDA events, `prunex.comm.clocks`).
"""

from pathlib import Path

import pandas as pd
import pytest
import torch

from prunex.admm.residuals import FLAT_TABLE_COLUMNS, HSADMM_TABLE_COLUMNS
from prunex.cluster.launch import launch
from prunex.methods.topk import topk_count
from prunex.pruning.project import keep_count
from prunex.training.config import ADMMConfig, RunConfig
from prunex.training.models import build_model

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
METHODS = ("ddp", "topk", "pactrain", "flat_admm", "hsadmm")


def _known_bytes(method: str) -> tuple[str, str, int]:
    """(level, op, bytes per iteration) of the collective each method is known to send."""
    model = build_model("resnet20")
    params = [p for p in model.parameters()]
    n_params = sum(p.numel() for p in params)
    # BatchNorm statistics are re-estimated before evaluation (bn_batches 1 below), so the ADMM engines do
    # not send them (RunConfig.averages_bn_stats); H-SADMM's float32 residual table is summed intra-node
    # (HSADMM.total), flat ADMM's float64 one over the flat group (ConsensusEngine.total)
    if method == "ddp":
        return "flat", "allreduce", 4 * n_params  # every gradient once per step, in DDP's buckets
    if method == "topk":
        return "flat", "allgather", 2 * 4 * sum(topk_count(p.numel(), 0.01) for p in params if p.dim() > 1)
    if method == "pactrain":
        kept = sum(keep_count(p.numel(), 0.5) for p in params if p.dim() > 1)
        return "flat", "allreduce", 4 * (kept + sum(p.numel() for p in params if p.dim() <= 1))
    if method == "hsadmm":  # theta + u (Alg. 1 line 6) and the residual table (line 28)
        return "intra", "allreduce", 4 * n_params + 4 * len(HSADMM_TABLE_COLUMNS) * len(params)
    return "flat", "allreduce", 4 * n_params + 8 * len(FLAT_TABLE_COLUMNS) * len(params)


@pytest.fixture(scope="module")
def runs(data_root: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    results = tmp_path_factory.mktemp("gpu")
    out = {}
    for method in METHODS:
        config = RunConfig(
            method=method,
            model="resnet20",
            dataset="digits",
            executor="debug",
            device="cuda",
            epochs=1,
            batch_size=32,
            train_subset=256,
            bn_batches=1,
            admm=ADMMConfig(iterations=3, local_epochs=1, freeze_iteration=2, rho_intra=0.05, rho_inter=0.005),
            data_root=str(data_root),
            results=str(results),
        )
        out[method] = launch(config, echo=False)
    return out


@pytest.mark.parametrize("method", METHODS)
def test_times_come_from_the_gpu_and_add_up(runs: dict[str, Path], method: str) -> None:
    run_dir = runs[method]
    meta = pd.read_json(run_dir / "meta.json", typ="series")
    assert meta["backend"] == "nccl" and str(meta["device"]).startswith("cuda")
    steps = pd.read_parquet(run_dir / "steps.parquet")
    comm = pd.read_parquet(run_dir / "comm.parquet")
    level, op, nbytes = _known_bytes(method)
    sel = comm[(comm["level"] == level) & (comm["op"] == op)]
    per_iteration = sel.groupby("iteration")["bytes"].sum()
    assert (per_iteration == nbytes).all() and len(per_iteration) == len(steps), per_iteration
    assert (sel.groupby("iteration")["seconds"].sum() > 0).all()
    assert (steps["comm_s"] > 0).all(), steps[["iteration", "comm_s"]]
    total = steps["comm_s"] + steps["compute_s"]
    assert ((total - steps["iter_s"]).abs() <= 0.1 * steps["iter_s"]).all(), steps[["comm_s", "compute_s", "iter_s"]]


@pytest.mark.parametrize("method", ["flat_admm", "hsadmm"])
def test_rounds_are_logged_apart_from_local_training(runs: dict[str, Path], method: str) -> None:
    rounds = pd.read_parquet(runs[method] / "rounds.parquet")
    steps = pd.read_parquet(runs[method] / "steps.parquet")
    assert len(rounds) == len(steps) and (rounds["local_s"] > 0).all() and (rounds["consensus_s"] > 0).all()
    assert (steps["comm_s"].to_numpy() <= rounds["consensus_s"].to_numpy()).all()  # the round's collectives
