"""A rank's training batch made image by image (torchvision's `__getitem__`) against tensor ops
(`prunex.training.batch_transforms`), on one thread, as a rank's main process makes it (`--num-workers 0`).

Run::

    PYTHONPATH=. python -m prunex.bench.loader [--dataset digits] [--as-cifar10] [--batch 128] [--runs 20]

Each run draws one batch of `--batch` random training indices and makes it both ways from the same seed, one
way after the other, and checks that both ways give the same tensors bitwise. The order turns by one each run
(`order`: image by image first in runs 0, 2, 4, ..., tensor ops first in runs 1, 3, ...), so each way goes first
in as many runs as the other (one more with an odd `--runs`): a machine warming up or slowing down during the
bench, or the first way warming caches for the second, hits both ways alike. It prints the median and range of
each way's milliseconds and the ratio of the medians (image by image over tensor ops: above 1, the tensor ops are
faster), measured in the same run.

Earlier versions of this bench made every run's batch image by image first, then with tensor ops, and printed
no order in their header: the figures quoted in `prunex.training.data.CIFAR10Images` (58.0 against 11.4 ms,
5.09x, ``--as-cifar10 --runs 40``) were measured with that fixed order; the figures beside them with the turning one.

``--as-cifar10`` gives the dataset CIFAR-10's training transforms (crop with padding 4, horizontal flip, CIFAR-10's
normalisation; `prunex.training.data.standard_transform`): with the digits dataset, which is stored in CIFAR-10's
format and shape (32 x 32 x 3 uint8), that is a CIFAR-10 batch's work where CIFAR-10 itself cannot be had.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from collections.abc import Sequence

import torch

from prunex.cluster.exits import one_line
from prunex.training.data import CIFAR_MEAN, CIFAR_STD, OPENERS, DatasetMissing, load_dataset, standard_transform
from prunex.training.log import hardware_name


def _make_batch(dataset: object, indices: list[int], batched: bool, seed: int) -> tuple[float, list]:
    torch.manual_seed(seed)
    start = time.perf_counter()
    items = dataset.__getitems__(indices) if batched else [dataset[i] for i in indices]  # type: ignore[index]
    return time.perf_counter() - start, items


WAYS = {"image by image": False, "tensor ops": True}  # each way's name -> `_make_batch`'s `batched`


def order(run: int) -> list[str]:
    """The ways in the order run `run` makes them: `WAYS` turned by `run` places, so that drift over the bench
    hits every way alike (module docstring)."""
    names = list(WAYS)
    k = run % len(names)
    return names[k:] + names[:k]


def measure(dataset: object, batch: int, runs: int, seed: int = 0) -> dict[str, list[float]]:
    """Milliseconds per batch, each way, per run (interleaved, the order turning each run: `order`); raises if
    the two ways differ."""
    pick = torch.Generator().manual_seed(seed)
    out: dict[str, list[float]] = {name: [] for name in WAYS}
    for run in range(runs):
        indices = torch.randint(0, len(dataset), (batch,), generator=pick).tolist()  # type: ignore[arg-type]
        made = {name: _make_batch(dataset, indices, batched=WAYS[name], seed=run) for name in order(run)}
        one, ops = made["image by image"][1], made["tensor ops"][1]
        if not all(torch.equal(a[0], b[0]) and a[1] == b[1] for a, b in zip(one, ops, strict=True)):
            raise AssertionError("the tensor ops' batch differs from the images one by one")
        for name in WAYS:
            out[name].append(made[name][0] * 1e3)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m prunex.bench.loader", description=__doc__.split("\n")[0])
    p.add_argument("--dataset", choices=sorted(OPENERS), default="digits")
    p.add_argument("--data-root", default="", help="default: $PRUNEX_DATA, else ./data")
    p.add_argument("--as-cifar10", action="store_true", help="CIFAR-10's training transforms on this dataset")
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--runs", type=int, default=20)
    args = p.parse_args(argv)
    if args.batch < 1 or args.runs < 1:
        p.error("--batch and --runs must be >= 1")
    torch.set_num_threads(1)
    try:
        dataset = load_dataset(args.dataset, args.data_root, train=True)
    except DatasetMissing as e:  # CIFAR-10 not downloaded, no Fashion-MNIST package: one line, as every command
        print(f"error: {one_line(e)}", file=sys.stderr)
        return 2
    if args.as_cifar10:
        dataset.transform = standard_transform("cifar10", CIFAR_MEAN, CIFAR_STD, augment=True)
    transform = " -> ".join(type(t).__name__ for t in dataset.transform.transforms)
    print(
        f"# {hardware_name('cpu')}, Python {platform.python_version()}, torch {torch.__version__}, 1 thread; "
        f"{args.dataset} train split, {transform}, batch {args.batch}, {args.runs} runs, the order turning each run"
    )
    times = measure(dataset, args.batch, args.runs)
    medians = {name: statistics.median(ms) for name, ms in times.items()}
    for name, ms in times.items():
        print(f"{name:>15}: {medians[name]:8.2f} ms per batch (min {min(ms):.2f}, max {max(ms):.2f})")
    print(f"ratio image by image / tensor ops: {medians['image by image'] / medians['tensor ops']:.2f} (bitwise equal)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
