"""Group masks of a layer: which output filters and input channels survive (sec. 4.4.1).

The element mask ``m`` of a layer (the projection's support, or the OR-synchronized global mask of
eq. (14)) determines two index sets: K_out, the filters with at least one active entry, and K_in, the
input channels with at least one active entry. They drive the physical shrinkage of eq. (15)
(:func:`prunex.comm.shrink.compress`) and mask drift is measured on them (sec. 4.5).

Example::

    PYTHONPATH=. python -c "import torch; from prunex.pruning import project, group_mask_from_tensor; \\
        print(group_mask_from_tensor(project(torch.randn(8, 4, 3, 3), filter_keep=0.5)).out_idx)"
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = ["GroupMask", "group_mask_from_mask", "group_mask_from_tensor", "drift"]


# eq=False: dataclass equality would compare tensors element-wise and fail on bool(); compare group
# masks with drift(a, b) == 0 (and torch.equal on .mask when element masks matter).
@dataclass(frozen=True, eq=False)
class GroupMask:
    """Kept groups of one layer.

    Attributes:
        out_idx: sorted kept output indices K_out (int64, 1-D).
        in_idx: sorted kept input indices K_in (int64, 1-D).
        mask: full element mask (bool), shaped like the weight.
    """

    out_idx: Tensor
    in_idx: Tensor
    mask: Tensor

    @property
    def kept_out(self) -> int:
        """|K_out|."""
        return int(self.out_idx.numel())

    @property
    def kept_in(self) -> int:
        """|K_in|."""
        return int(self.in_idx.numel())

    @property
    def total_out(self) -> int:
        """C_out of the full weight."""
        return int(self.mask.shape[0])

    @property
    def total_in(self) -> int:
        """C_in of the full weight."""
        return int(self.mask.shape[1])

    @property
    def density(self) -> float:
        """Fraction of True entries of the element mask."""
        return int(self.mask.count_nonzero()) / self.mask.numel()


def group_mask_from_mask(mask: Tensor) -> GroupMask:
    """K_out and K_in of an element mask (sec. 4.4.1: ``any`` reductions, then ``nonzero``).

    Args:
        mask: boolean element mask, ``C_out x C_in x ...`` (4-D conv or 2-D linear).

    Returns:
        The layer's :class:`GroupMask`; ``mask`` is stored as given (not copied).

    Raises:
        TypeError: if ``mask`` is not boolean.
        ValueError: if ``mask`` has fewer than 2 dims.
    """
    if mask.dtype != torch.bool:
        raise TypeError(f"mask must be a bool tensor, got {mask.dtype}")
    if mask.dim() < 2:
        raise ValueError(f"mask needs >= 2 dims (C_out x C_in x ...), got shape {tuple(mask.shape)}")
    out_any = mask.reshape(mask.shape[0], -1).any(dim=1)
    in_any = mask.transpose(0, 1).reshape(mask.shape[1], -1).any(dim=1)
    # nonzero returns indices in increasing order, so K_out and K_in are sorted.
    out_idx = torch.nonzero(out_any).flatten()
    in_idx = torch.nonzero(in_any).flatten()
    return GroupMask(out_idx=out_idx, in_idx=in_idx, mask=mask)


def group_mask_from_tensor(z: Tensor) -> GroupMask:
    """Group mask of the nonzero pattern of ``z`` (e.g. a projected node consensus z_i, eq. (10)).

    Args:
        z: weight-shaped tensor, 4-D or 2-D.

    Returns:
        ``group_mask_from_mask(z != 0)``.
    """
    return group_mask_from_mask(z != 0)


def _indicator(idx: Tensor, n: int, device: torch.device) -> Tensor:
    kept = torch.zeros(n, dtype=torch.bool, device=device)
    kept[idx.to(device)] = True
    return kept


def drift(a: GroupMask, b: GroupMask) -> int:
    """Mask drift between two group masks (sec. 4.5): groups whose kept/pruned status differs.

    Args:
        a: group mask (e.g. of the previous iteration).
        b: group mask of the same layer (same C_out and C_in).

    Returns:
        Number of output indices plus input indices kept in exactly one of ``a``, ``b``.

    Raises:
        ValueError: if the layers' C_out or C_in differ.
    """
    if (a.total_out, a.total_in) != (b.total_out, b.total_in):
        raise ValueError(
            f"drift needs masks of the same layer: (C_out, C_in) {(a.total_out, a.total_in)} "
            f"vs {(b.total_out, b.total_in)}"
        )
    dev = a.out_idx.device
    d_out = _indicator(a.out_idx, a.total_out, dev) ^ _indicator(b.out_idx, b.total_out, dev)
    d_in = _indicator(a.in_idx, a.total_in, dev) ^ _indicator(b.in_idx, b.total_in, dev)
    return int(d_out.count_nonzero()) + int(d_in.count_nonzero())
