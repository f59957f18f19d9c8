"""Batches made with tensor ops (`prunex.training.batch_transforms`) are the images one by one, bitwise, with the
same random numbers drawn; transforms it does not know go image by image."""

import hashlib
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch
from torchvision import transforms as T

from prunex.training.batch_transforms import BatchPipeline, batch_pipeline
from prunex.training.data import CIFAR10Images, load_dataset
from prunex.training.evaluation import in_memory


def _both_ways(dataset, indices: list[int]) -> tuple[list, list, bool]:
    torch.manual_seed(7)
    batch = dataset.__getitems__(indices)
    after_batch = torch.get_rng_state()
    torch.manual_seed(7)
    one_by_one = [dataset[i] for i in indices]
    return batch, one_by_one, torch.equal(after_batch, torch.get_rng_state())


@pytest.mark.parametrize("train", [True, False])
def test_digits_batches_are_the_images_one_by_one(data_root: Path, train: bool) -> None:
    dataset = load_dataset("digits", data_root, train=train)
    assert batch_pipeline(dataset.transform) is not None  # the fast path is the one taken
    indices = [9, 0, 4, 4, 31, 2]
    batch, one_by_one, same_state = _both_ways(dataset, indices)
    assert same_state
    assert all(torch.equal(a[0], b[0]) and a[1] == b[1] for a, b in zip(batch, one_by_one, strict=True))
    if train:  # the crops moved the images: a pipeline that ignored the random numbers would not pass
        torch.manual_seed(7)
        other = dataset.__getitems__(indices)
        torch.manual_seed(8)
        assert not all(torch.equal(a[0], b[0]) for a, b in zip(other, dataset.__getitems__(indices), strict=True))


def _fake_cifar10(root: Path, monkeypatch: pytest.MonkeyPatch, per_file: int = 6) -> None:
    """CIFAR-10's files (five training pickles, one test pickle, the meta) with random images, and their MD5s
    given to the class in place of the real set's, so that torchvision's own reading and checking runs."""
    folder = root / CIFAR10Images.base_folder
    folder.mkdir(parents=True)
    rng = np.random.default_rng(3)
    md5 = {}
    names = [name for name, _ in (*CIFAR10Images.train_list, *CIFAR10Images.test_list)]
    for name in names:
        data = rng.integers(0, 256, (per_file, 3 * 32 * 32), dtype=np.uint8)
        labels = rng.integers(0, 10, per_file).tolist()
        (folder / name).write_bytes(pickle.dumps({"data": data, "labels": labels, "batch_label": name}))
    (folder / "batches.meta").write_bytes(pickle.dumps({"label_names": [f"class {c}" for c in range(10)]}))
    for name in [*names, "batches.meta"]:
        md5[name] = hashlib.md5((folder / name).read_bytes()).hexdigest()
    monkeypatch.setattr(CIFAR10Images, "train_list", [[n, md5[n]] for n, _ in CIFAR10Images.train_list])
    monkeypatch.setattr(CIFAR10Images, "test_list", [[n, md5[n]] for n, _ in CIFAR10Images.test_list])
    monkeypatch.setattr(CIFAR10Images, "meta", {**CIFAR10Images.meta, "md5": md5["batches.meta"]})


@pytest.mark.parametrize("train", [True, False])
def test_cifar10_batches_are_torchvisions_images_one_by_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, train: bool
) -> None:
    """The cluster's dataset: its batches by tensor ops are torchvision's `CIFAR10.__getitem__` (a PIL image
    through the crop, the flip, ToTensor and Normalize), bitwise, with the same random numbers drawn."""
    _fake_cifar10(tmp_path, monkeypatch)
    dataset = load_dataset("cifar10", tmp_path, train=train)
    assert isinstance(dataset, CIFAR10Images) and len(dataset) == (30 if train else 6)
    assert batch_pipeline(dataset.transform) is not None
    indices = [5, 0, 3, 3, len(dataset) - 1, 1]
    batch, one_by_one, same_state = _both_ways(dataset, indices)
    assert same_state
    assert all(torch.equal(a[0], b[0]) and a[1] == b[1] for a, b in zip(batch, one_by_one, strict=True))
    if train:  # crops and flips moved the images
        torch.manual_seed(7)
        other = dataset.__getitems__(indices)
        torch.manual_seed(8)
        assert not all(torch.equal(a[0], b[0]) for a, b in zip(other, dataset.__getitems__(indices), strict=True))


