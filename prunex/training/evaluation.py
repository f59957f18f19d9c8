"""Evaluation shared by the ranks: each rank evaluates a slice of the held-out split, one AllReduce adds them.

The trainer (`prunex.training.train`) evaluates a copy of `method.eval_model()` (the model; for the ADMM
methods the masked consensus z):

1. BatchNorm re-estimation on the rank's own shard (`recalibrate_bn`, `bn_batches` mini-batches,
   cumulative average: "precise BN"): the consensus z has no running statistics of its own, and on
   short high-learning-rate runs DDP's lag the weights.
2. `average_bn`: one AllReduce averages those statistics over the ranks. Ranks re-estimate on
   equally many batches, so the average is the cumulative average over all N x `bn_batches`
   batches, i.e. what one process re-estimating on the union of those batches gets (up to float
   rounding), and every rank holds the same model, bitwise. Without it each rank would evaluate a
   model of its own and the combined accuracy would describe none of them.
3. `count_correct` on the rank's contiguous slice of the test split (`held_out_slice`; slices differ by
   at most one image), then `combine`: one AllReduce of (correct, count), which also carries the
   trainer's checkpoint votes. The accuracy is that of the one model on the whole split, equal to a
   single process evaluating it on every image (`tests/test_evaluation.py`), at 1/N of the work.

Both AllReduces run over the flat group through `Comm` (so they are timed and byte-counted like any
collective and exist on NCCL and gloo); the trainer logs them to the `eval_comm` table, apart from
the training communication in `comm`, and outside `wall_s` and `comm_s`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, Subset

from prunex.comm import Comm
from prunex.training.models import floating_dtype


def _batchnorms(model: nn.Module) -> list[nn.modules.batchnorm._BatchNorm]:
    return [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm) and m.track_running_stats]


@torch.no_grad()
def recalibrate_bn(model: nn.Module, batches: Iterable, max_batches: int, device: torch.device) -> nn.Module:
    """Re-estimate the BatchNorm statistics of `model` (in place) from up to `max_batches` batches."""
    bns = _batchnorms(model)
    if not bns or max_batches == 0:
        return model
    saved = [m.momentum for m in bns]
    for m in bns:
        m.reset_running_stats()
        m.momentum = None  # cumulative moving average
    was_training = model.training
    model.train()
    dtype = floating_dtype(model)
    for i, (x, _) in enumerate(batches):
        if i >= max_batches:
            break
        model(x.to(device, dtype, non_blocking=True))
    for m, mom in zip(bns, saved, strict=True):
        m.momentum = mom
    model.train(was_training)
    return model


def bn_statistics(model: nn.Module) -> list[torch.Tensor]:
    """The running means and variances of the model's BatchNorm layers, in module order."""
    return [t for m in _batchnorms(model) for t in (m.running_mean, m.running_var)]


@torch.no_grad()
def average_bn(model: nn.Module, comm: Comm) -> nn.Module:
    """Replace the model's BatchNorm statistics by their mean over the flat group (one AllReduce)."""
    stats = bn_statistics(model)
    if not stats:
        return model
    flat = torch.cat([t.reshape(-1) for t in stats])
    comm.all_reduce(flat, "flat", "avg")
    pos = 0
    for t in stats:
        t.copy_(flat[pos : pos + t.numel()].view_as(t))
        pos += t.numel()
    return model


def held_out_slice(dataset: Dataset, rank: int, world_size: int) -> Subset:
    """Rank `rank`'s contiguous slice of the test split; the slices cover every image once."""
    n = len(dataset)
    return Subset(dataset, range(n * rank // world_size, n * (rank + 1) // world_size))


@torch.no_grad()
def count_correct(model: nn.Module, loader: DataLoader, device: torch.device) -> tuple[int, int]:
    """(correct top-1 predictions, images) of `model` on `loader`."""
    was_training = model.training
    model.eval()
    correct = total = 0
    dtype = floating_dtype(model)
    for x, y in loader:
        x, y = x.to(device, dtype, non_blocking=True), y.to(device, non_blocking=True)
        correct += int((model(x).argmax(1) == y).sum().item())
        total += y.numel()
    model.train(was_training)
    return correct, total


def evaluate(model: nn.Module, loader: DataLoader, device: torch.device) -> float:
    """Top-1 accuracy in [0, 1] of `model` on everything `loader` yields (one process)."""
    correct, total = count_correct(model, loader, device)
    return correct / max(total, 1)


def combine(comm: Comm, correct: int, count: int, votes: Sequence[int] = ()) -> tuple[float, int, list[int]]:
    """One AllReduce(SUM) of (correct, count, *votes) over the flat group: (accuracy, images, summed votes)."""
    t = torch.tensor([correct, count, *votes], dtype=torch.int64, device=comm.device)
    comm.all_reduce(t, "flat", "sum")
    total = t.tolist()
    return total[0] / max(total[1], 1), total[1], total[2:]
