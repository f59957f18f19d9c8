"""Residuals, stopping tolerances and adaptive penalties (paper sec. 3.4; Boyd et al. 2011).

For a consensus constraint x = z with scaled dual y and penalty rho, over p scalar entries (summed
over all the copies that take part):

- primal residual r = ||x - z||, dual residual s = rho ||z^{k+1} - z^k|| (Boyd sec. 3.3);
- tolerances eps_pri = sqrt(p) eps_abs + eps_rel max(||x||, ||z||) and
  eps_dual = sqrt(p) eps_abs + eps_rel ||rho y|| (Boyd eq. 3.12);
- residual balancing (Boyd sec. 3.4.1): rho <- tau rho if r > mu s, rho <- rho / tau if
  s > mu r, capped at rho_max; the scaled dual is rescaled y <- y rho_old / rho_new, because the
  unscaled dual rho y must not jump when rho changes (published ADMM pruning code often forgets).

Each engine's per-layer norms are a named dataclass (`HSADMMNorms`, `FlatNorms`) whose fields are the
columns of the residual table totalled by one small flat AllReduce (Alg. 1 line 28); the residuals of
each level follow from the totals (`hsadmm_residuals`, `flat_residual`, both by `level_residual`).
Torch-free: the performance model reads the table's size from here.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, NamedTuple

from prunex.training.config import ADMMConfig

if TYPE_CHECKING:
    import torch


class LevelResidual(NamedTuple):
    """Totals of one layer at one level, over every copy of the job. A named tuple, not a frozen dataclass:
    a round makes two per layer (934 for ResNet-152), and a frozen dataclass's construction was most of
    `hsadmm_residuals`' host time (issue 27)."""

    primal: float  # ||r||
    dual: float  # ||s||
    eps_pri: float
    eps_dual: float

    @property
    def converged(self) -> bool:
        return self.primal <= self.eps_pri and self.dual <= self.eps_dual


def level_residual(
    primal: float,
    dual: float,
    numel: int,
    x_norm: float,
    z_norm: float,
    scaled_dual_norm: float,
    rho: float,
    cfg: ADMMConfig,
) -> LevelResidual:
    """A level's residuals with their stopping tolerances over ``numel`` stacked entries (Boyd eq. 3.12):
    eps_pri = sqrt(p) eps_abs + eps_rel max(||x||, ||z||), eps_dual = sqrt(p) eps_abs + eps_rel ||rho y||,
    ``scaled_dual_norm`` being ||y|| of the scaled dual."""
    root = math.sqrt(numel) * cfg.eps_abs
    eps_pri = root + cfg.eps_rel * max(x_norm, z_norm)
    return LevelResidual(primal, dual, eps_pri, root + cfg.eps_rel * rho * scaled_dual_norm)


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
    """Residual balancing of every layer's penalty, rescaling its scaled dual in place (one multi-tensor
    op for the layers whose penalty changed)."""
    duals, factors = [], []
    for n, res in residuals.items():
        old = rho[n]
        new = balance(old, res.primal, res.dual, mu=cfg.rho_mu, tau=cfg.rho_tau, rho_max=cfg.rho_max)
        if new != old:
            duals.append(scaled_dual[n])
            factors.append(old / new)  # y <- y rho_old / rho_new keeps rho * y unchanged
            rho[n] = new
    if duals:
        import torch  # here only: the residual table and its columns import without torch (prunex.methods.registry)

        torch._foreach_mul_(duals, factors)


