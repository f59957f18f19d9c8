import pytest
import torch

from prunex.training.models import MODELS, build_model, count_parameters

# CIFAR-10 variants (3x3 stride-1 stem, no max-pool, 10 classes), torchvision classes.
EXPECTED = {"resnet18": 11.2e6, "resnet152": 58.2e6, "wide_resnet50_2": 66.8e6, "resnet20": 0.27e6}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_parameter_counts_within_one_percent(name: str) -> None:
    n = count_parameters(build_model(name))
    assert abs(n - EXPECTED[name]) / EXPECTED[name] < 0.01, n


def test_cifar_stem_and_output() -> None:
    model = build_model("resnet18")
    assert model.conv1.kernel_size == (3, 3) and model.conv1.stride == (1, 1)
    assert isinstance(model.maxpool, torch.nn.Identity)
    assert model(torch.randn(2, 3, 32, 32)).shape == (2, 10)
    assert build_model("resnet20")(torch.randn(2, 3, 32, 32)).shape == (2, 10)


def test_unknown_model_lists_known_ones() -> None:
    with pytest.raises(ValueError, match="unknown model 'resnet99'; known: .*resnet20"):
        build_model("resnet99")
    assert set(EXPECTED) <= set(MODELS)
