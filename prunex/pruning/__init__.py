"""Structured sparsity: projections (sec. 2.1, eq. (10)), group masks (sec. 4.4.1), constrained layers."""

from prunex.pruning.layers import LayerSparsity, constrained_layers
from prunex.pruning.masks import GroupMask, drift, group_mask_from_mask, group_mask_from_tensor
from prunex.pruning.project import channel_mask, filter_mask, keep_count, project, shape_mask, support_mask

__all__ = [
    "project",
    "support_mask",
    "filter_mask",
    "channel_mask",
    "shape_mask",
    "keep_count",
    "GroupMask",
    "group_mask_from_mask",
    "group_mask_from_tensor",
    "drift",
    "LayerSparsity",
    "constrained_layers",
]