# -------------------------------------------------------------------------- H-SADMM (two levels)
@dataclass
class HSADMMNorms:
    """Squared norms of one layer on one rank after an H-SADMM iteration (Alg. 1 line 28).

    Intra-node level, every rank: ``r_intra`` = ||theta_ij - z_i||^2 (eq. (12)'s residual), ``theta``,
    ``z_node`` (z_i), ``u``; ``dz_node`` = ||z_i^{k+1} - z_i^k||^2 (its dual residual).
    Inter-node level, replicated on a node's ranks and so counted on the leaders: ``r_inter`` =
    ||z_i - z||^2 (eq. (13)'s residual), ``z``, ``v``, ``dz`` = ||z^{k+1} - z^k||^2.
    """

    r_intra: float
    theta: float
    z_node: float
    u: float
    r_inter: float
    z: float
    v: float
    dz_node: float
    dz: float

    def table_row(self, leader: bool) -> list[float]:
        """This rank's row of the residual table that one flat AllReduce(sum) totals: the intra-level
        columns from every rank, the inter-level ones (from ``r_inter`` on) from the leaders only."""
        lead = 1.0 if leader else 0.0
        values = _table_values(self)  # one attrgetter (astuple deep-copies: ~20 ms for 467 layers)
        return [*values[:INTRA_COLUMNS], *(lead * x for x in values[INTRA_COLUMNS:])]

    def log_rows(self, base: dict[str, Any], rho_intra: float, rho_inter: float, leader: bool) -> list[dict]:
        """``residuals.parquet`` rows of this rank: the intra level, and the inter level on leaders."""
        rows = [
            base
            | {
                "level": "intra",
                "primal": math.sqrt(self.r_intra),
                "dual": rho_intra * math.sqrt(self.dz_node),
                "rho": rho_intra,
            }
        ]
        if leader:
            rows.append(
                base
                | {
                    "level": "inter",
                    "primal": math.sqrt(self.r_inter),
                    "dual": rho_inter * math.sqrt(self.dz),
                    "rho": rho_inter,
                }
            )
        return rows


HSADMM_TABLE_COLUMNS = tuple(f.name for f in fields(HSADMMNorms))
_table_values = operator.attrgetter(*HSADMM_TABLE_COLUMNS)
INTRA_COLUMNS = 4  # r_intra, theta, z_node, u: summed over every rank


def hsadmm_residuals(
    totals: list[float],
    *,
    numel: int,
    rho_intra: float,
    rho_inter: float,
    nodes: int,
    procs_per_node: int,
    cfg: ADMMConfig,
) -> tuple[LevelResidual, LevelResidual]:
    """(intra, inter) residuals of one layer from its row of the totalled residual table.

    Intra level: the N copies theta_ij stacked against their z_i; its dual residual
    rho_1 sqrt(P) ||z_i^{k+1} - z_i^k|| summed over nodes (each z_i stands for P copies).
    Inter level: the M copies z_i stacked against z; dual residual rho_2 ||z^{k+1} - z^k|| (Boyd's, not
    sec. 3.4's rho_2 (z_i^{k+1} - z^k), which is not a dual residual of the z-update).
    """
    r_in, th, zi, u, r_x, z, v, dzi, dz = [math.sqrt(max(x, 0.0)) for x in totals]
    P, M = procs_per_node, nodes
    # stacked over the N copies: ||z|| of the intra level is sqrt(sum over ranks ||z_i||^2) = zi
    intra = level_residual(r_in, rho_intra * math.sqrt(P) * dzi, M * P * numel, th, zi, u, rho_intra, cfg)
    # stacked over the M nodes: the leaders' sums count every node once
    return intra, level_residual(r_x, rho_inter * dz, M * numel, zi / math.sqrt(P), z, v, rho_inter, cfg)


# ------------------------------------------------------------------------------- flat consensus
@dataclass
class FlatNorms:
    """Squared norms of one layer on one rank after a flat consensus iteration: ``r`` = ||theta_n - z||^2,
    ``theta``, ``u`` (summed over ranks), ``z`` and ``dz`` = ||z^{k+1} - z^k||^2 (the same on every rank)."""

    r: float
    theta: float
    u: float
    z: float
    dz: float

    def table_row(self) -> list[float]:
        """This rank's row of the residual table (the columns that differ between ranks)."""
        return [self.r, self.theta, self.u]

    def log_rows(self, base: dict[str, Any], rho: float) -> list[dict]:
        return [base | {"level": "flat", "primal": math.sqrt(self.r), "dual": rho * math.sqrt(self.dz), "rho": rho}]


FLAT_TABLE_COLUMNS = ("r", "theta", "u")


def flat_residual(
    totals: list[float], norms: FlatNorms, *, numel: int, rho: float, world: int, cfg: ADMMConfig
) -> LevelResidual:
    """The residual of one layer from its totalled row (N copies theta_n stacked against z)."""
    r, th, u = (math.sqrt(max(x, 0.0)) for x in totals)
    z_norm, dz = math.sqrt(world * norms.z), math.sqrt(world * norms.dz)  # z is the same on every rank
    return level_residual(r, rho * dz, world * numel, th, z_norm, u, rho, cfg)
