"""Residuals, stopping tolerances and adaptive penalties (paper sec. 3.4; Boyd et al. 2011).

Shared by `hsadmm` and `flat_admm`. For a consensus constraint x = z with scaled dual y and
penalty rho, over p scalar entries (summed over all the copies that take part):

- primal residual r = ||x - z||, dual residual s = rho ||z^{k+1} - z^k|| (Boyd sec. 3.3);
- tolerances eps_pri = sqrt(p) eps_abs + eps_rel max(||x||, ||z||) and
  eps_dual = sqrt(p) eps_abs + eps_rel ||rho y|| (Boyd eq. 3.12);
- residual balancing (Boyd sec. 3.4.1): rho <- tau rho if r > mu s, rho <- rho / tau if
  s > mu r, capped at rho_max; the scaled dual is rescaled y <- y rho_old / rho_new, because the
  unscaled dual rho y must not jump when rho changes (published ADMM pruning code often forgets).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass

import torch

from prunex.config import ADMMConfig


@dataclass(frozen=True)
class LevelResidual:
    """Totals of one layer at one level, over every copy of the job."""

    primal: float  # ||r||
    dual: float  # ||s||
    eps_pri: float
    eps_dual: float

    @property
    def converged(self) -> bool:
        return self.primal <= self.eps_pri and self.dual <= self.eps_dual


def tolerances(
    *, numel: int, x_norm: float, z_norm: float, scaled_dual_norm: float, rho: float, eps_abs: float, eps_rel: float
) -> tuple[float, float]:
    """(eps_pri, eps_dual) of Boyd et al. eq. (3.12); `scaled_dual_norm` is ||y|| of the scaled dual."""
    root = math.sqrt(numel) * eps_abs
    return root + eps_rel * max(x_norm, z_norm), root + eps_rel * rho * scaled_dual_norm


def balance(rho: float, primal: float, dual: float, *, mu: float, tau: float, rho_max: float) -> float:
    """The new penalty by residual balancing (Boyd sec. 3.4.1), capped at `rho_max`."""
    if primal > mu * dual:
        return min(rho * tau, rho_max)
    if dual > mu * primal:
        return rho / tau
    return rho


def rebalance(
    rho: MutableMapping[str, float],
    scaled_dual: Mapping[str, torch.Tensor],
    residuals: Mapping[str, LevelResidual],
    cfg: ADMMConfig,
) -> None:
    """Residual balancing of every layer's penalty, rescaling its scaled dual in place."""
    for n, res in residuals.items():
        old = rho[n]
        new = balance(old, res.primal, res.dual, mu=cfg.rho_mu, tau=cfg.rho_tau, rho_max=cfg.rho_max)
        if new != old:
            scaled_dual[n].mul_(old / new)  # y <- y rho_old / rho_new keeps rho * y unchanged
            rho[n] = new
