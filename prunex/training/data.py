"""Datasets: CIFAR-10 through torchvision, and an offline stand-in in the same on-disk format.

- `cifar10`: `torchvision.datasets.CIFAR10` under `<root>/cifar-10-batches-py`. Where a network
  exists: `python -m prunex.training.data download --root DIR`. A missing dataset is an error naming that
  command; there is no silent fallback to another dataset.
- `digits`: scikit-learn's bundled handwritten digits (1,797 8x8 images, 10 classes), upsampled
  to 32x32x3 and written once in the CIFAR-10 python format under `<root>/digits-cifar-batches-py`
  (a seeded, stratified 80/20 train/test split), so that torchvision's CIFAR-10 loader reads it.
  It is made on first use (`python -m prunex.training.data make-digits --root DIR` does it explicitly).

- `fashion-mnist`: Zalando's Fashion-MNIST (60,000 + 10,000 28x28 grayscale images of 10 clothing
  classes, MIT licence) through `torchvision.datasets.FashionMNIST` under `<root>/FashionMNIST/raw`.
  Offline it comes from Debian's `dataset-fashion-mnist` package (`apt-get install
  dataset-fashion-mnist`: the real set in `/usr/share/datasets/fashion-mnist`), unpacked into the data
  root on first use (`python -m prunex.training.data fashion-mnist --root DIR` does it explicitly; `--source`
  names another folder of the four `.gz` files); `download` fetches it where a network exists. Images
  are zero-padded to 32x32 and repeated over 3 channels, so the CIFAR models take them unchanged. A
  dataset on which pruning costs accuracy (on digits one-shot pruning to a quarter of the channels
  costs nothing), for the one-machine profiles' accuracy experiments.

Augmentation: random crop 32 with padding 4, horizontal flip (CIFAR-10 and Fashion-MNIST; a mirrored
digit is a different glyph), per-channel normalisation with the training split's statistics. Shards:
`DistributedSampler` with drop_last, i.e. disjoint, equally sized, seeded shards per rank. Every dataset makes a
DataLoader's batch with tensor ops where the transforms are these, bitwise the images one by one with the same
random numbers (`prunex.training.batch_transforms`).

    python -m prunex.training.data make-digits --root data
    python -m prunex.training.data fashion-mnist --root data
"""

from __future__ import annotations

import argparse
import functools
import math
import os
import pickle
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler
from torchvision import transforms
from torchvision.datasets import CIFAR10, FashionMNIST

from prunex.cluster.exits import one_line
from prunex.training.batch_transforms import BatchedImages

CIFAR_MEAN, CIFAR_STD = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)
DIGITS_DIR = "digits-cifar-batches-py"
FASHION_SOURCE = Path("/usr/share/datasets/fashion-mnist")  # Debian's dataset-fashion-mnist
FASHION_FILES = (
    "train-images-idx3-ubyte",
    "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte",
    "t10k-labels-idx1-ubyte",
)


class DatasetMissing(FileNotFoundError):
    """The dataset is not under the data root, or is corrupt; the message names the file and says how
    to get it."""


class CIFAR10Images(BatchedImages, CIFAR10):
    """torchvision's CIFAR10, read and checked by torchvision, with its batches made by tensor ops where the
    transforms allow (`prunex.training.batch_transforms`), bitwise the images torchvision gives one by one.

    With `--num-workers 0` (the default) the batches are made in each rank's training process between steps, time
    the GPU waits and Figs. 7 and 8 count as computation; the paper profile's loader workers
    (`experiments.common.PAPER_LOADER_WORKERS`) make them beside training, on the CPU cores the node gives each
    rank. CIFAR-10 went image by image until 2026-11-28. `python -m prunex.bench.loader --as-cifar10 --runs 40`
    (CIFAR-10's augmentation on digits, which has CIFAR-10's format and shape; 2-core AMD EPYC VM, one thread)
    gives 58.0 ms for an augmented batch of 128 image by image against 11.4 ms with tensor ops (5.09x; the bench
    then made each batch image by image first). With the order turning each run, on a 2-core Intel Xeon VM
    (AVX-512) under a load of about 2, 2026-11-28: 23.49 against 5.86 ms (4.01x)."""

    def uint8_images(self, indices: list[int]) -> torch.Tensor:
        """(B, 3, 32, 32) uint8 from CIFAR's (N, 32, 32, 3) array."""
        return torch.from_numpy(self.data[indices]).permute(0, 3, 1, 2)


