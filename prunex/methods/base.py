"""The interface every training method implements, and the pieces they share.

A method owns its model copies, optimizer and communication pattern; the trainer
(`prunex.training.train`) owns the loop, evaluation, timing and logs. One *iteration* is what a method
synchronises on: an optimizer step for the SGD methods (ddp, topk, pactrain), an outer ADMM
iteration (E local epochs, then consensus) for hsadmm and flat_admm.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.utils.data import Dataset

from prunex.comm import Comm
from prunex.methods.registry import method_class
from prunex.training.config import RunConfig
from prunex.training.data import shard_loader, start_epoch
from prunex.training.log import RunLog
from prunex.training.models import floating_dtype
from prunex.training.topology import Groups, Topology


@dataclass
class Context:
    """Everything a method needs from the run; built by the trainer on every rank."""

    config: RunConfig
    topo: Topology
    groups: Groups
    comm: Comm
    device: torch.device
    model: nn.Module  # on `device`, identically initialised on every rank
    train_set: Dataset
    log: RunLog


@dataclass
class IterationResult:
    train_loss: float  # mean training loss over this iteration's mini-batches on this rank
    epoch: float  # epochs of this rank's shard completed after the iteration
    evaluate: bool  # the trainer evaluates `eval_model()` after this iteration
    extra: dict[str, Any] = field(default_factory=dict)


class Method(ABC):
    """One training method. Subclasses set `name` and have an entry in `prunex.methods.registry`."""

    name: str = ""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        cfg = ctx.config
        self.loader, self.sampler = shard_loader(
            ctx.train_set,
            rank=ctx.topo.rank,
            world_size=ctx.topo.world_size,
            batch_size=cfg.batch_size,
            seed=cfg.seed,
            num_workers=cfg.num_workers,
        )
        self.steps_per_epoch = len(self.loader)
        self.criterion = nn.CrossEntropyLoss()
        self.finished = False  # set by methods that stop early (ADMM convergence)

    @property
    @abstractmethod
    def num_iterations(self) -> int:
        """Upper bound on the iterations of the run."""

    @abstractmethod
    def train_iteration(self, k: int) -> IterationResult:
        """Run iteration `k` (0-based), including its communication, on this rank."""

    def eval_model(self) -> nn.Module:
        """The model whose test accuracy is reported (ADMM: the consensus z)."""
        return self.ctx.model

    def state_dict(self) -> dict[str, dict[str, Any]]:
        """What resuming needs, by owner (`prunex.training.checkpoint` writes each part once):

        - `replicated`: identical on every rank (rank 0 writes it);
        - `node`: identical on the ranks of a node (the node's leader writes it);
        - `rank`: this rank's own.

        Here: the parameters are replicated, the buffers (BatchNorm statistics: DDP does not
        broadcast them) are each rank's. Methods extend this with optimizer, duals, masks, residuals.
        """
        params, buffers = model_state(self.ctx.model)
        return {"replicated": {"params": params}, "node": {}, "rank": {"buffers": buffers}}

    def load_state_dict(self, state: dict[str, dict[str, Any]]) -> None:
        load_model_state(self.ctx.model, state["replicated"]["params"], state["rank"]["buffers"])

    # -- shared helpers ---------------------------------------------------------------------------
    def batches(self, epoch: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """This rank's mini-batches of one epoch, on the device."""
        # the shuffle and the loader workers' seeds of this epoch
        start_epoch(self.loader, self.sampler, epoch, seed=self.ctx.config.seed, rank=self.ctx.topo.rank)
        dev, dtype = self.ctx.device, floating_dtype(self.ctx.model)  # float32 images: a no-op unless float64
        for x, y in self.loader:
            yield x.to(dev, dtype, non_blocking=True), y.to(dev, non_blocking=True)

    def make_sgd(self, params: Any) -> torch.optim.SGD:
        cfg = self.ctx.config
        return torch.optim.SGD(params, lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)


class StepwiseMethod(Method):
    """Base of the methods whose iteration is one optimizer step (ddp, topk, pactrain).

    Subclasses implement `step(x, y) -> loss`; epochs, evaluation points and the data iterator
    live here.
    """

    optimizer: torch.optim.Optimizer  # made by the subclass (make_sgd)

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self._epoch = -1
        self._iter: Iterator | None = None

    @property
    def num_iterations(self) -> int:
        return self.ctx.config.epochs * self.steps_per_epoch

    @abstractmethod
    def step(self, x: torch.Tensor, y: torch.Tensor) -> float:
        """Forward, backward, communicate, update; returns the mini-batch loss."""

    def train_iteration(self, k: int) -> IterationResult:
        epoch, pos = divmod(k, self.steps_per_epoch)
        if epoch != self._epoch:
            self._epoch, self._iter = epoch, self.batches(epoch)
            self.on_epoch_start(epoch)
        x, y = next(self._iter)
        loss = self.step(x, y)
        done = epoch + (pos + 1) / self.steps_per_epoch
        epoch_end = pos + 1 == self.steps_per_epoch
        evaluate = epoch_end and ((epoch + 1) % self.ctx.config.eval_every == 0 or k + 1 == self.num_iterations)
        return IterationResult(train_loss=loss, epoch=done, evaluate=evaluate)

    def on_epoch_start(self, epoch: int) -> None:
        """Hook for schedules (pruning, Top-K warm-up)."""

    def local_backward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Forward and backward of the mini-batch on this rank's model, for the methods that then exchange
        its gradients themselves (topk, pactrain); returns the loss. Gradients are zeroed, not freed: the
        methods pack them into buffers of fixed layout."""
        model = self.ctx.model
        model.train()
        self.optimizer.zero_grad(set_to_none=False)
        loss = self.criterion(model(x), y)
        loss.backward()
        return loss


@torch.no_grad()
def grads_from_flat(params: Iterable[nn.Parameter], flat: torch.Tensor, pos: int = 0) -> int:
    """Write consecutive slices of `flat`, from `pos` on, into the gradients of `params` (a missing gradient
    is allocated as zeros first); returns the position after the last slice. The unpacking after a
    flat buffer's AllReduce (Top-K's dense layers, PacTrain's)."""
    for p in params:
        n = p.numel()
        if p.grad is None:
            p.grad = torch.zeros_like(p)
        p.grad.copy_(flat[pos : pos + n].view_as(p))
        pos += n
    return pos


def model_state(model: nn.Module) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """The model's state_dict split into (parameters, buffers)."""
    names = {n for n, _ in model.named_parameters()}
    sd = model.state_dict()
    return {k: v for k, v in sd.items() if k in names}, {k: v for k, v in sd.items() if k not in names}


def load_model_state(model: nn.Module, params: dict[str, torch.Tensor], buffers: dict[str, torch.Tensor]) -> None:
    model.load_state_dict({**params, **buffers})


def build_method(
    config: RunConfig,
    topo: Topology,
    groups: Groups,
    device: torch.device,
    model: nn.Module,
    train_set: Dataset,
    log_dir: str,
) -> Method:
    """The method ``config.method`` on this rank, outside the trainer: its instrumented communication over
    ``groups`` (with ``config.link``), its context and its logs in ``log_dir``, as `prunex.training.train`
    builds them (which makes its `Comm` and `RunLog` itself, earlier: it uses them before the method). For
    scripts, benchmarks and tests that drive a method's iterations and consensus rounds themselves."""
    comm = Comm(topo, groups, device, config.link)
    ctx = Context(config, topo, groups, comm, device, model, train_set, RunLog(log_dir, topo.rank))
    return method_class(config.method)(ctx)
