"""One-shot L1 structured pruning of a trained dense network to a FLOPs target (prune-then-finetune).

The baseline of Li et al. (2017, "Pruning Filters for Efficient ConvNets"), as the field applies
it to ResNets: only *internal* channels are pruned (the outputs of a block's inner convolutions,
each written by one convolution and read by the next; `ChannelSpace.internal`), because the
channels of a shortcut stream are tied across every block of a stage. In every internal space the
same fraction `keep` of channels survives (`keep_count`, at least one), those whose producing
filter has the largest L1 norm (ties: the lower index). A pruned channel becomes a mask that zeroes
its filter and every reader's input slice, so the masked network is exactly the physically pruned
one (`prunex.pruning.export` removes precisely these channels) and can be fine-tuned as a masked dense
network with every method's machinery.

`prune_to_flops` picks the largest uniform `keep` whose exported model has at most the target
fraction of the dense FLOPs (binary search over the keep rates that change a channel count), so
the baseline is never given more compute than the model it is compared with.

    PYTHONPATH=. python -c "from prunex.training.models import build_model; from prunex.pruning.oneshot import \\
        prune_to_flops; print(prune_to_flops(build_model('resnet20'), 0.5)[1:])"
"""

from __future__ import annotations

import copy

import torch
from torch import Tensor, nn

from prunex.pruning.channels import ChannelGraph, trace_channels
from prunex.pruning.export import compact, count_flops
from prunex.pruning.project import keep_count

__all__ = ["l1_channel_masks", "apply_masks", "prune_to_flops", "flops_fraction"]


def _param_name(module_name: str) -> str:
    return f"{module_name}.weight" if module_name else "weight"


@torch.no_grad()
def l1_channel_masks(model: nn.Module, keep: float, cg: ChannelGraph | None = None) -> dict[str, Tensor]:
    """Element masks (parameter name -> bool, weight-shaped) pruning every internal space to `keep`.

    Args:
        model: the trained dense network.
        keep: fraction of each internal space's channels kept, in (0, 1].
        cg: `trace_channels(model)`, if already computed.
    """
    cg = cg or trace_channels(model)
    mods = cg.modules
    masks: dict[str, Tensor] = {}

    def mask(name: str) -> Tensor:
        pname = _param_name(name)
        if pname not in masks:
            w = mods[name].weight
            masks[pname] = torch.ones(w.shape, dtype=torch.bool, device=w.device)
        return masks[pname]

    for s in cg.spaces:
        if not s.internal:
            continue
        w = mods[s.writers[0]].weight.detach()
        l1 = w.abs().reshape(w.shape[0], -1).sum(dim=1)
        order = torch.argsort(-l1, stable=True)[keep_count(s.size, keep) :]  # the pruned channels
        mask(s.writers[0])[order] = False  # their filters ...
        for r in s.readers:
            mask(r)[:, order] = False  # ... and every reader's input slice
    return masks


@torch.no_grad()
def apply_masks(model: nn.Module, masks: dict[str, Tensor]) -> None:
    """Zero every weight outside its mask (in place)."""
    params = dict(model.named_parameters())
    for name, m in masks.items():
        params[name].mul_(m.to(params[name].device))


def _flops(model: nn.Module, masks: dict[str, Tensor]) -> int:
    """FLOPs of the exported model of `model` with `masks` applied."""
    trial = copy.deepcopy(model)
    apply_masks(trial, masks)
    return count_flops(compact(trial, measure=False)[0])


def flops_fraction(model: nn.Module, masks: dict[str, Tensor]) -> float:
    """The FLOPs of the exported model of `model` with `masks` applied, as a fraction of the dense model's."""
    return _flops(model, masks) / count_flops(model)


def prune_to_flops(model: nn.Module, flops_fraction: float) -> tuple[dict[str, Tensor], float, float]:
    """Masks of the largest uniform L1 keep rate whose exported FLOPs are <= `flops_fraction` of dense.

    The keep rates that matter are k / n for the internal spaces' sizes n (`keep_count` rounds up):
    a binary search over them finds the largest feasible one exactly.

    Args:
        model: the trained dense network (not modified).
        flops_fraction: target, in (0, 1].

    Returns:
        (masks, keep, achieved FLOPs fraction). When even one channel per internal space exceeds
        the target, the smallest such model is returned and its fraction says by how much.
    """
    if not 0 < flops_fraction <= 1:
        raise ValueError(f"flops_fraction must be in (0, 1], got {flops_fraction}")
    cg = trace_channels(model)
    dense = count_flops(model)
    sizes = {s.size for s in cg.spaces if s.internal}
    keeps = sorted({k / n for n in sizes for k in range(1, n + 1)} | {1.0})

    def trial(keep: float) -> tuple[dict[str, Tensor], float, float]:
        masks = l1_channel_masks(model, keep, cg)
        return masks, keep, _flops(model, masks) / dense

    lo, hi = 0, len(keeps) - 1  # invariant: everything above hi is infeasible
    best = trial(keeps[0])
    if best[2] > flops_fraction:
        return best
    while lo < hi:  # keeps[lo] is feasible
        mid = (lo + hi + 1) // 2
        t = trial(keeps[mid])
        if t[2] <= flops_fraction:
            lo, best = mid, t
        else:
            hi = mid - 1
    return best
