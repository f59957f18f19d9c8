"""Evaluation shared by the ranks: each rank evaluates a slice of the held-out split, one AllReduce adds them.

The trainer (`prunex.training.train`) evaluates a copy of `method.eval_model()` (the model; for the ADMM
methods the masked consensus z):

1. BatchNorm re-estimation on the rank's own shard (`recalibrate_bn`, `bn_batches` mini-batches,
   cumulative average: "precise BN"): the consensus z has no running statistics of its own, and on
   short high-learning-rate runs DDP's lag the weights. The batches come from `recalibration_batches`
   inside `rng_untouched`: the same shard and transforms as training, but every random number they
   draw (augmentation, the loader's seed) is given back, so evaluating does not change what training
   draws next. A run trains the same model whether it is evaluated every iteration or only at the
   end (`tests/test_evaluation.py`). Before, each evaluation advanced the training RNG, so the
   evaluation cadence changed the augmentations every later step saw.
2. `average_bn`: one AllReduce averages those statistics over the ranks. Ranks re-estimate on
   equally many batches, so the average is the cumulative average over all N x `bn_batches`
   batches, i.e. what one process re-estimating on the union of those batches gets (up to float
   rounding), and every rank holds the same model, bitwise. Without it each rank would evaluate a
   model of its own and the combined accuracy would describe none of them.
3. `count_correct` on the rank's contiguous slice of the test split (`held_out_slice`; slices differ by
   at most one image), then `combine`: one AllReduce of (correct, count), which also carries the
   trainer's checkpoint votes. The accuracy is that of the one model on the whole split, equal to a
   single process evaluating it on every image (`tests/test_evaluation.py`), at 1/N of the work.

On the CPU a float32 model is evaluated in the channels_last layout (`eval_memory_format`): oneDNN's NHWC
convolutions made ResNet-20's evaluation ~1.5x faster on one core of an AMD EPYC (2500 Fashion-MNIST
images: 3.9 s -> 2.6 s; BatchNorm re-estimation 0.098 -> 0.067 s per batch of 64). A layout changes the
kernels' summation order, so logits may differ from NCHW ones in the last bits. That is why
`recalibrate_bn` and `count_correct` choose the layout themselves: every evaluation in prunex, the
trainer's and that of an exported model, runs the same kernels. float64 (the tests' pinned numerics) and
CUDA keep NCHW.

Both AllReduces run over the flat group through `Comm` (so they are timed and byte-counted like any
collective and exist on NCCL and gloo); the trainer logs them to the `eval_comm` table, apart from
the training communication in `comm`, and outside `wall_s` and `comm_s`.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterable, Iterator, Sequence

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, Subset, TensorDataset

from prunex.comm import Comm
from prunex.training.models import floating_dtype


def _batchnorms(model: nn.Module) -> list[nn.modules.batchnorm._BatchNorm]:
    return [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm) and m.track_running_stats]


def eval_memory_format(model: nn.Module, device: torch.device) -> torch.memory_format:
    """The layout evaluation runs `model` in: channels_last for a float32 model on the CPU with oneDNN
    (module docstring), the usual NCHW otherwise."""
    if device.type == "cpu" and floating_dtype(model) == torch.float32 and torch.backends.mkldnn.is_available():
        return torch.channels_last
    return torch.contiguous_format


@contextlib.contextmanager
def _layout(model: nn.Module, device: torch.device) -> Iterator[torch.memory_format]:
    """`model` in its evaluation layout for the block, back in NCHW after it (the values are unchanged)."""
    fmt = eval_memory_format(model, device)
    if fmt is torch.contiguous_format:
        yield fmt
        return
    model.to(memory_format=fmt)
    try:
        yield fmt
    finally:
        model.to(memory_format=torch.contiguous_format)


def _input(x: torch.Tensor, device: torch.device, dtype: torch.dtype, fmt: torch.memory_format) -> torch.Tensor:
    x = x.to(device, dtype, non_blocking=True)
    return x.contiguous(memory_format=fmt) if x.dim() == 4 else x


@contextlib.contextmanager
def rng_untouched(device: torch.device) -> Iterator[None]:
    """Every random number drawn in the block is given back: torch's CPU generator (and `device`'s, on a
    GPU), Python's `random` and NumPy's, as they were before the block."""
    py, np_state = random.getstate(), np.random.get_state()
    gpus = [device.index if device.index is not None else torch.cuda.current_device()] if device.type == "cuda" else []
    try:
        with torch.random.fork_rng(devices=gpus):
            yield
    finally:
        random.setstate(py)
        np.random.set_state(np_state)


def recalibration_batches(loader: DataLoader) -> DataLoader:
    """The batches `loader` would yield next (its dataset, transforms and batch sampler: the rank's shard in
    this epoch's order; its generator's seed), read in this process from a copy of that generator, so that
    the training loader's own generator and workers are not touched and `rng_untouched` gives back every
    number the transforms draw. With the default `num_workers=0`, a run's last evaluation therefore reads
    the very batches it read before evaluation was isolated from training."""
    generator = None
    if loader.generator is not None:
        generator = torch.Generator()
        generator.set_state(loader.generator.get_state())
    return DataLoader(loader.dataset, batch_sampler=loader.batch_sampler, num_workers=0, generator=generator)


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
    with _layout(model, device) as fmt:
        for i, (x, _) in enumerate(batches):
            if i >= max_batches:
                break
            model(_input(x, device, dtype, fmt))
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


def in_memory(dataset: Dataset, batch_size: int = 256) -> TensorDataset:
    """`dataset` read once through its transforms into tensors (images, labels). For the held-out split,
    whose transforms are fixed (no augmentation, no random numbers): a run evaluates the same tensors
    every time without decoding and normalising every image again at each evaluation."""
    xs, ys = [], []
    # a private generator: the loader's seed is not drawn from the global RNG that training draws from
    for x, y in DataLoader(dataset, batch_size=batch_size, num_workers=0, generator=torch.Generator()):
        xs.append(x)
        ys.append(torch.as_tensor(y))
    if not xs:
        return TensorDataset(torch.empty(0), torch.empty(0, dtype=torch.int64))
    return TensorDataset(torch.cat(xs), torch.cat(ys))


@torch.no_grad()
def count_correct(model: nn.Module, loader: DataLoader, device: torch.device) -> tuple[int, int]:
    """(correct top-1 predictions, images) of `model` on `loader`."""
    was_training = model.training
    model.eval()
    total = 0
    dtype = floating_dtype(model)
    hits = torch.zeros((), dtype=torch.int64, device=device)  # read once at the end: one synchronisation
    with _layout(model, device) as fmt:
        for x, y in loader:
            x, y = _input(x, device, dtype, fmt), y.to(device, non_blocking=True)
            hits += (model(x).argmax(1) == y).sum()
            total += y.numel()
    correct = int(hits.item())
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
