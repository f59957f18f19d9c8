"""The baselines `ddp`, `topk` and `pactrain`: step equivalence on 4 real gloo processes (2 nodes x 2),
Top-K's error feedback, PacTrain's masks and payload, and 2 x 1 runs of Top-K and PacTrain
(`distributed.train_on_pool`)."""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import pandas as pd
import pytest
import torch
from distributed import run_distributed, train_on_pool
from torch import nn
from torch.utils.data import TensorDataset

from prunex.methods import method_class
from prunex.methods.base import Context
from prunex.methods.pactrain import magnitude_mask, prune_schedule
from prunex.methods.topk import topk_compress, topk_count, warmup_ratio
from prunex.pruning.project import keep_count
from prunex.training.config import PacTrainConfig, RunConfig, TopKConfig
from prunex.training.log import COMM_COLUMNS, COMM_LATER_COLUMNS, STEPS_COLUMNS, RunLog
from prunex.training.topology import build_groups, discover

WORLD, PER_RANK, STEPS = 4, 8, 2
LR, MOMENTUM, WD = 0.1, 0.9, 1e-4


class TinyNet(nn.Module):
    """Conv + linear without BatchNorm: batch statistics would differ between 4 x 8 and 1 x 32."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3)
        self.fc = nn.Linear(6 * 6 * 6, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.relu(self.conv(x)).flatten(1))


def batches() -> list[tuple[torch.Tensor, torch.Tensor]]:
    """STEPS fixed global batches of WORLD * PER_RANK samples; rank r's part is rows 8r .. 8r+7."""
    g = torch.Generator().manual_seed(123)
    n = WORLD * PER_RANK
    return [(torch.randn(n, 3, 8, 8, generator=g), torch.randint(0, 10, (n,), generator=g)) for _ in range(STEPS)]


def fresh_model() -> TinyNet:
    torch.manual_seed(0)
    return TinyNet()


# Cases run on the same 4 processes: (name, method, RunConfig overrides, epochs, resume). With `epochs`,
# every step starts an epoch (on_epoch_start(k) before step k: schedules advance); with `resume`, the
# method is rebuilt on a fresh model from the old one's state_dict before step 1.
TOPK01 = {"topk": TopKConfig(ratio=0.1, warmup_epochs=0)}
TOPK_MC = {"topk": TopKConfig(ratio=0.1, warmup_epochs=2, momentum_correction=True)}
PAC03 = {"pactrain": PacTrainConfig(density=0.3)}
CASES = [
    ("ddp", "ddp", {}, False, False),
    ("topk1", "topk", {"topk": TopKConfig(ratio=1.0)}, False, False),
    ("topk_mc1", "topk", {"topk": TopKConfig(ratio=1.0, momentum_correction=True)}, False, False),
    ("topk01", "topk", TOPK01, False, False),
    ("topk01_resumed", "topk", TOPK01, False, True),
    ("topk_mc", "topk", TOPK_MC, True, False),
    ("topk_mc_resumed", "topk", TOPK_MC, True, True),
    ("pac1", "pactrain", {"pactrain": PacTrainConfig(density=1.0)}, True, False),
    ("pac03", "pactrain", PAC03, True, False),
    ("pac03_resumed", "pactrain", PAC03, True, True),
    ("pac_sched", "pactrain", {"pactrain": PacTrainConfig(density=0.3, prune_epochs=2, prune_every=1)}, True, False),
]


