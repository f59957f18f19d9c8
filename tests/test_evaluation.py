"""Evaluation shared by the ranks (4 real gloo processes) equals one process evaluating the same model on
the whole held-out split; the ranks' BatchNorm re-estimates, averaged, are one model on every rank and
the re-estimate over the union of their batches."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from distributed import run_distributed
from torch.utils.data import DataLoader, Subset

from prunex.training.data import load_dataset
from prunex.training.evaluation import bn_statistics, evaluate, held_out_slice, recalibrate_bn
from prunex.training.models import build_model

WORLD, BN_BATCHES, BATCH = 4, 2, 16


def _bn_batches(train_set, rank: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Rank `rank`'s re-estimation batches: its own images of the training split."""
    lo = rank * BN_BATCHES * BATCH
    loader = DataLoader(Subset(train_set, range(lo, lo + BN_BATCHES * BATCH)), batch_size=BATCH)
    return list(loader)


def _worker(rank: int, data_root: str, tmp: str) -> dict:
    from prunex.comm import Comm
    from prunex.training.evaluation import average_bn, combine, count_correct
    from prunex.training.topology import build_groups, discover

    topo = discover(2, 2)
    comm = Comm(topo, build_groups(topo, 60), torch.device("cpu"))
    torch.manual_seed(0)
    model = build_model("resnet20")  # the same weights on every rank, as a replicated model has
    train_set = load_dataset("digits", data_root, train=True, augment=False)
    test_set = load_dataset("digits", data_root, train=False)
    recalibrate_bn(model, _bn_batches(train_set, rank), BN_BATCHES, torch.device("cpu"))  # differs per rank
    own = [t.clone() for t in bn_statistics(model)]
    average_bn(model, comm)
    part = held_out_slice(test_set, rank, WORLD)
    correct, count = count_correct(model, DataLoader(part, batch_size=64), torch.device("cpu"))
    acc, images, votes = combine(comm, correct, count, [rank == 1, 0])
    path = Path(tmp) / f"rank{rank}.pt"
    torch.save({"model": model.state_dict(), "own": own}, path)
    return {
        "acc": acc,
        "images": images,
        "votes": votes,
        "slice": (part.indices.start, part.indices.stop),
        "records": [(r["level"], r["op"], r["bytes"]) for r in comm.drain()],
        "path": str(path),
    }


@pytest.fixture(scope="module")
def sharded(data_root: Path, tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    return run_distributed(_worker, WORLD, str(data_root), str(tmp_path_factory.mktemp("eval")), timeout_s=180)


def test_sharded_accuracy_equals_one_process_on_the_whole_split(sharded: list[dict], data_root: Path) -> None:
    test_set = load_dataset("digits", str(data_root), train=False)
    states = [torch.load(r["path"], weights_only=True)["model"] for r in sharded]
    for s in states[1:]:  # after the average every rank holds the same model, bitwise
        assert s.keys() == states[0].keys() and all(torch.equal(s[k], states[0][k]) for k in s)
    model = build_model("resnet20")
    model.load_state_dict(states[0])
    single = evaluate(model, DataLoader(test_set, batch_size=100), torch.device("cpu"))
    assert {r["acc"] for r in sharded} == {single}
    assert {r["images"] for r in sharded} == {len(test_set)} == {359}
    # contiguous slices covering every image once (359 = 89 + 90 + 90 + 90)
    slices = [r["slice"] for r in sharded]
    assert slices[0][0] == 0 and slices[-1][1] == len(test_set)
    assert all(a[1] == b[0] for a, b in zip(slices, slices[1:], strict=False))
    assert sorted(b - a for a, b in slices) == [89, 90, 90, 90]
    assert {tuple(r["votes"]) for r in sharded} == {(1, 0)}  # the checkpoint votes ride along
    # two AllReduces over the flat group: the BatchNorm statistics, then (correct, count, votes) as int64
    bn_bytes = 4 * sum(t.numel() for t in bn_statistics(model))
    assert all(r["records"] == [("flat", "allreduce", bn_bytes), ("flat", "allreduce", 4 * 8)] for r in sharded)


def test_averaged_batchnorm_is_the_reestimate_over_every_ranks_batches(sharded: list[dict], data_root: Path) -> None:
    train_set = load_dataset("digits", str(data_root), train=True, augment=False)
    owns = [torch.load(r["path"], weights_only=True)["own"] for r in sharded]
    assert not torch.equal(owns[0][0], owns[1][0])  # the ranks' own estimates differ
    torch.manual_seed(0)
    union = build_model("resnet20")
    batches = [b for rank in range(WORLD) for b in _bn_batches(train_set, rank)]
    recalibrate_bn(union, batches, len(batches), torch.device("cpu"))
    averaged = torch.load(sharded[0]["path"], weights_only=True)["model"]
    model = build_model("resnet20")
    model.load_state_dict(averaged)
    for got, want in zip(bn_statistics(model), bn_statistics(union), strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
