"""Mask freezing (paper sec. 4.5, Alg. 1 line 10): when the support stops being recomputed.

While the mask is *dynamic*, every iteration projects (eq. (10)) and, in H-SADMM, the leaders unite
their node masks (eq. (14)). It *freezes* after iteration T_freeze - 1 (``freeze_iteration`` counts
the dynamic iterations: 0..T-1, so T >= 1; `prunex.config.ADMMConfig` refuses 0, which would freeze the
all-ones initial mask, i.e. never prune), or earlier once the global mask has not changed for
``freeze_patience`` consecutive iterations, and for the masked retraining iterations (Alg. 1 line 11).
A frozen mask is applied instead of projecting, so the compact sizes, and with them the inter-node
buffers, stay fixed (one-shot allocation, sec. 4.4.2).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class MaskFreeze:
    """The freezing rule and its state (module docstring)."""

    freeze_iteration: int  # T_freeze
    patience: int
    frozen: bool = False
    stable: int = 0  # consecutive iterations whose global mask did not drift

    def force(self) -> None:
        """Freeze now (masked retraining)."""
        self.frozen = True

    def observe(self, k: int, drift: int | None) -> bool:
        """Account for iteration ``k`` (0-based) of a dynamic mask; ``drift`` is the number of groups
        whose status changed, or None where there is no mask to watch (no constrained layer).
        Returns True when the mask freezes now (from iteration k + 1 on)."""
        if self.frozen:
            return False
        if drift is not None:
            self.stable = self.stable + 1 if drift == 0 else 0
        if k + 1 >= self.freeze_iteration or (drift is not None and self.stable >= self.patience):
            self.frozen = True
            return True
        return False

    def state_dict(self) -> dict[str, int | bool]:
        return {"frozen": self.frozen, "stable": self.stable}

    def load_state_dict(self, state: dict) -> None:
        self.frozen, self.stable = bool(state["frozen"]), int(state["stable"])