def _cases_worker(rank: int, tmp: str) -> dict:
    topo = discover(2, 2)
    groups = build_groups(topo, 60)
    device = torch.device("cpu")
    from prunex.comm import Comm

    comm = Comm(topo, groups, device)
    data = batches()
    lo, hi = PER_RANK * rank, PER_RANK * (rank + 1)
    train_set = TensorDataset(data[0][0], data[0][1])
    out: dict = {}
    for name, method, overrides, epochs, resume in CASES:
        cfg = RunConfig(
            method=method,
            nodes=2,
            procs_per_node=2,
            batch_size=PER_RANK,
            lr=LR,
            momentum=MOMENTUM,
            weight_decay=WD,
            **overrides,
        )
        log = RunLog(Path(tmp) / name, rank)
        ctx = Context(cfg, topo, groups, comm, device, fresh_model(), train_set, log)
        m = method_class(method)(ctx)
        res: dict = {}
        for k, (x, y) in enumerate(data):
            comm.iteration = k
            if resume and k == 1:
                state = m.state_dict()
                ctx = Context(cfg, topo, groups, comm, device, fresh_model(), train_set, log)
                m = method_class(method)(ctx)
                m.load_state_dict(state)
                if epochs:
                    m.on_epoch_start(0)  # re-entering a started epoch: no second mask update
            if epochs:
                m.on_epoch_start(k)
            if name == "topk01" and k == STEPS - 1:  # error feedback across ranks, at the last step
                probe = fresh_model()
                probe.load_state_dict(ctx.model.state_dict())
                nn.CrossEntropyLoss()(probe(x[lo:hi]), y[lo:hi]).backward()
                res["local_grads"] = [p.grad.clone() for p in probe.parameters() if p.dim() > 1]
                res["old_residuals"] = [r.clone() for r in m.residuals]
            m.step(x[lo:hi], y[lo:hi])
        if method == "topk":
            res["residuals"] = [r.clone() for r in m.residuals]
            res["applied"] = [p.grad.clone() for p in m.sparse]
            res["ks"] = list(m.ks)
        if method == "pactrain":
            res["masks"] = [mk.clone() for mk in m.masks]
        res["params"] = {n: p.detach().clone() for n, p in ctx.model.named_parameters()}
        res["records"] = comm.drain()
        res["overhead"] = list(log.tables.get("overhead", []))
        out[name] = res
    # through a file: run_distributed's result pipe holds ~64 KB and is read only after every rank exits
    path = Path(tmp) / f"cases.rank{rank}.pt"
    torch.save(out, path)
    return str(path)


