"""The group mask of a constrained layer: which filters, input channels (and kernel positions) it keeps.

One mask model for the engines, the logs and the tests (sec. 4.4.1, eqs. (14)-(15), sec. 4.5).
A :class:`GroupMask` holds boolean group vectors: K_out over the C_out filters, K_in over the C_in
input channels and, with shape sparsity, the kept positions over C_in x KH x KW. Its support (the
*element mask*) is their Cartesian product:

- a projection's support is exactly that product (`support_mask` AND-s broadcast group masks), so
  :func:`project_groups` returns Pi_S(w) of eq. (10) together with its mask, and applying the mask
  (:meth:`GroupMask.apply`) is the projection's own masking (`prunex.pruning.project.masked`);
- the union of eq. (14) is taken per group (:meth:`GroupMask.vector` is the uint8 flag vector that
  `mask_sync` ORs), so the global support is the product of the united groups, which is exactly what
  `prunex.comm.shrink.compress` keeps (eq. (15)); entries outside it are zero in z (Alg. 1 line 22),
  an approximation of eq. (11) that the paper makes too;
- mask drift (sec. 4.5) counts the groups whose kept/pruned status changed (:meth:`GroupMask.drift`).

A mask built from an arbitrary element mask (:meth:`GroupMask.from_support`) keeps every group with an
active entry (``any``); its support is the smallest product that contains the given mask.

Example::

    PYTHONPATH=. python -c "import torch; from prunex.pruning import GroupMask, project; \\
        print(GroupMask.of_tensor(project(torch.randn(8, 4, 3, 3), filter_keep=0.5)).out_idx)"
"""

from __future__ import annotations

import torch
from torch import Tensor

from prunex.pruning.layers import LayerSparsity
from prunex.pruning.project import masked, support_mask

__all__ = ["GroupMask", "project_groups"]


