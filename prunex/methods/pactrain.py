"""`pactrain`: magnitude pruning with a mask every worker knows, and a dense-packed AllReduce.

After PacTrain (Wang et al. 2025, "PacTrain: Pruning and Adaptive Sparse Gradient Compression
for Efficient Collective Communication in Distributed Deep Learning", arXiv, abstract): "Active
pruning of the neural network makes the model weights and gradients sparse. By ensuring the
global knowledge of the gradient sparsity among all distributed training workers, we can perform
lightweight compression communication ... compatible with the all-reduce primitive." Since every
worker has the same mask, the gradients of the unpruned weights can be packed densely in the same
order on every rank and summed by an ordinary AllReduce: no indices are sent and nothing is
gathered.

The abstract leaves the design open; the choices made here:

- *What is pruned*: unstructured magnitude pruning of every parameter with more than one
  dimension (convolution and linear weights); biases and BatchNorm parameters stay dense, as in
  `topk`.
- *Per-layer, not global, magnitude*: each such tensor keeps exactly
  ``keep_count(numel, d) = ceil(d * numel)`` of its entries at density ``d``
  (`prunex.pruning.project.keep_count`). The schedule below prunes at the start of epoch 0,
  i.e. at initialisation, where magnitudes reflect each layer's initialisation scale (Kaiming:
  std ~ 1/sqrt(fan)) rather than importance; a global threshold would then empty the widest
  layers first ("layer collapse", Tanaka et al. 2020, SynFlow, sec. 3). Per-layer keeps every
  layer trainable and makes the payload a fixed, known fraction of every layer.
- *Schedule* (`PacTrainConfig`): training starts dense; at the start of epochs 0, prune_every,
  2 prune_every, ... < prune_epochs the mask is recomputed at a density that ramps linearly from
  1 to ``density``: update i of n has density ``1 - (1 - density) (i + 1) / n``, so the last
  update reaches ``density`` (``prune_epochs == 0``: one update at epoch 0, straight to
  ``density``). Masks are nested: a pruned weight is zero, ranks below every unpruned one, and
  is never revived.
- *Who decides*: rank 0 computes the mask from its weights and broadcasts it (uint8, one message
  for all tensors, recorded as a flat ``broadcast``), so every worker holds the identical mask
  whatever the floating-point ties; this happens only on the iterations where the schedule
  updates the mask.
- *Each step*: the gradients of pruned weights are dropped (set to zero; no error feedback, the
  weights they belong to are zero and stay zero); each worker packs only the unpruned gradient
  entries of all pruned tensors (``masked_select``'s elements, gathered by indices found once per
  mask) and the 1-D parameters' gradients (dense) into one preallocated contiguous fp32 buffer,
  AllReduces it (average) over the flat group, unpacks it (``masked_scatter_``'s scatter, by the
  same indices) and takes the SGD step (momentum, weight decay, as `ddp`).
  The weights are then masked again, and the momentum buffers of newly pruned weights are
  zeroed at each mask update, so neither momentum nor weight decay can revive a pruned weight.
  At density 1.0 the step equals DDP's. BatchNorm running statistics stay per rank, as in `ddp`.
- *Payload*: per step, ``4 * (sum over pruned tensors of keep_count(numel, d) + #1-D entries)``
  bytes per rank, against ``4 * #parameters`` for DDP.

Overhead: the seconds spent packing and unpacking, and computing the mask on update iterations,
are logged per step and rank in the ``overhead`` table (``pack_s``, ``unpack_s``, ``mask_s``),
apart from communication, on the device's clock (`prunex.comm.clocks`: CUDA events on a GPU, read at
the end of the step).
"""

from __future__ import annotations

from typing import Any

import torch

from prunex.comm.clocks import Span
from prunex.methods.base import Context, StepwiseMethod, grads_from_flat, load_model_state, model_state
from prunex.pruning.project import keep_count
from prunex.training.models import floating_dtype