@pytest.fixture(scope="module")
def cases(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    paths = run_distributed(_cases_worker, WORLD, str(tmp_path_factory.mktemp("logs")), timeout_s=180)
    return [torch.load(p, weights_only=False) for p in paths]


def reference(sparse_momentum: float = MOMENTUM) -> dict[str, torch.Tensor]:
    """STEPS single-process SGD steps of the same initial model on the 32-sample unions.
    `sparse_momentum` is the momentum of the tensors with dim > 1 (0 for DGC's momentum correction
    with every entry sent: momentum factor masking resets the velocity after every step)."""
    model = fresh_model()
    sparse = [p for p in model.parameters() if p.dim() > 1]
    dense = [p for p in model.parameters() if p.dim() <= 1]
    opt = torch.optim.SGD(
        [{"params": sparse, "momentum": sparse_momentum}, {"params": dense}], lr=LR, momentum=MOMENTUM, weight_decay=WD
    )
    for x, y in batches():
        opt.zero_grad()
        nn.CrossEntropyLoss()(model(x), y).backward()
        opt.step()
    return {n: p.detach() for n, p in model.named_parameters()}


def assert_params_close(got: dict[str, torch.Tensor], want: dict[str, torch.Tensor]) -> None:
    assert got.keys() == want.keys()
    for n in want:
        torch.testing.assert_close(got[n], want[n], rtol=1e-5, atol=1e-6, msg=lambda m, n=n: f"{n}: {m}")


def assert_ranks_identical(cases: list[dict], name: str) -> None:
    for r in cases[1:]:
        for n, p in cases[0][name]["params"].items():
            assert torch.equal(r[name]["params"][n], p), f"{name}: {n} differs between ranks"


# -- step equivalence -------------------------------------------------------------------------------
def test_ddp_on_4_ranks_equals_one_process_on_the_union(cases: list[dict]) -> None:
    want = reference()
    for r in cases:
        assert_params_close(r["ddp"]["params"], want)


@pytest.mark.parametrize("name", ["topk1", "pac1"])
def test_dense_limits_take_the_ddp_step(cases: list[dict], name: str) -> None:
    """topk at ratio 1.0 and pactrain at density 1.0 (mask update included) equal ddp."""
    for r in cases:
        assert_params_close(r[name]["params"], r["ddp"]["params"])
    assert_ranks_identical(cases, name)


@pytest.mark.parametrize("name", ["topk01", "topk_mc", "pac03"])
def test_state_dict_resumes_exactly(cases: list[dict], name: str) -> None:
    for r in cases:
        for n, p in r[name]["params"].items():
            assert torch.equal(r[f"{name}_resumed"]["params"][n], p), n


def test_topk_momentum_correction_at_ratio_one_is_sgd_without_momentum(cases: list[dict]) -> None:
    want = reference(sparse_momentum=0.0)
    for r in cases:
        assert_params_close(r["topk_mc1"]["params"], want)


# -- Top-K --------------------------------------------------------------------------------------------
def test_topk_compress_conserves_mass_exactly() -> None:
    g = torch.Generator().manual_seed(0)
    grad, old_residual = torch.randn(16, 8, 3, 3, generator=g), torch.randn(16, 8, 3, 3, generator=g)
    acc = grad + old_residual
    k = topk_count(acc.numel(), 0.01)
    assert k == math.ceil(0.01 * 1152) == 12
    values, indices, residual = topk_compress(acc, k)
    assert values.shape == (k,) and indices.dtype == torch.int32 and residual.shape == acc.shape
    assert len(set(indices.tolist())) == k
    sent = torch.zeros(acc.numel()).index_put_((indices.long(),), values).view_as(acc)
    assert torch.equal(sent + residual, grad + old_residual)
    assert torch.equal(residual.reshape(-1)[indices.long()], torch.zeros(k))
    # the k sent entries are the k largest magnitudes
    assert values.abs().min() >= residual.abs().max()
    assert topk_count(10, 1e-6) == 1 and topk_count(10, 1.0) == 10


def test_topk_exchange_conserves_mass_across_ranks(cases: list[dict]) -> None:
    """sum over ranks of (grad + old residual) == world * averaged sent gradient + sum of new residuals."""
    for i in range(len(cases[0]["topk01"]["local_grads"])):
        acc = sum(r["topk01"]["local_grads"][i] + r["topk01"]["old_residuals"][i] for r in cases)
        new = WORLD * cases[0]["topk01"]["applied"][i] + sum(r["topk01"]["residuals"][i] for r in cases)
        torch.testing.assert_close(new, acc, rtol=1e-5, atol=1e-6)
        # every rank kept exactly numel - k entries as residual (or fewer where acc was zero)
        for r in cases:
            assert (
                int((r["topk01"]["residuals"][i] != 0).sum())
                <= r["topk01"]["residuals"][i].numel() - r["topk01"]["ks"][i]
            )
    assert_ranks_identical(cases, "topk01")


def test_topk_sends_values_and_int32_indices_by_allgather(cases: list[dict]) -> None:
    model = fresh_model()
    sparse = [p.numel() for p in model.parameters() if p.dim() > 1]
    dense = sum(p.numel() for p in model.parameters() if p.dim() <= 1)
    k_total = sum(topk_count(n, 0.1) for n in sparse)
    for r in cases:
        recs = pd.DataFrame(r["topk01"]["records"])
        gathers = recs[recs["op"] == "allgather"]
        assert (gathers["level"] == "flat").all() and len(gathers) == 2 * STEPS
        assert (gathers["bytes"] == 4 * k_total).all()  # fp32 values, then int32 indices
        reduces = recs[recs["op"] == "allreduce"]
        assert len(reduces) == STEPS and (reduces["bytes"] == 4 * dense).all()
        overhead = pd.DataFrame(r["topk01"]["overhead"])
        assert list(overhead["iteration"]) == list(range(STEPS))
        assert (overhead[["select_s", "scatter_s"]] > 0).all().all()


def test_warmup_ratio_follows_dgc() -> None:
    assert [round(warmup_ratio(0.001, e, 4), 4) for e in range(6)] == [0.25, 0.0629, 0.0158, 0.004, 0.001, 0.001]
    assert warmup_ratio(0.01, 0, 0) == 0.01 and warmup_ratio(0.5, 0, 3) == 0.5


# -- PacTrain --------------------------------------------------------------------------------------
def test_prune_schedule_ramps_linearly_to_the_density() -> None:
    assert prune_schedule(0.5, 1, 1) == {0: 0.5}
    assert prune_schedule(0.3, 0, 1) == {0: 0.3}
    s = prune_schedule(0.2, 8, 2)
    assert list(s) == [0, 2, 4, 6] and s[6] == pytest.approx(0.2)
    assert [round(d, 6) for d in s.values()] == [0.8, 0.6, 0.4, 0.2]


def test_magnitude_mask_is_nested_and_exact() -> None:
    w = torch.randn(32, 4, 3, 3, generator=torch.Generator().manual_seed(0))
    m1 = magnitude_mask(w, torch.ones_like(w, dtype=torch.bool), 0.5)
    assert int(m1.sum()) == keep_count(w.numel(), 0.5)
    assert w[m1].abs().min() >= w[~m1].abs().max()
    m2 = magnitude_mask(w * m1, m1, 0.3)
    assert int(m2.sum()) == keep_count(w.numel(), 0.3) and not (m2 & ~m1).any()


def test_pactrain_payload_is_the_density_of_the_pruned_weights(cases: list[dict]) -> None:
    """At density 0.3 the packed AllReduce carries exactly ceil(0.3 n) entries of every tensor with
    dim > 1 (n entries each) plus all 1-D entries: over the weights with dim > 1, 30% of the dense
    payload up to one entry per tensor of rounding; the 1-D parameters are always sent dense."""
    model = fresh_model()
    sparse = [p.numel() for p in model.parameters() if p.dim() > 1]
    dense = sum(p.numel() for p in model.parameters() if p.dim() <= 1)
    kept = sum(keep_count(n, 0.3) for n in sparse)
    for r in cases:
        recs = pd.DataFrame(r["pac03"]["records"])
        ar = recs[recs["op"] == "allreduce"]
        assert len(ar) == STEPS and (ar["level"] == "flat").all()
        assert (ar["bytes"] == 4 * (kept + dense)).all()
        over_weights = (ar["bytes"].iloc[0] - 4 * dense) / (4 * sum(sparse))
        assert 0.3 <= over_weights < 0.3 + len(sparse) / sum(sparse)
        dense_ar = pd.DataFrame(r["pac1"]["records"]).query("op == 'allreduce'")
        assert (dense_ar["bytes"] == 4 * (sum(sparse) + dense)).all()  # at density 1: DDP's payload
        # the mask is broadcast once (uint8, one byte per prunable entry), at the update only
        bc = recs[recs["op"] == "broadcast"]
        assert len(bc) == 1 and bc["bytes"].iloc[0] == sum(sparse) and bc["iteration"].iloc[0] == 0
        assert not (recs["op"] == "allgather").any()


def test_pactrain_masks_agree_and_pruned_weights_stay_zero(cases: list[dict]) -> None:
    model = fresh_model()
    names = [n for n, p in model.named_parameters() if p.dim() > 1]
    for r in cases:
        for i, n in enumerate(names):
            mask = r["pac03"]["masks"][i]
            assert torch.equal(mask, cases[0]["pac03"]["masks"][i])
            assert int(mask.sum()) == keep_count(mask.numel(), 0.3)
            w = r["pac03"]["params"][n]
            assert torch.equal(w[~mask], torch.zeros(int((~mask).sum())))  # momentum and decay did not revive them
            assert (w[mask] != 0).all()
    assert_ranks_identical(cases, "pac03")


# -- end to end ----------------------------------------------------------------------------------------
RUNS = {
    # 36 steps of resnet20 on digits are too few for Top-K's error feedback to catch up at the paper's
    # ratio 0.01 (final accuracy ~0.11, chance) and leave 0.1 barely above the bar (0.36-0.39); 0.25
    # reaches ~0.6 (DDP: ~0.8), a margin that does not make the test flaky
    "topk": {"topk": TopKConfig(ratio=0.25)},
    "pactrain": {"pactrain": PacTrainConfig(density=0.5)},
}


@pytest.fixture(scope="module", params=sorted(RUNS))
def run(request: pytest.FixtureRequest, data_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    method = request.param
    cfg = RunConfig(
        method=method,
        nodes=2,  # one process per node: the tables and the exchange are the same at 2 x 2, at half the processes
        procs_per_node=1,
        epochs=3,
        eval_every=3,
        train_subset=256,  # 4 steps per epoch per rank; how well it learns is benchmarks/learning.py's job
        bn_batches=2,
        data_root=str(data_root),
        results=str(tmp_path_factory.mktemp("results")),
        **RUNS[method],
    )
    return train_on_pool(cfg)  # what each rank of a job runs, on this module's pool


@pytest.mark.slow
def test_run_writes_complete_tables(run: Path) -> None:
    method = json.loads((run / "config.json").read_text())["method"]
    for name in ("config.json", "meta.json", "steps.parquet", "comm.parquet", "overhead.parquet", "DONE"):
        assert (run / name).exists(), name
    steps = pd.read_parquet(run / "steps.parquet")
    comm = pd.read_parquet(run / "comm.parquet")
    overhead = pd.read_parquet(run / "overhead.parquet")
    assert list(steps.columns) == STEPS_COLUMNS and list(comm.columns) == COMM_COLUMNS + COMM_LATER_COLUMNS
    assert len(steps) == 3 * 4 and list(steps["iteration"]) == list(range(12))  # 256 // 2 ranks // 32 = 4
    assert not steps.drop(columns="test_acc").isna().any().any()
    assert not comm.isna().any().any() and not overhead.isna().any().any()
    evaluated = steps.dropna(subset=["test_acc"])
    assert list(evaluated["epoch"]) == [3.0]
    assert evaluated["test_acc"].between(0, 1).all()
    assert (steps["inter_bytes"] > 0).all()
    assert len(overhead) == 2 * len(steps) and set(overhead["rank"]) == {0, 1}
    per_rank_iter = comm.groupby(["iteration", "rank"])["op"].apply(list)
    assert len(per_rank_iter) == 2 * len(steps)
    if method == "topk":
        assert (per_rank_iter.map(lambda ops: ops.count("allgather")) == 2).all()
    else:
        assert (per_rank_iter.map(lambda ops: ops.count("allreduce")) == 1).all()
        assert set(comm.loc[comm["op"] == "broadcast", "iteration"]) == {0}


def test_pactrain_schedule_updates_nested_masks_and_resizes_the_payload(cases: list[dict]) -> None:
    """density 0.3 over prune_epochs=2: 0.65 at epoch 0, 0.3 at epoch 1, one broadcast each."""
    model = fresh_model()
    sparse = [p.numel() for p in model.parameters() if p.dim() > 1]
    dense = sum(p.numel() for p in model.parameters() if p.dim() <= 1)
    names = [n for n, p in model.named_parameters() if p.dim() > 1]
    for r in cases:
        recs = pd.DataFrame(r["pac_sched"]["records"])
        bc = recs[recs["op"] == "broadcast"]
        assert list(bc["iteration"]) == [0, 1] and (bc["bytes"] == sum(sparse)).all()
        ar = recs[recs["op"] == "allreduce"].sort_values("iteration")
        want = [4 * (sum(keep_count(n, d) for n in sparse) + dense) for d in (0.65, 0.3)]
        assert list(ar["bytes"]) == want
        for i, n in enumerate(names):
            mask = r["pac_sched"]["masks"][i]
            assert int(mask.sum()) == keep_count(mask.numel(), 0.3)
            assert torch.equal(r["pac_sched"]["params"][n][~mask], torch.zeros(int((~mask).sum())))
        overhead = pd.DataFrame(r["pac_sched"]["overhead"])
        assert list(overhead["density"]) == [0.65, 0.3] and (overhead["mask_s"] > 0).all()


def _ddp_construction_worker(rank: int, tmp: str) -> dict:
    topo = discover(2, 2)
    groups = build_groups(topo, 60)
    from prunex.comm import Comm

    comm = Comm(topo, groups, torch.device("cpu"))
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4))
    for p in model.parameters():
        p.data.normal_(generator=torch.Generator().manual_seed(rank))  # a different start on every rank
    model[1].running_mean.fill_(float(rank))
    cfg = RunConfig(method="ddp", nodes=2, procs_per_node=2)
    ctx = Context(cfg, topo, groups, comm, torch.device("cpu"), model, TensorDataset(torch.zeros(1)), RunLog(tmp, rank))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        method_class("ddp")(ctx)
    return {
        "warnings": [f"{w.category.__name__}: {w.message}" for w in caught],
        "running_mean": model[1].running_mean.tolist(),
        "weight_sum": float(model[0].weight.detach().sum()),
    }


def test_ddp_construction_broadcasts_parameters_not_buffers_and_says_nothing(tmp_path: Path) -> None:
    """`broadcast_buffers=False` (prunex/methods/ddp.py): DDP's constructor makes every rank start from rank 0's
    parameters but leaves each rank's BatchNorm statistics its own (a resumed rank keeps what it saved), and
    torch 2.14's FutureWarning on the argument does not reach the rank's log. `forward_sync_buffers=False`, the
    spelling that warning proposes, would broadcast the buffers here and fail the first assertion."""
    out = run_distributed(_ddp_construction_worker, WORLD, str(tmp_path), timeout_s=120)
    assert [o["running_mean"] for o in out] == [[float(r)] * 4 for r in range(WORLD)]
    assert len({o["weight_sum"] for o in out}) == 1  # rank 0's parameters everywhere
    assert out[0]["weight_sum"] != 0.0
    assert not [w for o in out for w in o["warnings"] if "broadcast_buffers" in w], [o["warnings"] for o in out]
