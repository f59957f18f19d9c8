from pathlib import Path

import numpy as np
import pytest
from torchvision.datasets import CIFAR10

from prunex.data import DIGITS_DIR, DatasetMissing, DigitsCIFAR, load_dataset, shard_loader


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
    with pytest.raises(DatasetMissing, match="python -m prunex.data download --root"):
        load_dataset("cifar10", tmp_path, train=True)
