"""Datasets: CIFAR-10 through torchvision, and an offline stand-in in the same on-disk format.

- `cifar10`: `torchvision.datasets.CIFAR10` under `<root>/cifar-10-batches-py`. Where a network
  exists: `python -m prunex.data download --root DIR`. A missing dataset is an error naming that
  command; there is no silent fallback to another dataset.
- `digits`: scikit-learn's bundled handwritten digits (1,797 8x8 images, 10 classes), upsampled
  to 32x32x3 and written once in the CIFAR-10 python format under `<root>/digits-cifar-batches-py`
  (a seeded, stratified 80/20 train/test split), so that torchvision's CIFAR-10 loader reads it.
  It is made on first use (`python -m prunex.data make-digits --root DIR` does it explicitly).

Augmentation: random crop 32 with padding 4, horizontal flip (CIFAR-10 only: a mirrored digit is
a different glyph), per-channel normalisation. Shards: `DistributedSampler` with drop_last, i.e.
disjoint, equally sized, seeded shards per rank.

    python -m prunex.data make-digits --root data
"""

from __future__ import annotations

import argparse
import os
import pickle
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler
from torchvision import transforms
from torchvision.datasets import CIFAR10

CIFAR_MEAN, CIFAR_STD = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)
DIGITS_DIR = "digits-cifar-batches-py"


class DatasetMissing(FileNotFoundError):
    """The dataset is not under the data root, or is corrupt; the message names the file and says how
    to get it."""


class DigitsCIFAR(CIFAR10):
    """The digits dataset in CIFAR-10's on-disk format, read by torchvision's CIFAR10 code.

    Only the folder and the (absent) checksums differ from CIFAR10: the files are made here.
    """

    base_folder = DIGITS_DIR
    url = ""
    train_list = [["data_batch_1", None]]
    test_list = [["test_batch", None]]
    meta = {"filename": "batches.meta", "key": "label_names", "md5": None}

    def download(self) -> None:  # pragma: no cover - never downloaded
        raise RuntimeError("the digits dataset is made locally by prunex.data.make_digits")


def default_root() -> Path:
    return Path(os.environ.get("PRUNEX_DATA") or "data")


