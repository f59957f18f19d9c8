"""Mask freezing (paper sec. 4.5, Alg. 1 line 10): when the support stops being recomputed, and why.

While the mask is *dynamic*, every iteration projects (eq. (10)) and, in H-SADMM, the leaders unite
their node masks (eq. (14)). It *freezes* for one of three reasons, recorded with the iteration after
which it froze (`reason`, `at`; logged once as the run's `freeze.parquet` row):

- ``"settled"``: the global mask has not changed (drift 0) for ``freeze_patience`` consecutive
  iterations, "once topological stability is detected" (sec. 4.5);
- ``"T_freeze"``: forced after iteration T_freeze - 1 although it was still moving (``freeze_iteration``
  counts the dynamic iterations: 0..T-1, so T >= 1; `prunex.training.config.ADMMConfig` refuses 0, which would
  freeze the all-ones initial mask, i.e. never prune); T_freeze is the upper bound, not the rule;
- ``"retraining"``: forced because the outer loop ended (or converged) before either of the above, so
  that masked retraining (Alg. 1 line 11) runs on a fixed mask.

A frozen mask is applied instead of projecting, so the compact sizes, and with them the inter-node
buffers, stay fixed (one-shot allocation, sec. 4.4.2), and local training runs on the mask
(`prunex.methods.hsadmm.ADMMMethod`, masked retraining).
"""

from __future__ import annotations

from dataclasses import dataclass

REASONS = ("settled", "T_freeze", "retraining")


@dataclass
class MaskFreeze:
    """The freezing rule and its state (module docstring)."""

    freeze_iteration: int  # T_freeze
    patience: int
    frozen: bool = False
    stable: int = 0  # consecutive iterations whose global mask did not drift
    reason: str | None = None  # one of REASONS once frozen
    at: int | None = None  # the last iteration whose mask was recomputed (-1: none was)

    def force(self, k: int) -> bool:
        """Freeze before iteration ``k`` (masked retraining) unless already frozen; returns whether it froze now."""
        if self.frozen:
            return False
        self.frozen, self.reason, self.at = True, "retraining", k - 1
        return True

    def observe(self, k: int, drift: int | None) -> bool:
        """Account for iteration ``k`` (0-based) of a dynamic mask; ``drift`` is the number of groups
        whose status changed, or None where there is no mask to watch (no constrained layer).
        Returns True when the mask freezes now (from iteration k + 1 on)."""
        if self.frozen:
            return False
        if drift is not None:
            self.stable = self.stable + 1 if drift == 0 else 0
        if drift is not None and self.stable >= self.patience:
            self.frozen, self.reason, self.at = True, "settled", k
        elif k + 1 >= self.freeze_iteration:
            self.frozen, self.reason, self.at = True, "T_freeze", k
        return self.frozen

    def row(self, k: int) -> dict[str, object]:
        """The run's `freeze.parquet` row, logged in iteration ``k`` (once frozen): the last iteration whose
        mask was recomputed, why it froze, and the zero-drift streak then."""
        return {
            "iteration": k,
            "last_dynamic": self.at,
            "reason": self.reason,
            "stable": self.stable,
            "patience": self.patience,
            "freeze_iteration": self.freeze_iteration,
        }

    def state_dict(self) -> dict[str, int | bool | str | None]:
        return {"frozen": self.frozen, "stable": self.stable, "freeze_reason": self.reason, "freeze_at": self.at}

    def load_state_dict(self, state: dict) -> None:
        self.frozen, self.stable = bool(state["frozen"]), int(state["stable"])
        self.reason, self.at = state.get("freeze_reason"), state.get("freeze_at")
