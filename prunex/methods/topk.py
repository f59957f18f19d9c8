"""`topk`: Top-K gradient sparsification with error feedback, the compression baseline (paper sec. 5.1.4).

Each rank trains a plain local copy of the model (no DDP wrapper). After its backward pass, for
every parameter tensor with more than one dimension (convolution and linear weights):

1. ``acc = grad + residual`` (error feedback: what was not sent before is added back;
   Aji & Heafield 2017, "Sparse Communication for Distributed Gradient Descent", sec. 2;
   Lin et al. 2018, "Deep Gradient Compression", sec. 3.1);
2. exactly ``k = max(1, ceil(ratio * numel))`` entries of ``acc`` are selected by magnitude
   (``torch.topk``) and sent as fp32 values with int32 indices; the paper fixes the ratio at 0.01
   ("the top 1% of gradient entries by magnitude per layer", sec. 5.1.4);
3. the new residual is ``acc`` with the sent entries zeroed, so
   ``scatter(values) + new residual == grad + old residual`` exactly (`topk_compress`).

Exchange: k is a deterministic function of the layer's size and the ratio, so every rank sends
the same number of entries; all layers' values are packed into one fp32 tensor and all indices
into one int32 tensor, and each is exchanged with one AllGather over the flat group (sparse
vectors do not add up inside a ring AllReduce; Top-K implementations use AllGather, as in
Lin et al. 2018 and Shi et al. 2019). The recorded bytes therefore include the indices. The
indices are offsets into the concatenation of all sparse tensors (int32 holds the 58M entries of
ResNet-152). Every rank then adds every rank's values into a dense buffer (``index_add_``, one
call per source rank: within one rank the indices are distinct, so the result is deterministic
even where ``index_add_`` uses atomics, and identical on every rank) and divides by the world
size. Parameters with one dimension (biases, BatchNorm) are few and are sent dense, as one
AllReduce (average) of their concatenation. The SGD step (momentum, weight decay) follows, as
in `ddp`; at ratio 1.0 the step equals DDP's. BatchNorm running statistics stay per rank, as in
`ddp` (``broadcast_buffers=False``).

Overhead: the seconds spent selecting (residual add, ``topk``, residual update, packing) and
scattering (``index_add_``, unpacking) are measured apart from communication, on the device's
clock (`prunex.comm.clocks`: CUDA events on a GPU, read at the end of the step), and logged per step
and rank in the ``overhead`` table (``select_s``, ``scatter_s``).

Switches of `TopKConfig` (off by default, to match the paper's plain Top-K baseline):

- ``warmup_epochs = W > 0``: DGC's exponential warm-up of the sparsity (Lin et al. 2018,
  sec. 3.4: 75%, 93.75%, 98.4375%, 99.6% sparsity in the first four epochs): during epoch
  ``e < W`` the ratio is ``0.25 * (ratio / 0.25) ** (e / W)``, from 0.25 down towards ``ratio``;
  from epoch W on it is ``ratio`` (a ratio above 0.25 has no warm-up).
- ``momentum_correction``: DGC's momentum correction and momentum factor masking (Lin et al.
  2018, sec. 3.2 and Alg. 1 of its appendix; their reference implementation adds weight decay to
  the gradient before the momentum). For the sparse tensors each rank keeps a velocity
  ``u = m * u + (grad + wd * w)`` and accumulates ``v = v + u``; Top-K is applied to ``v`` (the
  residual of step 1 is ``v``), and both ``v`` and ``u`` are zeroed at the sent entries. The
  averaged sent velocities are applied by plain SGD without momentum or weight decay (they are
  already in ``u``). The dense 1-D parameters keep the ordinary momentum SGD. Because of the
  factor masking, at ratio 1.0 this is SGD without momentum on the sparse tensors, as in DGC.
"""

from __future__ import annotations

from typing import Any

import torch

from prunex.comm.cost import topk_count
from prunex.methods.base import Context, StepwiseMethod, grads_from_flat, load_model_state, model_state
from prunex.training.models import floating_dtype

