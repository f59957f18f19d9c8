"""`hsadmm` with channel keep 0.5 on 2 emulated nodes x 2 (the shared pool of 4 gloo processes,
`distributed.train_on_pool`), on 512 training images: what the run
writes and sends. How well it learns: `python -m benchmarks.learning`."""

import json
import math
from pathlib import Path

import pandas as pd
import pytest
from distributed import train_on_pool

from prunex.admm.residuals import HSADMM_TABLE_COLUMNS
from prunex.perfmodel import workload
from prunex.training.config import ADMMConfig, RunConfig
from prunex.training.log import STEPS_COLUMNS
from prunex.training.models import build_model

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def run(data_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    admm = ADMMConfig(
        iterations=4,
        local_epochs=1,
        channel_keep=0.5,
        rho_intra=0.05,
        rho_inter=0.005,
        freeze_iteration=2,
        retrain_epochs=1,
    )
    cfg = RunConfig(
        method="hsadmm",
        nodes=2,
        procs_per_node=2,
        admm=admm,
        train_subset=512,  # 4 steps per local epoch per rank; how well it learns is benchmarks/learning.py's job
        bn_batches=2,
        data_root=str(data_root),
        results=str(tmp_path_factory.mktemp("results")),
    )
    return train_on_pool(cfg)


def test_evaluates_the_consensus_every_outer_iteration(run: Path) -> None:
    steps = pd.read_parquet(run / "steps.parquet")
    assert list(steps.columns) == STEPS_COLUMNS and len(steps) == 5  # 4 outer + 1 retraining
    assert steps["test_acc"].notna().all() and steps["test_acc"].between(0, 1).all()


def test_inter_node_bytes_are_the_kept_slices(run: Path) -> None:
    comm = pd.read_parquet(run / "comm.parquet")
    masks = pd.read_parquet(run / "masks.parquet")
    model = build_model("resnet20")
    params = dict(model.named_parameters())
    glob = masks[masks["kind"] == "global"]
    constrained = set(glob["layer"])
    # BatchNorm statistics are re-estimated before evaluation (bn_batches 2), so none are sent: the payload
    # is the analytic minimum, the kept slices of the constrained layers and the other parameters, fp32
    dense_rest = sum(p.numel() for n, p in params.items() if n not in constrained)
    dense_all = sum(p.numel() for p in params.values())
    table = 4 * len(HSADMM_TABLE_COLUMNS) * len(params)  # the float32 residual table, in the node then across
    inter = comm[(comm["level"] == "inter") & (comm["op"] == "allreduce")]
    assert set(inter["rank"]) == {0, 2}  # leaders only
    intra = comm[(comm["level"] == "intra") & (comm["op"] == "allreduce")]
    assert (intra.groupby(["iteration", "rank"])["bytes"].sum() == 4 * dense_all + table).all()  # theta + u
    config = json.loads((run / "config.json").read_text())
    opts = workload.Options.from_config(RunConfig.from_dict(config))
    spec = workload.model_spec("resnet20")
    for it, rows in glob.groupby("iteration"):
        kernel = {n: math.prod(params[n].shape[2:]) for n in rows["layer"]}
        compact = sum(r.kept_out * r.kept_in * kernel[r.layer] for r in rows.itertuples()) + dense_rest
        sent = inter[inter["iteration"] == it].groupby("rank")["bytes"].sum()
        assert (sent == 4 * compact + table).all(), (it, sent.tolist(), 4 * compact)  # the kept slices, fp32
        assert compact < 0.65 * dense_all  # channel keep 0.5 (union of 2 nodes' masks)
        # and the performance model, given the iteration's kept groups, predicts that payload exactly
        kept = {r.layer: (r.kept_out, r.kept_in) for r in rows.itertuples()}
        w = workload.hsadmm_workload(spec, kept, opts, shard=1, dynamic=0.0)
        assert sum(c.nbytes for c in w.collectives if (c.level, c.op) == ("inter", "allreduce")) == 4 * compact + table
    # no mask synchronisation once the mask froze (freeze_iteration 2: iterations 0-1 are dynamic)
    assert sorted(comm.loc[comm["op"] == "mask_sync", "iteration"].unique()) == [0, 1]
    assert (glob[glob["iteration"] >= 2]["drift"] == 0).all()
    # steps.inter_bytes: what the comm table says crossed nodes
    steps = pd.read_parquet(run / "steps.parquet").set_index("iteration")
    pd.testing.assert_series_equal(
        steps["inter_bytes"], comm.groupby("iteration")["inter_bytes"].sum(), check_names=False
    )


def test_residuals_fall(run: Path) -> None:
    res = pd.read_parquet(run / "residuals.parquet")
    total = res.groupby(["level", "iteration"])["primal"].apply(lambda s: math.sqrt((s**2).sum()))
    assert total["intra"].iloc[-1] < 0.5 * total["intra"].iloc[0]
    assert total["inter"].iloc[-1] < total["inter"].iloc[0]
    assert set(res["level"]) == {"intra", "inter"}
    assert set(res.loc[res["level"] == "inter", "rank"]) == {0, 2}
    assert (res["rho"] <= 10.0).all()


def test_the_logged_accuracy_is_the_exported_models(run: Path) -> None:
    """The accuracy the run logs last is that of `final_model.pt` on the whole test split, and the exported
    compact model predicts the same: the model a run reports is the model it exports (issue 26)."""
    import torch
    from torch.utils.data import DataLoader

    from prunex.pruning.export import compact, load_run_model
    from prunex.training.data import load_dataset
    from prunex.training.evaluation import evaluate

    model, config = load_run_model(run)
    loader = DataLoader(load_dataset(config["dataset"], config["data_root"], train=False), batch_size=256)
    steps = pd.read_parquet(run / "steps.parquet").sort_values("iteration")
    logged = steps["test_acc"].iloc[-1]
    assert not math.isnan(logged), "the last iteration was not evaluated"
    cpu = torch.device("cpu")
    assert evaluate(model, loader, cpu) == logged
    small, _ = compact(model)
    assert evaluate(small, loader, cpu) == logged


def test_rounds_log_local_training_apart_from_the_consensus(run: Path) -> None:
    rounds = pd.read_parquet(run / "rounds.parquet")
    comm = pd.read_parquet(run / "comm.parquet")
    assert sorted(rounds.groupby("iteration")["rank"].apply(sorted)) == [[0, 1, 2, 3]] * 5
    assert (rounds["local_s"] > 0).all() and (rounds["consensus_s"] > 0).all()
    # every training collective of an iteration is the round's: their union fits in the round
    per_rank = rounds.set_index(["iteration", "rank"])
    comm_s = comm.groupby(["iteration", "rank"])["exclusive_s"].sum()
    assert (comm_s <= per_rank["consensus_s"].reindex(comm_s.index)).all()
