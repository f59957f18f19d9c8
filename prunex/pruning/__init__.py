"""Structured sparsity: projections (sec. 2.1, eq. (10)), the group mask model (sec. 4.4.1, 4.5), constrained layers."""

from prunex.pruning.layers import LayerSparsity, constrained_layers, conv_sparsity
from prunex.pruning.masks import GroupMask, project_groups
from prunex.pruning.project import (
    channel_mask,
    filter_mask,
    keep_count,
    masked,
    project,
    shape_mask,
    support_mask,
)

__all__ = [
    "project",
    "masked",
    "support_mask",
    "filter_mask",
    "channel_mask",
    "shape_mask",
    "keep_count",
    "GroupMask",
    "project_groups",
    "LayerSparsity",
    "conv_sparsity",
    "constrained_layers",
]
