"""Batches made with tensor ops, bitwise the images torchvision's transforms give one image at a time.

A DataLoader fetches a batch with `dataset.__getitems__(indices)` where the dataset has one. For the
pipelines the CPU profiles use, `Compose([RandomCrop(size, padding)?, RandomHorizontalFlip(p)?, ToTensor(),
Normalize(mean, std)])`, `BatchedImages.__getitems__` makes the whole batch from the dataset's uint8 images
with a few tensor ops instead of a PIL image and four transforms per image:

- the same random numbers in the same order: per image, the crop's two `torch.randint` (row, then column)
  and then the flip's `torch.rand(1)`, image after image, as `Compose` draws them (so the generator's state
  after a batch is the same too, and every later batch is);
- the same pixels: zero padding, the crop window and the mirror are copies of uint8 values; then the same
  elementwise float steps as `ToTensor` and `Normalize` (/ 255, - mean, / std), in the default float dtype.

Any other transform (or a `target_transform`) goes image by image through `__getitem__`, as before.
Every dataset of `prunex.training.data` has it (CIFAR-10 since 2026-11-28). `python -m prunex.bench.loader` times
both ways in one run and checks them bitwise equal.
Measured on a 2-core AMD EPYC VM (Zen 3) while a test suite ran beside: an augmented Fashion-MNIST batch of 64
took 46.0 ms image by image and 9.5 ms as tensor ops (ResNet-20's SGD step on it: ~800 ms), digits' batch of 32
13.7 -> 2.9 ms, a rank's 2,500 held-out Fashion-MNIST images 1.67 -> 0.22 s.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch.nn import functional
from torchvision import transforms


@dataclass(frozen=True)
class BatchPipeline:
    """`Compose([RandomCrop(crop, padding)?, RandomHorizontalFlip(flip_p)?, ToTensor(), Normalize(mean, std)])`
    on a batch of uint8 images (B, C, H, W)."""

    crop: int | None  # RandomCrop's (square) size; None: no crop
    padding: int  # RandomCrop's zero padding on every side
    flip_p: float | None  # RandomHorizontalFlip's probability; None: no flip
    mean: tuple[float, ...]
    std: tuple[float, ...]

    def __call__(self, images: torch.Tensor) -> torch.Tensor:
        if self.crop is not None or self.flip_p is not None:
            images = torch.stack([self._augment(img) for img in images]) if len(images) else images
        x = images.to(torch.get_default_dtype()).div(255)  # ToTensor
        mean, std = (torch.as_tensor(v, dtype=x.dtype).view(-1, 1, 1) for v in (self.mean, self.std))
        return x.sub_(mean).div_(std)  # Normalize

    def _augment(self, img: torch.Tensor) -> torch.Tensor:
        """One image, drawing what `RandomCrop.get_params` and `RandomHorizontalFlip.forward` draw, in order."""
        if self.crop is not None:
            p = self.padding
            img = functional.pad(img, (p, p, p, p)) if p else img  # PIL's constant padding with fill 0
            h, w = img.shape[-2:]
            if h < self.crop or w < self.crop:
                raise ValueError(f"crop size {(self.crop, self.crop)} is larger than the padded image's {(h, w)}")
            if (h, w) != (self.crop, self.crop):  # get_params draws nothing for a crop of the whole image
                i = int(torch.randint(0, h - self.crop + 1, size=(1,)).item())
                j = int(torch.randint(0, w - self.crop + 1, size=(1,)).item())
                img = img[:, i : i + self.crop, j : j + self.crop]
        if self.flip_p is not None and torch.rand(1) < self.flip_p:
            img = img.flip(-1)
        return img


def _same_padding(padding: int | Sequence[int] | None) -> int | None:
    """RandomCrop's padding as one width for every side, None if the sides differ."""
    if padding is None:
        return 0
    if isinstance(padding, int):
        return padding
    widths = set(padding)
    return widths.pop() if len(widths) == 1 else None


def batch_pipeline(transform: object) -> BatchPipeline | None:
    """The `BatchPipeline` that `transform` is, or None when it is anything else."""
    if type(transform) is not transforms.Compose:
        return None
    steps = list(transform.transforms)
    crop, padding, flip_p = None, 0, None
    if steps and type(steps[0]) is transforms.RandomCrop:
        rc = steps.pop(0)
        padding = _same_padding(rc.padding)
        square = rc.size[0] == rc.size[1]
        if padding is None or not square or rc.pad_if_needed or rc.padding_mode != "constant" or rc.fill != 0:
            return None
        crop = rc.size[0]
    if steps and type(steps[0]) is transforms.RandomHorizontalFlip:
        flip_p = steps.pop(0).p
    if len(steps) != 2 or type(steps[0]) is not transforms.ToTensor or type(steps[1]) is not transforms.Normalize:
        return None
    return BatchPipeline(crop, padding, flip_p, tuple(steps[1].mean), tuple(steps[1].std))


class BatchedImages:
    """`__getitems__` for a torchvision image dataset (`transform`, `target_transform`, `targets`) whose class
    gives its uint8 images as a tensor with `uint8_images` (module docstring)."""

    def uint8_images(self, indices: list[int]) -> torch.Tensor:
        """The images at `indices` as one uint8 tensor (B, C, H, W), before any transform."""
        raise NotImplementedError

    def __getitems__(self, indices: list[int]) -> list[tuple[object, int]]:
        pipeline = batch_pipeline(getattr(self, "transform", None))
        if pipeline is None or getattr(self, "target_transform", None) is not None:
            return [self[i] for i in indices]  # type: ignore[index]
        x = pipeline(self.uint8_images(indices))
        targets = self.targets  # type: ignore[attr-defined]
        return [(x[k], int(targets[i])) for k, i in enumerate(indices)]