class DigitsCIFAR(CIFAR10Images):
    """The digits dataset in CIFAR-10's on-disk format, read by torchvision's CIFAR10 code.

    Only the folder and the (absent) checksums differ from CIFAR10: the files are made here.
    """

    base_folder = DIGITS_DIR
    url = ""
    train_list = [["data_batch_1", None]]
    test_list = [["test_batch", None]]
    meta = {"filename": "batches.meta", "key": "label_names", "md5": None}

    def download(self) -> None:  # pragma: no cover - never downloaded
        raise RuntimeError("the digits dataset is made locally by prunex.training.data.make_digits")


def default_root() -> Path:
    return Path(os.environ.get("PRUNEX_DATA") or "data")


def _atomic_pickle(obj: object, path: Path) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "wb") as f:
        pickle.dump(obj, f)
        f.flush()
        os.fsync(f.fileno())
    os.chmod(tmp, 0o644)  # mkstemp makes it 0600: other users of a shared data root must read it too
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


def _open_cifar10(root: Path, train: bool, transform: object = None) -> CIFAR10Images:
    folder = root / CIFAR10Images.base_folder
    fix = f"download it again with: python -m prunex.training.data download --root {root}"
    if not (folder / "batches.meta").exists():
        raise DatasetMissing(
            f"CIFAR-10 not found under {folder}; download it with: "
            f"python -m prunex.training.data download --root {root}"
        )
    try:
        return CIFAR10Images(str(root), train=train, transform=transform)
    except RuntimeError:  # torchvision's integrity check failed ("Dataset not found or corrupted")
        from torchvision.datasets.utils import check_integrity

        ds = CIFAR10Images
        files = [*ds.train_list, *ds.test_list, [ds.meta["filename"], ds.meta["md5"]]]
        bad = [name for name, md5 in files if not check_integrity(str(folder / name), md5)]
        raise DatasetMissing(f"CIFAR-10 under {folder} is corrupt ({', '.join(bad) or 'checksum'}); {fix}") from None
    except _UNREADABLE as e:
        raise DatasetMissing(f"CIFAR-10 under {folder} is unreadable ({type(e).__name__}); {fix}") from None


def install_fashion_mnist(root: str | Path, source: str | Path = FASHION_SOURCE) -> Path:
    """Unpack the four Fashion-MNIST `.gz` files of `source` into torchvision's layout under `root`
    (idempotent; each file written atomically, readable by the group: a shared data root). Returns the
    raw folder."""
    import gzip
    import shutil

    raw = Path(root) / "FashionMNIST" / "raw"
    if all((raw / name).exists() for name in FASHION_FILES):
        return raw
    source = Path(source)
    missing = [f"{name}.gz" for name in FASHION_FILES if not (source / f"{name}.gz").is_file()]
    if missing:
        raise DatasetMissing(
            f"Fashion-MNIST not found under {raw} nor in {source} (missing {', '.join(missing)}); install it with: "
            "apt-get install dataset-fashion-mnist (or python -m prunex.training.data download --dataset fashion-mnist "
            "where a network exists)"
        )
    raw.mkdir(parents=True, exist_ok=True)
    for name in FASHION_FILES:
        fd, tmp = tempfile.mkstemp(dir=raw, prefix=f".{name}.")
        try:
            with gzip.open(source / f"{name}.gz", "rb") as src, os.fdopen(fd, "wb") as dst:
                shutil.copyfileobj(src, dst)
                dst.flush()
                os.fsync(dst.fileno())
            os.chmod(tmp, 0o644)
            os.replace(tmp, raw / name)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    return raw


