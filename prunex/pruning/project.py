"""Euclidean projections onto the structured sparsity sets of sec. 2.1.

A convolution weight ``w`` has shape ``C_out x C_in x KH x KW`` and three kinds of groups:

* filters (S_f): output channels ``w[o]``, norms ``m_f``;
* channels (S_c): input channels ``w[:, c]``, norms ``m_c``;
* shapes (S_s): kernel positions ``w[:, c, h, w]`` across all filters, norms ``M_s``.

For a Linear weight ``d_out x d_in`` the filters are the rows and the channels the columns; shape
sparsity only exists for 4-D weights.

For a single kind the Euclidean projection (eq. (10)) keeps the ``k`` groups of largest Frobenius norm
and zeroes the rest: the distance to any point supported on a set G of groups is at least the norm of
the groups outside G, which is smallest when G holds the k largest. ``k = keep_count(n, keep)`` is
``ceil(keep * n)``, and ties are broken deterministically (equal norms: the lower index is kept).

Composite sets (S = S_f ∩ S_c ∩ S_s). Sec. 3.2 claims the projections can be applied in turn and that
"the order of projection does not affect the final support set". That is false in general: once
filters are removed, the channel norms are computed on what is left, so filter-then-channel and
channel-then-filter can keep different channels (``tests/test_pruning.py`` pins a 2 x 2 example).
We instead compose kinds the way sec. 5.1.5 says the implementation does ("composing multiple sparsity
operators ... by intersecting their masks"): every kind computes its mask from the SAME tensor and the
masks are AND-ed (:func:`support_mask`). This is order-independent by construction and the result lies
in every set, so it is a feasible point of the intersection; it is not necessarily the nearest point of
the intersection set, whose exact projection is a combinatorial problem.

Example::

    PYTHONPATH=. python -c "import torch; from prunex.pruning import project; \\
        print(project(torch.randn(4, 3, 3, 3), channel_keep=0.5).abs().sum((0, 2, 3)))"
"""

from __future__ import annotations

import torch
from torch import Tensor

from prunex.comm.cost import check_keep, keep_count

__all__ = ["keep_count", "filter_mask", "channel_mask", "shape_mask", "support_mask", "masked", "project"]


def _check_weight(w: Tensor) -> None:
    if w.dim() < 2:
        raise ValueError(f"structured sparsity needs a weight with >= 2 dims, got shape {tuple(w.shape)}")


def _sq_norms(w: Tensor, dims: tuple[int, ...]) -> Tensor:
    """Squared Frobenius norms reduced over ``dims`` (squares rank like norms; no sqrt rounding)."""
    x = w.detach()
    if x.dtype in (torch.float16, torch.bfloat16):
        x = x.float()  # rank low-precision weights in float32: fewer spurious ties
    return x.square().sum(dim=dims)


def _top_groups(sq_norms: Tensor, keep: float) -> Tensor:
    """Boolean vector over groups that keeps exactly ``keep_count`` largest, lower index on ties."""
    flat = sq_norms.reshape(-1)
    k = keep_count(flat.numel(), keep)
    # Stable sort of -norm: among equal norms the lower index comes first (deterministic tie-break).
    order = torch.argsort(-flat, stable=True)[:k]
    kept = torch.zeros(flat.shape, dtype=torch.bool, device=flat.device)
    kept[order] = True
    return kept.view(sq_norms.shape)


def _all_true(w: Tensor) -> Tensor:
    return torch.ones(w.shape, dtype=torch.bool, device=w.device)


def filter_mask(w: Tensor, keep: float) -> Tensor:
    """Mask of the projection onto S_f: keep the largest output channels (rows).

    Args:
        w: weight, ``C_out x C_in x ...`` (4-D conv or 2-D linear).
        keep: fraction of filters to keep, in (0, 1].

    Returns:
        Boolean tensor shaped like ``w``, True on the kept filters ``w[o]`` (sec. 2.1, m_f).
    """
    _check_weight(w)
    check_keep(keep)
    if keep == 1.0:
        return _all_true(w)
    kept = _top_groups(_sq_norms(w, tuple(range(1, w.dim()))), keep)
    return kept.view(-1, *([1] * (w.dim() - 1))).expand(w.shape).contiguous()


