"""Evaluation shared by the ranks (4 real gloo processes) equals one process evaluating the same model on
the whole held-out split; the ranks' BatchNorm re-estimates, averaged, are one model on every rank and
the re-estimate over the union of their batches."""

from __future__ import annotations

import itertools
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
    # the same weights on every rank, as a replicated model has; float64, so that the averaged re-estimate
    # can be held to the union's within rounding (float32 runs in channels_last, whose reductions depend on
    # the thread count; the float32 path is tested below and by test_run_hsadmm's logged accuracy)
    model = build_model("resnet20").double()
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
    model = build_model("resnet20").double()
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
    bn_bytes = 8 * sum(t.numel() for t in bn_statistics(model))
    assert all(r["records"] == [("flat", "allreduce", bn_bytes), ("flat", "allreduce", 4 * 8)] for r in sharded)


def test_averaged_batchnorm_is_the_reestimate_over_every_ranks_batches(sharded: list[dict], data_root: Path) -> None:
    train_set = load_dataset("digits", str(data_root), train=True, augment=False)
    owns = [torch.load(r["path"], weights_only=True)["own"] for r in sharded]
    assert not torch.equal(owns[0][0], owns[1][0])  # the ranks' own estimates differ
    torch.manual_seed(0)
    union = build_model("resnet20").double()
    batches = [b for rank in range(WORLD) for b in _bn_batches(train_set, rank)]
    recalibrate_bn(union, batches, len(batches), torch.device("cpu"))
    averaged = torch.load(sharded[0]["path"], weights_only=True)["model"]
    model = build_model("resnet20").double()
    model.load_state_dict(averaged)
    for got, want in zip(bn_statistics(model), bn_statistics(union), strict=True):
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)


def test_evaluating_leaves_the_training_batches_as_they_were(data_root: Path) -> None:
    """BatchNorm re-estimation as the trainer runs it (`rng_untouched`, `recalibration_batches`) gives back
    every random number it draws: the training loader's next batches, augmentations included, are bitwise
    those of a loader that was never used for evaluation, so the evaluation cadence cannot change training."""
    import random

    import numpy as np

    from prunex.training.data import shard_loader
    from prunex.training.evaluation import recalibration_batches, rng_untouched

    cpu = torch.device("cpu")
    train_set = Subset(load_dataset("digits", data_root, train=True), range(256))  # augmented: draws numbers

    def next_batches(evaluate_first: bool) -> list[torch.Tensor]:
        torch.manual_seed(7)
        random.seed(7)
        np.random.seed(7)
        loader, sampler = shard_loader(train_set, rank=0, world_size=2, batch_size=BATCH, seed=3)
        sampler.set_epoch(1)
        model = build_model("resnet20")  # its initialisation draws numbers: in both cases, before the state is read
        if evaluate_first:
            before = (torch.get_rng_state(), loader.generator.get_state(), random.getstate())
            with rng_untouched(cpu):
                recalibrate_bn(model, recalibration_batches(loader), BN_BATCHES, cpu)
            after = (torch.get_rng_state(), loader.generator.get_state(), random.getstate())
            assert torch.equal(before[0], after[0]) and torch.equal(before[1], after[1]) and before[2] == after[2]
            assert model.bn1.num_batches_tracked.item() == BN_BATCHES  # it did read the training shard
        return [x for x, _ in itertools.islice(loader, 3)]

    plain, evaluated = next_batches(False), next_batches(True)
    assert all(torch.equal(a, b) for a, b in zip(plain, evaluated, strict=True))
    # the check can fail: without rng_untouched the same re-estimation moves the augmentations
    torch.manual_seed(7)
    loader, sampler = shard_loader(train_set, rank=0, world_size=2, batch_size=BATCH, seed=3)
    sampler.set_epoch(1)
    model = build_model("resnet20")
    recalibrate_bn(model, recalibration_batches(loader), BN_BATCHES, cpu)
    moved = [x for x, _ in itertools.islice(loader, 3)]
    assert not all(torch.equal(a, b) for a, b in zip(plain, moved, strict=True))


def test_a_float32_model_evaluates_in_channels_last_and_is_returned_in_nchw(data_root: Path) -> None:
    """`count_correct` runs a float32 CPU model in channels_last (evaluation.py) and gives it back in NCHW
    with the same values; the tensors `in_memory` holds are those the dataset yields."""
    from prunex.training.evaluation import count_correct, eval_memory_format, in_memory

    cpu = torch.device("cpu")
    torch.manual_seed(0)
    model = build_model("resnet20")
    before = {k: v.clone() for k, v in model.state_dict().items()}
    test_set = Subset(load_dataset("digits", data_root, train=False), range(40))
    held = in_memory(test_set, batch_size=16)
    assert len(held) == 40 and all(torch.equal(held[i][0], test_set[i][0]) for i in (0, 17, 39))
    assert eval_memory_format(model, cpu) is (
        torch.channels_last if torch.backends.mkldnn.is_available() else torch.contiguous_format
    )
    assert eval_memory_format(model.double(), cpu) is torch.contiguous_format
    model.float()
    seen: list[bool] = []  # the layout of what the stem convolution received, per batch
    hook = model.conv1.register_forward_pre_hook(
        lambda m, args: seen.append(args[0].is_contiguous(memory_format=torch.channels_last))
    )
    correct, total = count_correct(model, DataLoader(held, batch_size=16), cpu)
    hook.remove()
    assert total == 40 and 0 <= correct <= 40
    assert seen == [eval_memory_format(model, cpu) is torch.channels_last] * 3  # 3 batches, each in that layout
    assert all(p.is_contiguous() for p in model.parameters())
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())