class FashionMNIST32(BatchedImages, FashionMNIST):
    """Fashion-MNIST as 32x32 RGB PIL images (zero-padded by 2, gray repeated over 3 channels); batches with
    tensor ops where the transforms allow (`prunex.training.batch_transforms`)."""

    @property
    def raw_folder(self) -> str:  # torchvision names the folder after the class: keep FashionMNIST's
        return os.path.join(self.root, "FashionMNIST", "raw")

    def __getitem__(self, index: int) -> tuple[object, int]:
        from PIL import Image

        img = np.pad(self.data[index].numpy(), 2)
        img = Image.fromarray(np.repeat(img[:, :, None], 3, axis=2), mode="RGB")
        target = int(self.targets[index])
        if self.transform is not None:
            img = self.transform(img)
        return img, target

    def uint8_images(self, indices: list[int]) -> torch.Tensor:
        """(B, 3, 32, 32) uint8: padded by 2 with zeros, gray on every channel (what `__getitem__` makes)."""
        padded = torch.nn.functional.pad(self.data[torch.as_tensor(indices, dtype=torch.long)], (2, 2, 2, 2))
        return padded.unsqueeze(1).expand(-1, 3, -1, -1)


def open_fashion_mnist(root: Path, train: bool, transform: object = None) -> FashionMNIST32:
    """The Fashion-MNIST split, unpacked from Debian's package on first use (`install_fashion_mnist`)."""
    install_fashion_mnist(root)
    try:
        return FashionMNIST32(str(root), train=train, transform=transform)
    except (RuntimeError, *_UNREADABLE) as e:
        raise DatasetMissing(
            f"Fashion-MNIST under {Path(root) / 'FashionMNIST' / 'raw'} is unreadable ({type(e).__name__}); "
            "delete that folder and run: python -m prunex.training.data fashion-mnist"
        ) from None


OPENERS = {"cifar10": _open_cifar10, "digits": open_digits, "fashion-mnist": open_fashion_mnist}


@functools.cache  # a run loads its train and test splits: the statistics are read once
def _stats(dataset: str, root: Path) -> tuple[tuple[float, ...], tuple[float, ...]]:
    if dataset == "cifar10":
        return CIFAR_MEAN, CIFAR_STD
    if dataset == "fashion-mnist":  # of the padded 32x32 training images, the same on every channel
        # In place in one float64 buffer (376 MB): the same values and reductions as a new tensor per step,
        # bitwise, at a third of the time (~2.2-2.9 s -> 0.7-1.4 s per rank on a 2-core VM's core).
        x = open_fashion_mnist(root, train=True).data.to(torch.float64).div_(255.0)
        n = x.shape[0] * 32 * 32
        total = float(x.sum())
        squares = float(x.square_().sum())
        mean = total / n
        std = math.sqrt(squares / n - mean**2)
        return (mean,) * 3, (std,) * 3
    data = open_digits(root, train=True).data.astype(np.float64) / 255.0
    return tuple(data.mean(axis=(0, 1, 2))), tuple(data.std(axis=(0, 1, 2)))


def load_dataset(name: str, root: str | Path | None, train: bool, augment: bool | None = None) -> Dataset:
    """The train or test split of `name` with the standard transforms.

    Args:
        name: "cifar10", "digits" or "fashion-mnist".
        root: data root ("" or None: $PRUNEX_DATA, else ./data).
        train: train split (augmented unless `augment=False`) or test split (never augmented).
        augment: override augmentation of the train split.
    """
    root = Path(root) if root else default_root()
    if root.exists() and not root.is_dir():
        raise DatasetMissing(f"data root {root} is not a directory; give --data-root a folder (or set PRUNEX_DATA)")
    if name not in OPENERS:
        raise ValueError(f"unknown dataset {name!r}; known: {', '.join(OPENERS)}")
    dataset = OPENERS[name](root, train=train)  # made, checked (CIFAR-10: MD5) and read once
    mean, std = _stats(name, root)
    dataset.transform = standard_transform(name, mean, std, augment=train if augment is None else augment)
    return dataset