def _atomic_pickle(obj: object, path: Path) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "wb") as f:
        pickle.dump(obj, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def make_digits(root: str | Path, seed: int = 0, *, force: bool = False) -> Path:
    """Write the digits dataset in CIFAR-10 format under `root` (idempotent unless `force`).
    Returns its folder."""
    folder = Path(root) / DIGITS_DIR
    if (folder / "batches.meta").exists() and not force:
        return folder
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = torch.from_numpy(digits.images).float().unsqueeze(1) / 16.0  # (N, 1, 8, 8) in [0, 1]
    x = torch.nn.functional.interpolate(x, size=(32, 32), mode="bilinear", align_corners=False)
    x = (x.clamp(0, 1) * 255).round().to(torch.uint8).repeat(1, 3, 1, 1)  # (N, 3, 32, 32)
    y = digits.target.astype(np.int64)
    rng = np.random.default_rng(seed)
    test_idx = np.concatenate(
        [rng.permutation(np.flatnonzero(y == c))[: int(round(0.2 * (y == c).sum()))] for c in range(10)]
    )
    is_test = np.zeros(len(y), dtype=bool)
    is_test[test_idx] = True
    folder.mkdir(parents=True, exist_ok=True)
    flat = x.reshape(len(y), -1).numpy()  # CIFAR layout: 1024 R, 1024 G, 1024 B per row
    for name, sel in (("data_batch_1", ~is_test), ("test_batch", is_test)):
        _atomic_pickle({"data": flat[sel], "labels": y[sel].tolist(), "batch_label": name}, folder / name)
    _atomic_pickle({"label_names": [str(c) for c in range(10)]}, folder / "batches.meta")
    return folder


# what reading a torn or overwritten pickle of the CIFAR format raises
_UNREADABLE = (pickle.UnpicklingError, EOFError, ValueError, KeyError, IndexError, TypeError, AttributeError, OSError)


def open_digits(root: Path, train: bool, transform: object = None) -> DigitsCIFAR:
    """The digits split, made on first use; a cache that cannot be read (a torn or truncated
    file) is made again, with a note, since it is derived data."""
    make_digits(root)
    try:
        return DigitsCIFAR(str(root), train=train, transform=transform)
    except _UNREADABLE as e:
        folder = Path(root) / DIGITS_DIR
        print(f"note: the digits cache {folder} was unreadable ({type(e).__name__}); made it again", file=sys.stderr)
        make_digits(root, force=True)
        return DigitsCIFAR(str(root), train=train, transform=transform)


def _open_cifar10(root: Path, train: bool, transform: object = None) -> CIFAR10:
    folder = root / CIFAR10.base_folder
    fix = f"download it again with: python -m prunex.data download --root {root}"
    if not (folder / "batches.meta").exists():
        raise DatasetMissing(
            f"CIFAR-10 not found under {folder}; download it with: python -m prunex.data download --root {root}"
        )
    try:
        return CIFAR10(str(root), train=train, transform=transform)
    except RuntimeError:  # torchvision's integrity check failed ("Dataset not found or corrupted")
        from torchvision.datasets.utils import check_integrity

        files = [*CIFAR10.train_list, *CIFAR10.test_list, [CIFAR10.meta["filename"], CIFAR10.meta["md5"]]]
        bad = [name for name, md5 in files if not check_integrity(str(folder / name), md5)]
        raise DatasetMissing(f"CIFAR-10 under {folder} is corrupt ({', '.join(bad) or 'checksum'}); {fix}") from None
    except _UNREADABLE as e:
        raise DatasetMissing(f"CIFAR-10 under {folder} is unreadable ({type(e).__name__}); {fix}") from None


def _stats(dataset: str, root: Path) -> tuple[tuple[float, ...], tuple[float, ...]]:
    if dataset == "cifar10":
        return CIFAR_MEAN, CIFAR_STD
    data = open_digits(root, train=True).data.astype(np.float64) / 255.0
    return tuple(data.mean(axis=(0, 1, 2))), tuple(data.std(axis=(0, 1, 2)))


def load_dataset(name: str, root: str | Path | None, train: bool, augment: bool | None = None) -> Dataset:
    """The train or test split of `name` with the standard transforms.

    Args:
        name: "cifar10" or "digits".
        root: data root ("" or None: $PRUNEX_DATA, else ./data).
        train: train split (augmented unless `augment=False`) or test split (never augmented).
        augment: override augmentation of the train split.
    """
    root = Path(root) if root else default_root()
    if name not in ("digits", "cifar10"):
        raise ValueError(f"unknown dataset {name!r}; known: cifar10, digits")
    opener = open_digits if name == "digits" else _open_cifar10
    opener(root, train=train)  # made, checked and readable before anything else reads it
    mean, std = _stats(name, root)
    augment = train if augment is None else augment
    steps: list = []
    if augment:
        steps.append(transforms.RandomCrop(32, padding=4))
        if name == "cifar10":
            steps.append(transforms.RandomHorizontalFlip())
    steps += [transforms.ToTensor(), transforms.Normalize(mean, std)]
    return opener(root, train=train, transform=transforms.Compose(steps))


def train_size(name: str, root: str | Path | None, subset: int = 0) -> int:
    """Training images a run uses (its `--train-subset` applied)."""
    n = len(load_dataset(name, root, train=True, augment=False))
    return min(subset, n) if subset else n


def batches_per_epoch(n_train: int, world_size: int, batch_size: int, drop_last_batch: bool = False) -> int:
    """Mini-batches per epoch on every rank, as `shard_loader` makes them: each rank's shard holds
    n_train // world_size images (DistributedSampler, drop_last), cut into batches of batch_size."""
    shard = n_train // world_size
    return shard // batch_size if drop_last_batch else -(-shard // batch_size)


def shard_loader(
    dataset: Dataset,
    *,
    rank: int,
    world_size: int,
    batch_size: int,
    seed: int,
    shuffle: bool = True,
    num_workers: int = 0,
    drop_last_batch: bool = False,
) -> tuple[DataLoader, DistributedSampler]:
    """A loader over this rank's shard: disjoint, equally sized (tail dropped), seeded shuffles.

    Call `sampler.set_epoch(epoch)` before each epoch so the shuffle changes with it.
    """
    sampler = DistributedSampler(
        dataset, num_replicas=world_size, rank=rank, shuffle=shuffle, seed=seed, drop_last=True
    )
    generator = torch.Generator().manual_seed(seed * 1_000_003 + rank)
    loader = DataLoader(
        dataset,
        batch_size=batch_size,
        sampler=sampler,
        num_workers=num_workers,
        drop_last=drop_last_batch,
        generator=generator,
        pin_memory=torch.cuda.is_available(),
        persistent_workers=num_workers > 0,
    )
    return loader, sampler


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m prunex.data", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    dl = sub.add_parser("download", help="download CIFAR-10 with torchvision (needs a network)")
    dl.add_argument("--root", default=str(default_root()))
    mk = sub.add_parser("make-digits", help="write the offline digits dataset in CIFAR-10 format")
    mk.add_argument("--root", default=str(default_root()))
    args = parser.parse_args(argv)
    if args.cmd == "download":
        try:
            CIFAR10(args.root, train=True, download=True)
            CIFAR10(args.root, train=False, download=True)
        except (OSError, RuntimeError) as e:  # no network, a proxy, a full disk: one line
            print(f"error: downloading CIFAR-10 into {args.root} failed: {type(e).__name__}: {e}", file=sys.stderr)
            return 1
        print(f"CIFAR-10 is in {Path(args.root) / CIFAR10.base_folder}")
    else:
        print(f"digits dataset is in {make_digits(args.root)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