def prune_schedule(density: float, prune_epochs: int, prune_every: int) -> dict[int, float]:
    """Mask updates as {epoch: density}: epochs 0, prune_every, ... < prune_epochs, with the density
    ramping linearly from 1 to `density` at the last update (one update at epoch 0 if prune_epochs == 0)."""
    epochs = list(range(0, prune_epochs, prune_every)) or [0]
    n = len(epochs)
    return {e: density if i == n - 1 else 1.0 - (1.0 - density) * (i + 1) / n for i, e in enumerate(epochs)}


def magnitude_mask(weight: torch.Tensor, current: torch.Tensor, density: float) -> torch.Tensor:
    """The `keep_count(numel, density)` entries of largest |weight| among those `current` keeps.

    Args:
        weight: the tensor to prune.
        current: its present boolean mask (pruned entries are never chosen while enough unpruned
            ones remain, so masks are nested).
        density: fraction of the tensor's entries to keep, in (0, 1].

    Returns:
        A boolean mask of `weight`'s shape with exactly `keep_count(numel, density)` True entries.
    """
    flat = weight.detach().reshape(-1).abs()
    if flat.dtype in (torch.float16, torch.bfloat16):
        flat = flat.float()  # rank low-precision weights in float32: fewer spurious ties
    scores = torch.where(current.reshape(-1), flat, torch.full_like(flat, -1.0))
    keep = keep_count(flat.numel(), density)
    idx = torch.topk(scores, keep, sorted=False).indices
    mask = torch.zeros(flat.numel(), dtype=torch.bool, device=weight.device)
    mask[idx] = True
    return mask.view_as(weight)


