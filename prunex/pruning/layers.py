"""Which layers carry a structured sparsity constraint S^l, and at which keep rates (sec. 2.1, 5.1.5).

The paper constrains the convolutional layers only (L_conv in sec. 2.1; "structured sparsity is applied
only to convolutional layers", sec. 5.1.5). Layers are keyed by parameter name, e.g.
``"layer1.0.conv1.weight"``, since projections act on parameter tensors.

Example::

    PYTHONPATH=. python -c "import torchvision; from prunex.pruning import constrained_layers; \\
        print(constrained_layers(torchvision.models.resnet18(), channel_keep=0.5))"
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass

from torch import nn

from prunex.comm.cost import check_keep

__all__ = ["LayerSparsity", "conv_sparsity", "constrained_layers"]


@dataclass(frozen=True)
class LayerSparsity:
    """Keep rates of one layer's structured sparsity set S^l = S_f ∩ S_c ∩ S_s (sec. 2.1).

    Attributes:
        name: parameter name of the weight, e.g. ``"layer1.0.conv1.weight"``.
        filter_keep: fraction of output filters kept (alpha_out / C_out), in (0, 1]; 1.0 = unconstrained.
        channel_keep: fraction of input channels kept (alpha_in / C_in), in (0, 1].
        shape_keep: fraction of kernel positions kept (alpha_kernel / (C_in KH KW)), in (0, 1]; 4-D only.
    """

    name: str
    filter_keep: float = 1.0
    channel_keep: float = 1.0
    shape_keep: float = 1.0

    def __post_init__(self) -> None:
        for field in ("filter_keep", "channel_keep", "shape_keep"):
            check_keep(getattr(self, field), f"layer {self.name!r}: {field}")

    @property
    def constrained(self) -> bool:
        """Whether any kind of sparsity is enforced (some keep rate below 1)."""
        return min(self.filter_keep, self.channel_keep, self.shape_keep) < 1.0

    @property
    def with_shape(self) -> bool:
        """Whether kernel positions are constrained too (the group mask then carries them)."""
        return self.shape_keep < 1.0


def conv_sparsity(
    name: str, in_channels: int, *, filter_keep: float = 1.0, channel_keep: float = 1.0, shape_keep: float = 1.0
) -> LayerSparsity:
    """The default constraint of a convolution weight: the given keep rates, except that the image input
    layer (3 input channels: the RGB planes of the data, which no preceding layer produces, so pruning
    them saves nothing upstream and just discards input) keeps all its channels. Shared by
    :func:`constrained_layers` and the performance model (`prunex.perfmodel.workload`)."""
    ck = 1.0 if in_channels == 3 else channel_keep
    return LayerSparsity(name, filter_keep, ck, shape_keep)


def constrained_layers(
    model: nn.Module,
    *,
    filter_keep: float = 1.0,
    channel_keep: float = 1.0,
    shape_keep: float = 1.0,
    include: str | None = None,
    per_layer: Mapping[str, LayerSparsity] | None = None,
) -> dict[str, LayerSparsity]:
    """Sparsity settings of the constrained layers of ``model``, keyed by parameter name.

    By default every ``nn.Conv2d`` weight gets the given keep rates. A grouped convolution is treated
    like any other (its channel groups are the columns of its ``C_out x C_in/groups`` weight).

    Args:
        model: the network.
        filter_keep: default fraction of filters kept, in (0, 1].
        channel_keep: default fraction of input channels kept, in (0, 1].
        shape_keep: default fraction of kernel positions kept, in (0, 1].
        include: optional ``fnmatch`` glob over parameter names (case-sensitive) restricting the default
            set, e.g. ``"layer[34].*"``.
        per_layer: explicit settings by parameter name. They replace the default entry, and may add any
            weight of the model (e.g. a Linear one), regardless of ``include``; an entry with all keeps
            1.0 removes the layer.

    Returns:
        Ordered (module order) dict from parameter name to :class:`LayerSparsity`; layers whose keep
        rates are all 1.0 are omitted.

    Raises:
        ValueError: on keep rates outside (0, 1], a ``per_layer`` key that is not a parameter of the
            model or whose value names another layer, or shape sparsity on a non-4-D weight.
    """
    # Validates the defaults even when no layer ends up using them.
    LayerSparsity("<default>", filter_keep, channel_keep, shape_keep)
    params = dict(model.named_parameters())
    result: dict[str, LayerSparsity] = {}
    for mod_name, module in model.named_modules():
        if not isinstance(module, nn.Conv2d):
            continue
        name = f"{mod_name}.weight" if mod_name else "weight"
        if include is not None and not fnmatch.fnmatchcase(name, include):
            continue
        result[name] = conv_sparsity(
            name, module.in_channels, filter_keep=filter_keep, channel_keep=channel_keep, shape_keep=shape_keep
        )

    for name, setting in (per_layer or {}).items():
        if name not in params:
            raise ValueError(f"per_layer key {name!r} is not a parameter of the model")
        if setting.name != name:
            raise ValueError(f"per_layer[{name!r}] is a LayerSparsity named {setting.name!r}")
        result[name] = setting

    for name, setting in result.items():
        if setting.shape_keep < 1.0 and params[name].dim() != 4:
            raise ValueError(f"layer {name!r}: shape sparsity needs a 4-D weight, got {tuple(params[name].shape)}")

    ordered = [n for n in params if n in result]
    return {n: result[n] for n in ordered if result[n].constrained}