WARMUP_START_RATIO = 0.25  # DGC's first warm-up epoch keeps 25% of the entries


def warmup_ratio(ratio: float, epoch: int, warmup_epochs: int) -> float:
    """DGC's exponential ratio warm-up (Lin et al. 2018, sec. 3.4); see the module docstring."""
    if warmup_epochs <= 0 or epoch >= warmup_epochs or ratio >= WARMUP_START_RATIO:
        return ratio
    return WARMUP_START_RATIO * (ratio / WARMUP_START_RATIO) ** (epoch / warmup_epochs)


def topk_compress(acc: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Top-K selection with error feedback (Aji & Heafield 2017; Lin et al. 2018).

    Args:
        acc: the accumulated gradient ``grad + residual`` (any shape).
        k: how many entries to send, 1 <= k <= acc.numel().

    Returns:
        (values, indices, residual): the k entries of largest magnitude of ``acc.flatten()``
        (signed, ``acc``'s dtype), their flat int32 indices, and the new residual, ``acc`` with
        those entries set to zero (same shape as ``acc``). Scattering ``values`` into zeros at
        ``indices`` and adding the residual gives back ``acc`` exactly.
    """
    flat = acc.reshape(-1)
    idx = torch.topk(flat.abs(), k, sorted=False).indices
    values = flat.index_select(0, idx)
    residual = flat.clone()
    residual.index_fill_(0, idx, 0)
    return values, idx.to(torch.int32), residual.view_as(acc)


class TopK(StepwiseMethod):
    """Top-K SGD with error feedback over the flat group; see the module docstring."""

    name = "topk"

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        cfg = ctx.config
        self.tk = cfg.topk
        model = ctx.model
        params = [p for p in model.parameters() if p.requires_grad]
        self.sparse = [p for p in params if p.dim() > 1]
        self.dense = [p for p in params if p.dim() <= 1]
        self.sparse_numel = [p.numel() for p in self.sparse]
        self.offsets = [0]
        for n in self.sparse_numel:
            self.offsets.append(self.offsets[-1] + n)
        if self.offsets[-1] >= 2**31:
            raise ValueError(f"{self.offsets[-1]} sparse entries do not fit int32 indices")
        dev = ctx.device
        self.residuals = [torch.zeros_like(p) for p in self.sparse]
        self.velocities = [torch.zeros_like(p) for p in self.sparse] if self.tk.momentum_correction else []
        self.dtype = floating_dtype(model)  # the gradients' (float32 unless the model is float64)
        self.dense_grad = torch.zeros(self.offsets[-1], device=dev, dtype=self.dtype)
        self.dense_buf = torch.zeros(sum(p.numel() for p in self.dense), device=dev, dtype=self.dtype)
        if self.tk.momentum_correction:
            groups = [
                {"params": self.sparse, "momentum": 0.0, "weight_decay": 0.0},
                {"params": self.dense},
            ]
            self.optimizer = self.make_sgd([g for g in groups if g["params"]])
        else:
            self.optimizer = self.make_sgd(params)
        self.set_ratio(warmup_ratio(self.tk.ratio, 0, self.tk.warmup_epochs))

    # -- schedule ---------------------------------------------------------------------------------
    def set_ratio(self, ratio: float) -> None:
        """Use `ratio` from now on (k per tensor, packing buffers)."""
        if getattr(self, "ratio", None) == ratio:
            return
        self.ratio = ratio
        self.ks = [topk_count(n, ratio) for n in self.sparse_numel]
        total = sum(self.ks)
        dev = self.ctx.device
        self.values_buf = torch.empty(total, device=dev, dtype=self.dtype)
        self.index_buf = torch.empty(total, device=dev, dtype=torch.int32)

    def on_epoch_start(self, epoch: int) -> None:
        self.set_ratio(warmup_ratio(self.tk.ratio, epoch, self.tk.warmup_epochs))

    # -- one step ---------------------------------------------------------------------------------
    @torch.no_grad()
    def _select(self) -> None:
        """Error feedback + Top-K of every sparse tensor, packed into the send buffers."""
        cfg = self.ctx.config
        pos = 0
        for i, p in enumerate(self.sparse):
            g = p.grad if p.grad is not None else torch.zeros_like(p)
            if self.tk.momentum_correction:
                u = self.velocities[i]
                u.mul_(cfg.momentum).add_(g).add_(p, alpha=cfg.weight_decay)
                acc = self.residuals[i].add_(u)  # v = v + u, in place
            else:
                acc = g.add(self.residuals[i])
            k = self.ks[i]
            values, idx, residual = topk_compress(acc, k)
            self.residuals[i] = residual
            if self.tk.momentum_correction:
                self.velocities[i].view(-1).index_fill_(0, idx.long(), 0)  # momentum factor masking
            self.values_buf[pos : pos + k].copy_(values)
            self.index_buf[pos : pos + k].copy_(idx).add_(self.offsets[i])
            pos += k

    @torch.no_grad()
    def _scatter(self, values: list[torch.Tensor], indices: list[torch.Tensor]) -> None:
        """Sum every rank's sparse values into dense gradients, average, write them to `.grad`."""
        dense = self.dense_grad.zero_()
        for v, i in zip(values, indices, strict=True):
            dense.index_add_(0, i.long(), v)  # distinct indices within one rank: deterministic
        dense.div_(len(values))
        for j, p in enumerate(self.sparse):
            view = dense[self.offsets[j] : self.offsets[j + 1]].view_as(p)
            if p.grad is None:
                p.grad = view.clone()
            else:
                p.grad.copy_(view)

    @torch.no_grad()
    def _dense_allreduce(self) -> None:
        if not self.dense:
            return
        comm = self.ctx.comm
        torch.cat(
            [(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in self.dense],
            out=self.dense_buf,
        )
        comm.all_reduce(self.dense_buf, "flat", "avg")
        grads_from_flat(self.dense, self.dense_buf)

    def step(self, x: torch.Tensor, y: torch.Tensor) -> float:
        ctx = self.ctx
        loss = self.local_backward(x, y)

        timer = ctx.comm.timer
        select = timer.start()
        self._select()
        select.stop()

        values = ctx.comm.all_gather(self.values_buf, "flat")
        indices = ctx.comm.all_gather(self.index_buf, "flat")

        scatter = timer.start()
        self._scatter(values, indices)
        scatter.stop()

        self._dense_allreduce()
        self.optimizer.step()
        ctx.log.append(
            "overhead",
            [
                {
                    "iteration": ctx.comm.iteration,
                    "rank": ctx.topo.rank,
                    "ratio": self.ratio,
                    "select_s": select.seconds,
                    "scatter_s": scatter.seconds,
                }
            ],
        )
        return loss.item()  # its finiteness: prunex.training.train.ranks_agree_on_failure

    # -- resume -----------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, dict[str, Any]]:
        """Replicated: parameters and optimizer (every rank adds the same gathered values in the same
        order) and the ratio. Per rank: error-feedback residuals, (momentum correction) velocities and
        BatchNorm statistics. The ratio follows the epoch and is set again by `on_epoch_start`.

        On GPUs, `index_add_` of colliding indices may round differently on different ranks; a
        resumed run then continues from rank 0's copy on every rank."""
        params, buffers = model_state(self.ctx.model)
        return {
            "replicated": {"params": params, "optimizer": self.optimizer.state_dict(), "ratio": self.ratio},
            "node": {},
            "rank": {
                "buffers": buffers,
                "residuals": [r.clone() for r in self.residuals],
                "velocities": [u.clone() for u in self.velocities],
            },
        }

    def load_state_dict(self, state: dict[str, dict[str, Any]]) -> None:
        rep, own = state["replicated"], state["rank"]
        load_model_state(self.ctx.model, rep["params"], own["buffers"])
        self.optimizer.load_state_dict(rep["optimizer"])
        for r, saved in zip(self.residuals, own["residuals"], strict=True):
            r.copy_(saved)
        for u, saved in zip(self.velocities, own["velocities"], strict=True):
            u.copy_(saved)
        self.set_ratio(rep["ratio"])