class PacTrain(StepwiseMethod):
    """Magnitude pruning + mask-aware dense-packed AllReduce; see the module docstring."""

    name = "pactrain"

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        cfg = ctx.config.pactrain
        self.schedule = prune_schedule(cfg.density, cfg.prune_epochs, cfg.prune_every)
        params = [p for p in ctx.model.parameters() if p.requires_grad]
        self.pruned = [p for p in params if p.dim() > 1]
        self.dense = [p for p in params if p.dim() <= 1]
        self.masks = [torch.ones_like(p, dtype=torch.bool) for p in self.pruned]
        self.density = 1.0
        self.mask_epoch = -1  # epoch of the last mask update (resume does not repeat it)
        self.optimizer = self.make_sgd(params)
        self._mask_spans: list[Span] = []  # mask computation since the last logged step
        self._layout()

    # -- masks ------------------------------------------------------------------------------------
    def _layout(self) -> None:
        """(Re)allocate the packed buffer for the current masks, and each mask's kept positions (flat, in
        row-major order: `masked_select`'s order), found once per mask so that a step packs and unpacks
        with gathers and scatters that never read the device (a `masked_select` waits for the device once
        per layer and step to learn its output size; issue 27)."""
        self.kept_idx = [m.reshape(-1).nonzero().squeeze(1) for m in self.masks]
        self.kept = [int(i.numel()) for i in self.kept_idx]
        self.dense_numel = sum(p.numel() for p in self.dense)
        dtype = floating_dtype(self.ctx.model)  # the gradients' (float32 unless the model is float64)
        self.buffer = torch.empty(sum(self.kept) + self.dense_numel, device=self.ctx.device, dtype=dtype)

    @torch.no_grad()
    def update_mask(self, density: float) -> None:
        """Rank 0 computes the per-layer magnitude mask at `density`; every rank receives it."""
        comm = self.ctx.comm
        span = comm.timer.start()
        flat = torch.zeros(sum(p.numel() for p in self.pruned), dtype=torch.uint8, device=self.ctx.device)
        if self.ctx.topo.rank == 0:
            pos = 0
            for p, m in zip(self.pruned, self.masks, strict=True):
                flat[pos : pos + p.numel()] = magnitude_mask(p, m, density).reshape(-1).to(torch.uint8)
                pos += p.numel()
        self._mask_spans.append(span.stop())
        comm.broadcast(flat, "flat", src=0)
        span = comm.timer.start()
        pos = 0
        for i, p in enumerate(self.pruned):
            self.masks[i] = flat[pos : pos + p.numel()].view_as(p).bool()
            pos += p.numel()
        self.density = density
        self._apply_mask(momentum=True)
        self._layout()
        self._mask_spans.append(span.stop())

    @torch.no_grad()
    def _apply_mask(self, momentum: bool = False) -> None:
        for p, m in zip(self.pruned, self.masks, strict=True):
            p.mul_(m)
            if momentum:
                buf = self.optimizer.state.get(p, {}).get("momentum_buffer")
                if buf is not None:
                    buf.mul_(m)

    def on_epoch_start(self, epoch: int) -> None:
        if epoch in self.schedule and epoch > self.mask_epoch:
            self.update_mask(self.schedule[epoch])
            self.mask_epoch = epoch

    # -- one step ---------------------------------------------------------------------------------
    @torch.no_grad()
    def _pack(self) -> None:
        buf, pos = self.buffer, 0
        for p, idx, k in zip(self.pruned, self.kept_idx, self.kept, strict=True):
            g = p.grad if p.grad is not None else torch.zeros_like(p)
            torch.index_select(g.reshape(-1), 0, idx, out=buf[pos : pos + k])  # = masked_select(g, mask)
            pos += k
        for p in self.dense:
            n = p.numel()
            if p.grad is None:
                buf[pos : pos + n].zero_()
            else:
                buf[pos : pos + n].copy_(p.grad.reshape(-1))
            pos += n

    @torch.no_grad()
    def _unpack(self) -> None:
        buf, pos = self.buffer, 0
        for p, idx, k in zip(self.pruned, self.kept_idx, self.kept, strict=True):
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            p.grad.zero_().view(-1).index_copy_(0, idx, buf[pos : pos + k])  # = masked_scatter_(mask, ...)
            pos += k
        grads_from_flat(self.dense, buf, pos)

    def step(self, x: torch.Tensor, y: torch.Tensor) -> float:
        ctx = self.ctx
        loss = self.local_backward(x, y)

        timer = ctx.comm.timer
        pack = timer.start()
        self._pack()
        pack.stop()

        ctx.comm.all_reduce(self.buffer, "flat", "avg")

        unpack = timer.start()
        self._unpack()
        unpack.stop()

        self.optimizer.step()
        self._apply_mask()
        ctx.log.append(
            "overhead",
            [
                {
                    "iteration": ctx.comm.iteration,
                    "rank": ctx.topo.rank,
                    "density": self.density,
                    "pack_s": pack.seconds,
                    "unpack_s": unpack.seconds,
                    "mask_s": sum((m.seconds for m in self._mask_spans), 0.0),
                }
            ],
        )
        self._mask_spans.clear()
        return loss.item()  # its finiteness: prunex.training.train.ranks_agree_on_failure

    # -- resume -----------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, dict[str, Any]]:
        """Replicated: parameters, optimizer, masks (rank 0's, broadcast), current density and the
        epoch of the last mask update. Per rank: BatchNorm statistics."""
        params, buffers = model_state(self.ctx.model)
        return {
            "replicated": {
                "params": params,
                "optimizer": self.optimizer.state_dict(),
                "masks": [m.clone() for m in self.masks],
                "density": self.density,
                "mask_epoch": self.mask_epoch,
            },
            "node": {},
            "rank": {"buffers": buffers},
        }

    def load_state_dict(self, state: dict[str, dict[str, Any]]) -> None:
        rep = state["replicated"]
        load_model_state(self.ctx.model, rep["params"], state["rank"]["buffers"])
        self.optimizer.load_state_dict(rep["optimizer"])
        self.masks = [m.to(self.ctx.device).bool().clone() for m in rep["masks"]]
        self.density, self.mask_epoch = rep["density"], rep["mask_epoch"]
        self._layout()