def channel_mask(w: Tensor, keep: float) -> Tensor:
    """Mask of the projection onto S_c: keep the largest input channels (columns).

    Args:
        w: weight, ``C_out x C_in x ...`` (4-D conv or 2-D linear).
        keep: fraction of input channels to keep, in (0, 1].

    Returns:
        Boolean tensor shaped like ``w``, True on the kept channels ``w[:, c]`` (sec. 2.1, m_c).
    """
    _check_weight(w)
    check_keep(keep)
    if keep == 1.0:
        return _all_true(w)
    dims = (0,) + tuple(range(2, w.dim()))
    kept = _top_groups(_sq_norms(w, dims), keep)
    return kept.view(1, -1, *([1] * (w.dim() - 2))).expand(w.shape).contiguous()


def shape_mask(w: Tensor, keep: float) -> Tensor:
    """Mask of the projection onto S_s: keep the largest kernel positions ``w[:, c, h, w]``.

    Args:
        w: 4-D conv weight ``C_out x C_in x KH x KW``.
        keep: fraction of the ``C_in * KH * KW`` positions to keep, in (0, 1].

    Returns:
        Boolean tensor shaped like ``w``, True on the kept positions across all filters (sec. 2.1, M_s).

    Raises:
        ValueError: if ``w`` is not 4-D.
    """
    if w.dim() != 4:
        raise ValueError(f"shape sparsity needs a 4-D conv weight (C_out x C_in x KH x KW), got {tuple(w.shape)}")
    check_keep(keep)
    if keep == 1.0:
        return _all_true(w)
    kept = _top_groups(_sq_norms(w, (0,)), keep)
    return kept.unsqueeze(0).expand(w.shape).contiguous()


def support_mask(w: Tensor, *, filter_keep: float = 1.0, channel_keep: float = 1.0, shape_keep: float = 1.0) -> Tensor:
    """Support of the composite projection: AND of the single-kind masks, all computed from ``w``.

    Order-independent by construction (sec. 5.1.5 "intersecting their masks"; see the module docstring
    for why this deliberately differs from the sequential projection of sec. 3.2).

    Args:
        w: weight, 4-D conv or 2-D linear (``shape_keep < 1`` needs 4-D).
        filter_keep: fraction of filters kept (S_f), in (0, 1]; 1.0 means unconstrained.
        channel_keep: fraction of input channels kept (S_c), in (0, 1].
        shape_keep: fraction of kernel positions kept (S_s), in (0, 1].

    Returns:
        Boolean tensor shaped like ``w``.
    """
    for keep in (filter_keep, channel_keep, shape_keep):
        check_keep(keep)
    mask = filter_mask(w, filter_keep)
    if channel_keep != 1.0:
        mask &= channel_mask(w, channel_keep)
    if shape_keep != 1.0:  # shape_mask raises for non-4-D weights only when shape sparsity is asked for
        mask &= shape_mask(w, shape_keep)
    return mask


def project(w: Tensor, *, filter_keep: float = 1.0, channel_keep: float = 1.0, shape_keep: float = 1.0) -> Tensor:
    """Project ``w`` onto the structured sparsity set (eq. (10), Pi_S).

    For a single kind this is exactly the Euclidean projection; for several kinds it zeroes everything
    outside :func:`support_mask` (a feasible point of the intersection, not necessarily the nearest).

    Args:
        w: weight, 4-D conv or 2-D linear.
        filter_keep: fraction of filters kept, in (0, 1].
        channel_keep: fraction of input channels kept, in (0, 1].
        shape_keep: fraction of kernel positions kept (4-D only), in (0, 1].

    Returns:
        A new tensor equal to ``w`` on the support and exactly 0 elsewhere (``w * mask``; written with
        ``torch.where`` so that a non-finite pruned entry still becomes 0, not NaN).
    """
    return masked(w, support_mask(w, filter_keep=filter_keep, channel_keep=channel_keep, shape_keep=shape_keep))


def masked(w: Tensor, mask: Tensor) -> Tensor:
    """``w`` on ``mask`` and exactly 0 elsewhere: how every projection and frozen mask is applied.

    Args:
        w: a tensor.
        mask: boolean tensor broadcastable to ``w``.

    Returns:
        A new tensor shaped like ``w``; ``torch.where`` (not ``w * mask``), so that a non-finite entry
        outside the mask becomes 0, not NaN, and a pruned entry is +0.0 whatever the sign of ``w``. The 0
        is one 0-d tensor per dtype and device, made once: a new one (or a Python scalar, which torch
        wraps in one) cost a fill kernel and an allocation per layer per frozen round on a GPU (issue 27).
    """
    key = (w.dtype, w.device)
    zero = _ZEROS.get(key)
    if zero is None:
        zero = _ZEROS[key] = torch.zeros((), dtype=w.dtype, device=w.device)
    return torch.where(mask, w, zero)


_ZEROS: dict[tuple[torch.dtype, torch.device], Tensor] = {}  # `masked`'s zeros