def test_the_held_out_split_in_memory_is_the_images_one_by_one(data_root: Path) -> None:
    test = load_dataset("digits", data_root, train=False)
    assert torch.equal(in_memory(test).tensors[0], torch.stack([test[i][0] for i in range(len(test))]))


def test_the_pipelines_it_knows_and_those_it_leaves_alone() -> None:
    norm = T.Normalize((0.5, 0.4, 0.3), (0.2, 0.2, 0.2))
    crop = T.RandomCrop(32, padding=4)
    assert batch_pipeline(T.Compose([crop, T.RandomHorizontalFlip(), T.ToTensor(), norm])) == BatchPipeline(
        32, 4, 0.5, (0.5, 0.4, 0.3), (0.2, 0.2, 0.2)
    )
    assert batch_pipeline(T.Compose([T.ToTensor(), norm])) == BatchPipeline(None, 0, None, norm.mean, norm.std)
    for other in (
        None,
        T.Compose([T.ToTensor()]),
        T.Compose([T.RandomHorizontalFlip(), crop, T.ToTensor(), norm]),  # another order of draws
        T.Compose([T.RandomCrop(32, padding=4, padding_mode="reflect"), T.ToTensor(), norm]),
        T.Compose([T.RandomCrop(32, padding=4, fill=1), T.ToTensor(), norm]),
        T.Compose([T.RandomCrop(32, padding=(4, 2)), T.ToTensor(), norm]),
        T.Compose([T.RandomCrop((32, 30), padding=4), T.ToTensor(), norm]),
        T.Compose([crop, T.ColorJitter(0.1), T.ToTensor(), norm]),
        T.Compose([T.ToTensor(), norm, T.Lambda(lambda x: x)]),
    ):
        assert batch_pipeline(other) is None, other


def test_an_unknown_transform_goes_image_by_image(data_root: Path) -> None:
    dataset = load_dataset("digits", data_root, train=True)
    dataset.transform = T.Compose([T.RandomCrop(32, padding=4), T.ColorJitter(0.5), T.ToTensor()])
    batch, one_by_one, same_state = _both_ways(dataset, [3, 1])
    assert same_state and all(torch.equal(a[0], b[0]) for a, b in zip(batch, one_by_one, strict=True))


def test_the_loader_bench_times_both_ways_and_checks_them_equal(data_root: Path, capsys) -> None:
    from prunex.bench import loader as bench

    assert bench.main(["--data-root", str(data_root), "--as-cifar10", "--batch", "8", "--runs", "2"]) == 0
    out = capsys.readouterr().out
    assert "RandomCrop -> RandomHorizontalFlip -> ToTensor -> Normalize, batch 8, 2 runs" in out
    assert "image by image:" in out and "tensor ops:" in out and "(bitwise equal)" in out

    assert bench.main(["--dataset", "cifar10", "--data-root", str(data_root)]) == 2  # not there: one line
    err = capsys.readouterr().err
    assert err.startswith("error: CIFAR-10 not found under") and err.count("\n") == 1, err

    class Shifted(type(load_dataset("digits", data_root, train=True))):
        def uint8_images(self, indices: list[int]) -> torch.Tensor:
            return super().uint8_images(indices).roll(1, dims=-1)

    shifted = load_dataset("digits", data_root, train=True)
    shifted.__class__ = Shifted
    with pytest.raises(AssertionError, match="differs"):
        bench.measure(shifted, batch=4, runs=1)