class GroupMask:
    """Kept groups of one layer (module docstring).

    Args:
        out_keep: bool vector over the C_out filters.
        in_keep: bool vector over the C_in input channels.
        shape_keep: bool tensor over C_in x KH x KW kernel positions, or None (shape unconstrained).
        shape: the weight's shape.
    """

    def __init__(self, out_keep: Tensor, in_keep: Tensor, shape_keep: Tensor | None, shape: tuple[int, ...]):
        self.out_keep, self.in_keep = out_keep.bool(), in_keep.bool()
        self.shape_keep = shape_keep.bool() if shape_keep is not None else None
        self.shape = tuple(int(s) for s in shape)
        # sorted index sets (nonzero returns increasing indices): every leader packs the same layout
        self.out_idx = torch.nonzero(self.out_keep).flatten()
        self.in_idx = torch.nonzero(self.in_keep).flatten()
        self._density: float | None = None  # read from the device once per mask (a frozen mask: once)
        self._element: Tensor | None = None  # element_mask(), made once per mask

    # -- construction -----------------------------------------------------------------------------
    @classmethod
    def from_support(cls, keep: Tensor, with_shape: bool = False) -> GroupMask:
        """The groups of an element mask: ``any`` over the other dimensions (sec. 4.4.1)."""
        if keep.dtype != torch.bool:
            raise TypeError(f"a support must be a bool tensor, got {keep.dtype}")
        if keep.dim() < 2:
            raise ValueError(f"a support needs >= 2 dims (C_out x C_in x ...), got shape {tuple(keep.shape)}")
        out_keep = keep.reshape(keep.shape[0], -1).any(dim=1)
        in_keep = keep.transpose(0, 1).reshape(keep.shape[1], -1).any(dim=1)
        return cls(out_keep, in_keep, keep.any(dim=0) if with_shape else None, tuple(keep.shape))

    @classmethod
    def of_tensor(cls, z: Tensor, with_shape: bool = False) -> GroupMask:
        """The groups of the nonzero pattern of ``z`` (e.g. a projected z_i, eq. (10))."""
        return cls.from_support(z != 0, with_shape)

    @classmethod
    def full(cls, shape: tuple[int, ...], device: torch.device, with_shape: bool = False) -> GroupMask:
        """Everything kept (Alg. 1 line 1: m_global = 1)."""

        def ones(*dims: int) -> Tensor:
            return torch.ones(*dims, dtype=torch.bool, device=device)

        return cls(ones(shape[0]), ones(shape[1]), ones(*shape[1:]) if with_shape else None, shape)

    @classmethod
    def from_vector(cls, vec: Tensor, shape: tuple[int, ...], with_shape: bool) -> GroupMask:
        """Inverse of :meth:`vector`."""
        o, i = vec[: shape[0]], vec[shape[0] : shape[0] + shape[1]]
        s = vec[shape[0] + shape[1] :].reshape(shape[1:]) if with_shape else None
        return cls(o, i, s, shape)

    # -- sizes --------------------------------------------------------------------------------------
    @property
    def with_shape(self) -> bool:
        return self.shape_keep is not None

    @property
    def kept_out(self) -> int:
        """|K_out|."""
        return len(self.out_idx)

    @property
    def kept_in(self) -> int:
        """|K_in|."""
        return len(self.in_idx)

    @property
    def total_out(self) -> int:
        """C_out of the weight."""
        return len(self.out_keep)

    @property
    def total_in(self) -> int:
        """C_in of the weight."""
        return len(self.in_keep)

    @property
    def compact_shape(self) -> tuple[int, ...]:
        """Shape of the kept slices ``w[K_out][:, K_in]`` that `compress` packs (eq. (15))."""
        return (self.kept_out, self.kept_in, *self.shape[2:])

    # -- the support ----------------------------------------------------------------------------------
    def element_mask(self) -> Tensor:
        """Bool mask broadcastable to the weight: K_out x K_in (x kept shape positions)."""
        if self._element is None:  # a frozen mask is applied every round: its mask is built once
            m = self.out_keep[:, None] & self.in_keep[None, :]
            m = m.reshape(m.shape + (1,) * (len(self.shape) - 2))
            self._element = m & self.shape_keep[None] if self.shape_keep is not None else m
        return self._element

    def apply(self, w: Tensor) -> Tensor:
        """``w`` on the support, exactly 0 elsewhere (`masked`: a non-finite pruned entry becomes 0)."""
        return masked(w, self.element_mask())

    def density(self) -> float:
        """Fraction of the weight's entries inside the support."""
        if self._density is None:
            self._density = self.element_mask().float().mean().item()
        return self._density

    def row(self, layer: str) -> dict[str, str | float]:
        """The layer's row of ``final_masks.parquet``: the kept filters and input channels as 0/1 strings and the
        density (`prunex.methods.prune_finetune.masks_from` reads it back)."""
        return {
            "layer": layer,
            "out_keep": "".join(map(str, self.out_keep.int().tolist())),
            "in_keep": "".join(map(str, self.in_keep.int().tolist())),
            "density": self.density(),
        }

    # -- mask sync and drift -----------------------------------------------------------------------
    def numel_vector(self) -> int:
        """Length of :meth:`vector`."""
        return self.total_out + self.total_in + (self.shape_keep.numel() if self.shape_keep is not None else 0)

    def vector(self) -> Tensor:
        """uint8 flags [filters, channels, (shape positions)]: the union of eq. (14) is their MAX."""
        parts = [self.out_keep, self.in_keep] + ([self.shape_keep.flatten()] if self.shape_keep is not None else [])
        return torch.cat([p.to(torch.uint8) for p in parts])

    def drift(self, other: GroupMask) -> int:
        """Mask drift (sec. 4.5): groups kept in exactly one of the two masks (filters, channels and,
        where both carry them, shape positions). Raises ValueError for masks of different layers."""
        if (self.total_out, self.total_in) != (other.total_out, other.total_in):
            raise ValueError(
                f"drift needs masks of the same layer: (C_out, C_in) {(self.total_out, self.total_in)} "
                f"vs {(other.total_out, other.total_in)}"
            )
        n = int((self.out_keep != other.out_keep).sum() + (self.in_keep != other.in_keep).sum())
        if self.shape_keep is not None and other.shape_keep is not None:
            n += int((self.shape_keep != other.shape_keep).sum())
        return n


def project_groups(w: Tensor, sparsity: LayerSparsity) -> tuple[Tensor, GroupMask]:
    """Pi_S(w) of eq. (10) (what `project` returns) and the group mask of its support."""
    keep = support_mask(
        w, filter_keep=sparsity.filter_keep, channel_keep=sparsity.channel_keep, shape_keep=sparsity.shape_keep
    )
    return masked(w, keep), GroupMask.from_support(keep, sparsity.with_shape)
