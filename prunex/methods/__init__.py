"""Training methods by name: one file per method, one interface (`prunex.methods.base.Method`)."""

from __future__ import annotations

from prunex.methods.base import Context, IterationResult, Method
from prunex.methods.ddp import DDP

METHODS: dict[str, type[Method]] = {
    "ddp": DDP,
}

__all__ = ["METHODS", "Context", "IterationResult", "Method"]
