import math
from pathlib import Path

import numpy as np
import pytest
import torch
from torchvision.datasets import CIFAR10

from prunex.training.data import DIGITS_DIR, DatasetMissing, DigitsCIFAR, load_dataset, shard_loader


def test_digits_is_read_by_the_cifar10_loader(data_root: Path) -> None:
    train = load_dataset("digits", data_root, train=True)
    test = load_dataset("digits", data_root, train=False)
    assert isinstance(train, CIFAR10) and isinstance(train, DigitsCIFAR)
    assert len(train) + len(test) == 1797
    assert train.data.shape[1:] == (32, 32, 3) and train.data.dtype == np.uint8
    assert sorted(set(train.targets)) == list(range(10)) and sorted(set(test.targets)) == list(range(10))
    # the on-disk files are CIFAR-10's python pickles
    assert {p.name for p in (data_root / DIGITS_DIR).iterdir()} >= {"data_batch_1", "test_batch", "batches.meta"}
    x, y = train[0]
    assert x.shape == (3, 32, 32) and 0 <= y < 10


@pytest.mark.parametrize("world", [1, 3, 4])
def test_shards_are_disjoint_equal_and_seeded(data_root: Path, world: int) -> None:
    train = load_dataset("digits", data_root, train=True)
    shards = []
    for rank in range(world):
        _, sampler = shard_loader(train, rank=rank, world_size=world, batch_size=16, seed=7)
        sampler.set_epoch(0)
        shards.append(list(sampler))
    sizes = {len(s) for s in shards}
    assert sizes == {len(train) // world}
    union = set().union(*map(set, shards))
    assert len(union) == sum(len(s) for s in shards)  # disjoint
    _, again = shard_loader(train, rank=0, world_size=world, batch_size=16, seed=7)
    again.set_epoch(0)
    assert list(again) == shards[0]  # seeded
    again.set_epoch(1)
    assert world == 1 or list(again) != shards[0]  # reshuffled per epoch


def test_missing_cifar10_names_the_download_command(tmp_path: Path) -> None:
    with pytest.raises(DatasetMissing, match="python -m prunex.training.data download --root"):
        load_dataset("cifar10", tmp_path, train=True)


def _idx_gz(path: Path, array: np.ndarray) -> None:
    """An IDX file (the MNIST format: magic, dims, uint8 data), gzipped."""
    import gzip
    import struct

    magic = 0x0800 + array.ndim  # 0x08: unsigned byte
    with gzip.open(path, "wb") as f:
        f.write(struct.pack(">I", magic) + b"".join(struct.pack(">I", d) for d in array.shape) + array.tobytes())


def _fake_fashion(folder: Path, n_train: int = 12, n_test: int = 6) -> None:
    rng = np.random.default_rng(0)
    folder.mkdir(parents=True)
    for split, n in (("train", n_train), ("t10k", n_test)):
        _idx_gz(folder / f"{split}-images-idx3-ubyte.gz", rng.integers(1, 256, (n, 28, 28), dtype=np.uint8))
        _idx_gz(folder / f"{split}-labels-idx1-ubyte.gz", (np.arange(n) % 10).astype(np.uint8))


def test_fashion_mnist_is_unpacked_padded_and_three_channel(tmp_path: Path) -> None:
    from prunex.training.data import install_fashion_mnist

    _fake_fashion(tmp_path / "src")
    root = tmp_path / "data"
    raw = install_fashion_mnist(root, tmp_path / "src")
    assert all((raw / f).stat().st_mode & 0o044 == 0o044 for f in ("train-images-idx3-ubyte", "t10k-labels-idx1-ubyte"))
    assert install_fashion_mnist(root, tmp_path / "nowhere") == raw  # idempotent: the source is not read again
    train = load_dataset("fashion-mnist", root, train=True, augment=False)
    test = load_dataset("fashion-mnist", root, train=False)
    assert (len(train), len(test)) == (12, 6)
    x, y = train[3]
    assert tuple(x.shape) == (3, 32, 32) and y == 3
    assert np.array_equal(x[0].numpy(), x[2].numpy())  # gray on every channel
    border = x[0].numpy().copy()
    border[2:30, 2:30] = np.nan
    assert np.nanmax(border) == np.nanmin(border)  # the 2-pixel zero padding, one normalised value
    # A batch (what a DataLoader asks for) is the images one by one, bitwise: made with tensor ops for the
    # fixed transforms of the test split, image by image through PIL where augmentation draws random numbers.
    from prunex.training.evaluation import in_memory

    one_by_one = torch.stack([test[i][0] for i in range(len(test))])
    assert torch.equal(in_memory(test).tensors[0], one_by_one)
    augmented = load_dataset("fashion-mnist", root, train=True)
    torch.manual_seed(0)
    batch = augmented.__getitems__([5, 0, 7])
    torch.manual_seed(0)
    assert all(torch.equal(a[0], augmented[i][0]) for a, i in zip(batch, [5, 0, 7], strict=True))


def test_missing_fashion_mnist_names_the_package(tmp_path: Path) -> None:
    from prunex.training.data import install_fashion_mnist

    with pytest.raises(DatasetMissing, match="apt-get install dataset-fashion-mnist"):
        install_fashion_mnist(tmp_path / "data", tmp_path / "empty")
    assert not (tmp_path / "data" / "FashionMNIST" / "raw" / "train-images-idx3-ubyte").exists()


@pytest.mark.skipif(
    not Path("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz").exists(),
    reason="Debian's dataset-fashion-mnist is not installed (.ci/install-minicluster.sh installs it)",
)
def test_the_real_fashion_mnist_from_debian(tmp_path: Path) -> None:
    train = load_dataset("fashion-mnist", tmp_path, train=True, augment=False)
    test = load_dataset("fashion-mnist", tmp_path, train=False)
    assert (len(train), len(test)) == (60_000, 10_000)
    labels = np.asarray(test.targets)
    assert sorted(np.bincount(labels)) == [1000] * 10  # 1,000 test images per class
    # the normalisation is the padded training images' mean and std, bitwise what a new float64 tensor per
    # step gives (prunex.training.data._stats works in place in one buffer)
    from prunex.training.data import _stats

    x = train.data.to(torch.float64) / 255.0
    n = x.shape[0] * 32 * 32
    mean = float(x.sum()) / n
    std = math.sqrt(float(x.square().sum()) / n - mean**2)
    assert _stats("fashion-mnist", tmp_path) == ((mean,) * 3, (std,) * 3)


def test_a_shared_data_root_is_readable_by_others_and_a_file_is_no_data_root(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 29: the digits cache was written 0600 (another user of a shared root got a PermissionError
    traceback), and --data-root naming a file was a NotADirectoryError traceback after launch."""
    from prunex.run import main as run_main
    from prunex.training.data import make_digits

    folder = make_digits(tmp_path / "shared")
    modes = {p.name: p.stat().st_mode & 0o777 for p in folder.iterdir()}
    assert all(m & 0o044 == 0o044 for m in modes.values()), modes
    afile = tmp_path / "afile"
    afile.write_text("not a folder")
    results = tmp_path / "results"
    assert run_main(["--method", "ddp", "--data-root", str(afile), "--results", str(results)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is not a directory" in err[0] and not results.exists(), err


class _Draws(torch.utils.data.Dataset):
    """An augmentation stand-in: each item is a random number drawn in the process that loads it."""

    def __len__(self) -> int:
        return 16

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.rand(())


def test_an_epochs_loader_workers_draw_the_same_numbers_when_the_run_resumes_there() -> None:
    """Review (2026-11-28): persistent loader workers drew their seeds once and ran their random streams on
    across epochs, which no checkpoint saves; a resumed run's fresh workers replayed epoch 0's augmentations.
    Now an epoch's worker seeds depend on (seed, rank, epoch) alone (`start_epoch`)."""
    from prunex.training.data import shard_loader, start_epoch

    def epochs(which: list[int]) -> list[list[float]]:
        loader, sampler = shard_loader(_Draws(), rank=1, world_size=2, batch_size=4, seed=3, num_workers=1)
        out = []
        for epoch in which:
            start_epoch(loader, sampler, epoch, seed=3, rank=1)
            out.append(torch.cat(list(loader)).tolist())
        return out

    straight = epochs([0, 1, 2])
    assert straight[2] != straight[0] and straight[1] != straight[0]
    assert epochs([2]) == [straight[2]]  # as a run resumed at epoch 2 makes it
