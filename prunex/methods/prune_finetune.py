"""`prune_finetune`: the prune-then-finetune baseline beside H-SADMM (issue 17; Li et al. 2017).

A dense model trained by another run (`--init-from`, e.g. a `ddp` run of the same experiment; loaded
into every rank's model by the trainer, as for every method) is pruned once, before the first step, by
`prunex.pruning.oneshot.prune_to_flops`: L1 norms of the filters, the same fraction of every internal
channel space, the largest fraction whose exported model has at most the target FLOPs: `--flops-from
RUN`'s achieved fraction (its `export.json`, written by `prunex.pruning.export`), else `--flops-keep`; or, with
`--mask-from RUN`, by that run's final mask (its `final_masks.parquet`: H-SADMM's, say), a diagnostic that trains
another method's pruned network with DDP from the same start (keep logged as NaN, no L1 search). It is
then fine-tuned with DDP exactly like the `ddp` method (same hook, same logs) for `--epochs` epochs,
the mask enforced after every step (pruned weights back to zero), which trains exactly the physically
pruned network: pruned channels are read by nobody, so they pass no gradient to the kept weights.

The Pareto experiment starts it from the same dense model as H-SADMM and gives it the same SGD steps per
rank (experiments/pareto.py). The mask is
logged once as `final_masks` (layer, out_keep, in_keep, density), and the pruning decision as
`pruning` (target and achieved FLOPs fraction, keep rate).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from prunex.methods.base import Context
from prunex.methods.ddp import DDP
from prunex.pruning import GroupMask
from prunex.pruning.oneshot import apply_masks, flops_fraction, prune_to_flops
from prunex.training.log import FINAL_MASKS


def _run_dir(ctx: Context, name: str) -> Path:
    return Path(ctx.config.results).resolve() / ctx.config.experiment / name


def flops_target(ctx: Context) -> float:
    """The FLOPs fraction to prune to: `flops_from`'s exported fraction, else `flops_keep`."""
    pf = ctx.config.prune_finetune
    if not pf.flops_from:
        return pf.flops_keep
    path = _run_dir(ctx, pf.flops_from) / "export.json"
    try:
        return float(json.loads(path.read_text())["flops_fraction"])
    except (OSError, ValueError, KeyError) as e:
        raise RuntimeError(
            f"prune_finetune: no achieved FLOPs in {path} ({type(e).__name__}); run `python -m prunex.pruning.export "
            f"{path.parent}` or finish that run with --export first"
        ) from None


def masks_from(ctx: Context, run: str) -> dict[str, torch.Tensor]:
    """`run`'s final mask (``final_masks.parquet``: layer, out_keep, in_keep as 0/1 strings) as element masks of
    `ctx.model`'s weights: filter x input channel, every kernel position of a kept pair kept. A run that pruned
    kernel shapes too (``admm.shape_keep`` < 1) is refused: its table does not record them."""
    path = _run_dir(ctx, run) / FINAL_MASKS
    config = path.with_name("config.json")
    shape_keep = json.loads(config.read_text()).get("admm", {}).get("shape_keep", 1.0) if config.exists() else 1.0
    if shape_keep < 1:
        raise RuntimeError(
            f"prune_finetune: {run} pruned kernel shapes (shape_keep {shape_keep}), which "
            "final_masks.parquet does not record: its mask cannot be rebuilt"
        )
    params = dict(ctx.model.named_parameters())
    try:
        rows = pd.read_parquet(path)
    except OSError as e:
        raise RuntimeError(
            f"prune_finetune: no final mask in {path} ({type(e).__name__}); finish that run first"
        ) from None
    masks = {}
    for r in rows.itertuples():
        w = params.get(r.layer)
        out_keep = torch.tensor([c == "1" for c in r.out_keep])
        in_keep = torch.tensor([c == "1" for c in r.in_keep])
        if w is None or w.dim() < 2 or (len(out_keep), len(in_keep)) != tuple(w.shape[:2]):
            raise RuntimeError(f"prune_finetune: {path}: layer {r.layer} does not fit this model")
        keep = out_keep[:, None] & in_keep[None, :]
        masks[r.layer] = keep.reshape(*keep.shape, *([1] * (w.dim() - 2))).expand(w.shape).clone()
    return masks


def mask_rows(masks: dict[str, torch.Tensor]) -> list[dict[str, Any]]:
    """`final_masks` rows of element masks (`GroupMask.row`): what `masks_from` reads back and
    `prunex.pruning.export` builds the compact model from."""
    return [GroupMask.from_support(m.cpu()).row(layer) for layer, m in masks.items()]


class KeepsMask:
    """A method mixin (before the method's class in the bases): after every SGD step of the method's own, the
    weights off `self.masks` back to zero, so the physically pruned network is what trains."""

    masks: dict[str, torch.Tensor]
    ctx: Context

    def step(self, x: torch.Tensor, y: torch.Tensor) -> float:
        loss = super().step(x, y)  # the method's own step, next in the bases
        with torch.no_grad():
            apply_masks(self.ctx.model, self.masks)  # the pruned weights stay zero
        return loss


class PruneFinetune(KeepsMask, DDP):
    name = "prune_finetune"

    def __init__(self, ctx: Context) -> None:
        if ctx.config.prune_finetune.mask_from:  # another run's mask, its FLOPs
            self.masks = masks_from(ctx, ctx.config.prune_finetune.mask_from)
            keep, achieved = float("nan"), flops_fraction(ctx.model, self.masks)
            target = achieved
        else:
            target = flops_target(ctx)  # ctx.model is --init-from's (prunex.training.train)
            self.masks, keep, achieved = prune_to_flops(ctx.model, target)
        apply_masks(ctx.model, self.masks)
        super().__init__(ctx)  # DDP wraps the pruned model
        if ctx.topo.rank == 0:
            init = ctx.config.init_from
            row = {"target_flops_fraction": target, "flops_fraction": achieved, "keep": keep, "init_from": init}
            ctx.log.append("pruning", [row])
            ctx.log.append("final_masks", mask_rows(self.masks))
