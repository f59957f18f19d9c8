"""CIFAR-10 models by name, built from torchvision's own classes.

The paper's models (Table 2) are torchvision's `resnet18`, `resnet152` and `wide_resnet50_2` with
the usual CIFAR-10 stem: a 3x3 stride-1 first convolution and no max-pool, 10 classes. Their
parameter counts are 11.2M, 58.2M and 66.8M (Table 2 rounds them to ~11M, ~60M and ~69M).

`resnet20` (He et al. 2016, sec. 4.2: three stages of 16/32/64 channels, 3 basic blocks each) is
the small model for CPU runs, built from torchvision's `BasicBlock`. torchvision's block uses a
1x1 convolution on the shortcut when the shape changes ("option B"), so it has 0.27M parameters
(0.269M with the original parameter-free "option A").

    python -c "from prunex.training.models import build_model; print(build_model('resnet20'))"
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torchvision.models import resnet18, resnet152, wide_resnet50_2
from torchvision.models.resnet import BasicBlock, ResNet


def _cifar_stem(model: ResNet) -> ResNet:
    model.conv1 = nn.Conv2d(3, model.conv1.out_channels, kernel_size=3, stride=1, padding=1, bias=False)
    model.maxpool = nn.Identity()
    return model


class CifarResNet(ResNet):
    """A three-stage CIFAR ResNet (ResNet-20/32/44/56) on torchvision's ResNet machinery."""

    def __init__(self, blocks_per_stage: int, num_classes: int = 10) -> None:
        # ResNet.__init__ would build the four ImageNet stages; set only what _make_layer reads.
        nn.Module.__init__(self)
        self._norm_layer = nn.BatchNorm2d
        self.groups, self.base_width, self.dilation = 1, 64, 1
        self.inplanes = 16
        self.conv1 = nn.Conv2d(3, 16, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.Identity()
        self.layer1 = self._make_layer(BasicBlock, 16, blocks_per_stage)
        self.layer2 = self._make_layer(BasicBlock, 32, blocks_per_stage, stride=2)
        self.layer3 = self._make_layer(BasicBlock, 64, blocks_per_stage, stride=2)
        self.layer4 = nn.Identity()
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(64, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)


MODELS: dict[str, Callable[[int], nn.Module]] = {
    "resnet18": lambda n: _cifar_stem(resnet18(num_classes=n)),
    "resnet152": lambda n: _cifar_stem(resnet152(num_classes=n)),
    "wide_resnet50_2": lambda n: _cifar_stem(wide_resnet50_2(num_classes=n)),
    "resnet20": lambda n: CifarResNet(3, n),
}


def build_model(name: str, num_classes: int = 10) -> nn.Module:
    """Build a freshly initialised model by registry name.

    Args:
        name: one of `MODELS`.
        num_classes: size of the classifier output.
    """
    try:
        factory = MODELS[name]
    except KeyError:
        raise ValueError(f"unknown model {name!r}; known: {', '.join(sorted(MODELS))}") from None
    return factory(num_classes)


def floating_dtype(model: nn.Module) -> torch.dtype:
    """The dtype of the model's floating-point parameters, which its inputs are cast to: float32 unless
    the model was built under another default dtype (the behaviour pins build float64 models,
    tests/test_golden_runs.py)."""
    return next((p.dtype for p in model.parameters() if p.is_floating_point()), torch.get_default_dtype())


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def conv_shapes(model: nn.Module) -> dict[str, torch.Size]:
    """Parameter name -> shape of every Conv2d weight (the layers the paper constrains)."""
    return {
        f"{mod_name}.weight" if mod_name else "weight": m.weight.shape
        for mod_name, m in model.named_modules()
        if isinstance(m, nn.Conv2d)
    }