def standard_transform(
    name: str, mean: tuple[float, ...], std: tuple[float, ...], *, augment: bool
) -> transforms.Compose:
    """The transforms of dataset `name` (module docstring): crop and flip when augmented (no flip on digits),
    then ToTensor and Normalize(mean, std)."""
    steps: list = []
    if augment:
        steps.append(transforms.RandomCrop(32, padding=4))
        if name != "digits":
            steps.append(transforms.RandomHorizontalFlip())
    steps += [transforms.ToTensor(), transforms.Normalize(mean, std)]
    return transforms.Compose(steps)


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

    Call `start_epoch(loader, sampler, epoch, seed=seed, rank=rank)` before each epoch: the shuffle changes with
    the epoch, and so do the loader workers' random numbers (augmentations), as a function of (seed, rank, epoch)
    alone. Workers are
    therefore made afresh each epoch (not persistent): persistent workers draw their seeds once and run their
    random streams on across epochs, which a checkpoint cannot save, so a resumed run replayed epoch 0's
    augmentations (review, 2026-11-28). With `num_workers=0` the augmentations draw from the process's torch
    generator, which checkpoints save, and nothing here changes them.
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
    )
    return loader, sampler


def start_epoch(loader: DataLoader, sampler: DistributedSampler, epoch: int, *, seed: int, rank: int) -> None:
    """Before iterating `loader` (`shard_loader`'s, made with this `seed` and `rank`) for `epoch`: the sampler's
    shuffle for that epoch and, with loader workers, their seeds from (seed, rank, epoch), so that an epoch's
    batches do not depend on the epochs before it in this process (a resumed run sees the same ones)."""
    sampler.set_epoch(epoch)
    if loader.num_workers > 0 and loader.generator is not None:
        state = np.random.SeedSequence([seed, rank, epoch]).generate_state(1, np.uint64)[0]
        loader.generator.manual_seed(int(state))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m prunex.training.data", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    dl = sub.add_parser("download", help="download CIFAR-10 or Fashion-MNIST with torchvision (needs a network)")
    dl.add_argument("--root", default=str(default_root()))
    dl.add_argument("--dataset", choices=("cifar10", "fashion-mnist"), default="cifar10")
    mk = sub.add_parser("make-digits", help="write the offline digits dataset in CIFAR-10 format")
    mk.add_argument("--root", default=str(default_root()))
    fm = sub.add_parser("fashion-mnist", help="unpack Fashion-MNIST from Debian's dataset-fashion-mnist package")
    fm.add_argument("--root", default=str(default_root()))
    fm.add_argument("--source", default=str(FASHION_SOURCE), help="folder of the four .gz files")
    args = parser.parse_args(argv)
    if args.cmd == "download":
        kind = CIFAR10 if args.dataset == "cifar10" else FashionMNIST
        try:
            kind(args.root, train=True, download=True)
            kind(args.root, train=False, download=True)
        except (OSError, RuntimeError) as e:  # no network, a proxy, a full disk: one line
            what = f"downloading {args.dataset} into {args.root}"
            print(f"error: {what} failed: {type(e).__name__}: {one_line(e)}", file=sys.stderr)
            return 1
        print(f"{args.dataset} is in {args.root}")
    elif args.cmd == "fashion-mnist":
        try:
            print(f"Fashion-MNIST is in {install_fashion_mnist(args.root, args.source)}")
        except (DatasetMissing, OSError) as e:
            print(f"error: {one_line(e)}", file=sys.stderr)
            return 1
    else:
        print(f"digits dataset is in {make_digits(args.root)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
