"""The implementation of `examples.local_sgd` (docstring there): a `prunex.methods.base.StepwiseMethod`.

What prunex asks of a method, and where this one does it:
- `step`: one SGD step on this rank's mini-batch (`local_backward`, the optimizer);
- communication only through `ctx.comm` (`prunex.comm.Comm`), so every byte and second is logged in
  `comm.parquet` like any method's: here one `all_reduce(..., "flat", "avg")` of the flattened parameters;
- `eval_model`: the model evaluated and exported. The ranks' models differ between averagings, so the
  last step of every epoch averages too: evaluation (at epoch ends) and the final model see one model;
- `state_dict`: what a resumed run needs, by owner. Parameters and momentum are each rank's own here
  (they differ between averagings), unlike DDP's replicated ones.
"""

from __future__ import annotations

from typing import Any

import torch

from examples.local_sgd import PERIOD
from prunex.methods.base import Context, IterationResult, StepwiseMethod, load_model_state, model_state
from prunex.methods.prune_finetune import KeepsMask, mask_rows, masks_from
from prunex.pruning.oneshot import apply_masks


def averages_after(k: int, period: int | None, steps_per_epoch: int) -> bool:
    """Whether the ranks average after step ``k`` (0-based): every ``period`` steps (None: never on that
    count) and after each epoch's last step, so that evaluation and the final model see one model."""
    return (period is not None and (k + 1) % period == 0) or (k + 1) % steps_per_epoch == 0


class LocalSGD(StepwiseMethod):
    name = "local_sgd"
    period: int | None = PERIOD  # local steps between two averagings (besides each epoch's end)

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)  # every rank starts from the same model (the trainer initialises it identically)
        self.optimizer = self.make_sgd(ctx.model.parameters())

    def step(self, x: torch.Tensor, y: torch.Tensor) -> float:
        loss = self.local_backward(x, y)
        self.optimizer.step()
        return loss.item()  # its finiteness: prunex.training.train.ranks_agree_on_failure

    def train_iteration(self, k: int) -> IterationResult:
        result = super().train_iteration(k)
        if averages_after(k, self.period, self.steps_per_epoch):
            self.average()
        return result

    @torch.no_grad()
    def average(self) -> None:
        """Every rank's parameters <- their mean over all ranks (one flat AllReduce, logged by `Comm`)."""
        params = list(self.ctx.model.parameters())
        flat = torch.cat([p.reshape(-1) for p in params])
        self.ctx.comm.all_reduce(flat, "flat", "avg")
        pos = 0
        for p in params:
            p.copy_(flat[pos : pos + p.numel()].view_as(p))
            pos += p.numel()

    def state_dict(self) -> dict[str, dict[str, Any]]:
        params, buffers = model_state(self.ctx.model)
        return {
            "replicated": {},
            "node": {},
            "rank": {"params": params, "buffers": buffers, "optimizer": self.optimizer.state_dict()},
        }

    def load_state_dict(self, state: dict[str, dict[str, Any]]) -> None:
        own = state["rank"]
        load_model_state(self.ctx.model, own["params"], own["buffers"])
        self.optimizer.load_state_dict(own["optimizer"])


class LocalSGDPerEpoch(LocalSGD):
    """``local_sgd_epoch``: the ranks average at each epoch's end only."""

    name = "local_sgd_epoch"
    period = None


class LocalSGDPerEpochOnMask(KeepsMask, LocalSGDPerEpoch):
    """``local_sgd_epoch_on_mask``: `local_sgd_epoch` on another run's final mask (`--mask-from RUN`, read as
    prune-then-finetune reads it: `prunex.methods.prune_finetune.masks_from`), the pruned weights back to zero
    after every step as prune-then-finetune does (`KeepsMask`), so an average (of zeros there) keeps them zero.
    A diagnostic beside prune-then-finetune on the same mask: the same network from the same start, averaged once
    per epoch instead of DDP's every step, with none of H-SADMM's proximal pull, duals or penalties."""

    name = "local_sgd_epoch_on_mask"

    def __init__(self, ctx: Context) -> None:
        run = ctx.config.prune_finetune.mask_from
        if not run:
            raise RuntimeError(f"{self.name}: give the run whose final mask it trains (--mask-from RUN)")
        self.masks = masks_from(ctx, run)
        apply_masks(ctx.model, self.masks)
        super().__init__(ctx)
        if ctx.topo.rank == 0:
            ctx.log.append("final_masks", mask_rows(self.masks))
