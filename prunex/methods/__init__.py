"""Training methods by name: one file per method, one interface (`prunex.methods.base.Method`)."""

from __future__ import annotations

from prunex.methods.base import Context, IterationResult, Method
from prunex.methods.ddp import DDP
from prunex.methods.flat_admm import FlatADMMMethod
from prunex.methods.hsadmm import HSADMMMethod
from prunex.methods.pactrain import PacTrain
from prunex.methods.prune_finetune import PruneFinetune
from prunex.methods.topk import TopK

METHODS: dict[str, type[Method]] = {
    "ddp": DDP,
    "hsadmm": HSADMMMethod,
    "flat_admm": FlatADMMMethod,
    "topk": TopK,
    "pactrain": PacTrain,
    "prune_finetune": PruneFinetune,
}

__all__ = ["METHODS", "Context", "IterationResult", "Method"]
