"""Flat consensus ADMM with structured sparsity: the paper's "PruneX (AR)" ablation (Fig. 1b).

Every worker is tied directly to the global z: after local training, a dense AllReduce of
theta + u over the flat group (in the same ~32 MB buckets as hsadmm), then the z step and the
projection of the *global* z (sparsity enforced after synchronisation, as in [26, 28]), then
u += theta - z. No node level and no shrinkage: the inter-node traffic is the dense model.

Objective, matching `prunex.admm.hsadmm` (eq. (7) unscaled, SGD weight decay lambda on theta,
lambda/2 ||z||^2 in the z step):

    min_x  sum_n f_n(x) + (N + 1) lambda / 2 ||x||^2,   x in S,

so with P = 1 both methods have the same minimiser. The z step is the minimiser of
lambda/2 ||z||^2 + sum_n rho/2 ||theta_n - z + u_n||^2:
z~ = rho sum_n (theta_n + u_n) / (lambda + N rho), then z = Pi_S(z~).

Penalties, tolerances, residual balancing and mask freezing are those of hsadmm
(`prunex.admm.residuals`, `GlobalMask`); `rho_intra` is the one penalty.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch

from prunex.admm.hsadmm import ConsensusResult, GlobalMask
from prunex.admm.residuals import LevelResidual, rebalance, tolerances
from prunex.comm import Comm
from prunex.comm.bucket import Bucketer
from prunex.config import ADMMConfig
from prunex.pruning import LayerSparsity, support_mask


class FlatADMM:
    """Consensus ADMM over the flat group, with the same interface as `HSADMM`."""

    def __init__(
        self,
        theta: Mapping[str, torch.Tensor],
        buffers: Mapping[str, torch.Tensor],
        sparsity: Mapping[str, LayerSparsity],
        cfg: ADMMConfig,
        comm: Comm,
        weight_decay: float,
    ) -> None:
        self.cfg, self.comm, self.lam, self.topo = cfg, comm, weight_decay, comm.topo
        self.names = list(theta)
        self.theta, self.buffers, self.sparsity = dict(theta), dict(buffers), dict(sparsity)
        with torch.no_grad():
            self.u = {n: torch.zeros_like(t) for n, t in self.theta.items()}
            self.z = {n: t.detach().clone() for n, t in self.theta.items()}
        self.rho = dict.fromkeys(self.names, cfg.rho_intra)
        device = next(iter(self.theta.values())).device
        self.masks = {
            n: GlobalMask.full(self.theta[n].shape, device, with_shape=s.shape_keep < 1.0)
            for n, s in self.sparsity.items()
        }
        self.frozen = cfg.freeze_iteration == 0
        self.stable = 0
        self.buckets = Bucketer(cfg.bucket_mb, next(iter(self.theta.values())).dtype, device)

    def anchors(self) -> dict[str, torch.Tensor]:
        return {n: self.z[n] - self.u[n] for n in self.names}

    @property
    def rho_intra(self) -> dict[str, float]:  # the penalty of the proximal term, as in hsadmm
        return self.rho

    @torch.no_grad()
    def consensus(self, k: int, *, force_frozen: bool = False) -> ConsensusResult:
        topo, comm = self.topo, self.comm
        N = topo.world_size
        if force_frozen:
            self.frozen = True
        dynamic = not self.frozen
        bnames = list(self.buffers)
        comm.barrier("flat")  # waiting for stragglers is logged apart from the transfer (see hsadmm)
        b = self.buckets
        b.layout([self.theta[n].numel() for n in self.names] + [self.buffers[x].numel() for x in bnames])
        for i, n in enumerate(self.names):
            torch.add(self.theta[n].reshape(-1), self.u[n].reshape(-1), out=b.view(i))
        for j, x in enumerate(bnames):
            b.view(len(self.names) + j).copy_(self.buffers[x].reshape(-1))
        b.all_reduce(comm, "flat", "sum")  # dense AllReduce over every rank

        drift: dict[str, int] = {}
        sq: dict[str, list[float]] = {}
        for i, n in enumerate(self.names):
            rho = self.rho[n]
            z_new = rho * b.view(i, self.theta[n].shape) / (self.lam + N * rho)
            if n in self.sparsity:
                if dynamic:
                    sp = self.sparsity[n]
                    keep = support_mask(
                        z_new, filter_keep=sp.filter_keep, channel_keep=sp.channel_keep, shape_keep=sp.shape_keep
                    )
                    new = GlobalMask.from_support(keep, with_shape=sp.shape_keep < 1.0)
                    drift[n] = new.changed_groups(self.masks[n])
                    self.masks[n] = new
                else:
                    keep = self.masks[n].element_mask()
                z_new.mul_(keep)  # projection of the global z, after synchronisation
            dz = (z_new - self.z[n]).norm().item()
            self.z[n].copy_(z_new)
            r = self.theta[n].detach() - self.z[n]
            self.u[n].add_(r)
            sq[n] = [
                r.norm().item() ** 2,
                self.theta[n].norm().item() ** 2,
                self.u[n].norm().item() ** 2,
                self.z[n].norm().item() ** 2,
                dz**2,
            ]
        for j, x in enumerate(bnames):
            self.buffers[x].copy_(b.view(len(self.names) + j, self.buffers[x].shape) / N)

        froze_now = False
        if dynamic:
            self.stable = self.stable + 1 if sum(drift.values()) == 0 else 0
            if k + 1 >= self.cfg.freeze_iteration or (self.sparsity and self.stable >= self.cfg.freeze_patience):
                self.frozen = froze_now = True

        table = torch.tensor([sq[n][:3] for n in self.names], dtype=torch.float64, device=b.buffers[0].device)
        comm.all_reduce(table, "flat", "sum")
        residuals = {}
        for row, n in zip(table.cpu().tolist(), self.names, strict=True):
            r, th, u = (math.sqrt(max(x, 0.0)) for x in row)
            z_norm, dz = math.sqrt(N * sq[n][3]), math.sqrt(N * sq[n][4])  # z is the same on every rank
            ep, ed = tolerances(
                numel=N * self.theta[n].numel(),
                x_norm=th,
                z_norm=z_norm,
                scaled_dual_norm=u,
                rho=self.rho[n],
                eps_abs=self.cfg.eps_abs,
                eps_rel=self.cfg.eps_rel,
            )
            residuals[n] = LevelResidual(r, self.rho[n] * dz, ep, ed)
        rows = [
            {
                "iteration": k,
                "rank": topo.rank,
                "node": topo.node,
                "layer": n,
                "level": "flat",
                "primal": math.sqrt(sq[n][0]),
                "dual": self.rho[n] * math.sqrt(sq[n][4]),
                "rho": self.rho[n],
            }
            for n in self.names
        ]
        if self.cfg.adaptive_rho:
            rebalance(self.rho, self.u, residuals, self.cfg)
        mask_rows = []
        if topo.rank == 0:
            mask_rows = [
                {
                    "iteration": k,
                    "layer": n,
                    "kind": "global",
                    "node": -1,
                    "kept_out": len(g.out_idx),
                    "total_out": len(g.out_keep),
                    "kept_in": len(g.in_idx),
                    "total_in": len(g.in_keep),
                    "density": g.density(),
                    "drift": drift.get(n, 0),
                }
                for n, g in self.masks.items()
            ]
        return ConsensusResult(all(r.converged for r in residuals.values()), froze_now, rows, mask_rows)

    def state_dict(self) -> dict[str, Any]:
        return {
            "u": self.u,
            "z": self.z,
            "rho": self.rho,
            "frozen": self.frozen,
            "stable": self.stable,
            "masks": {n: g.vector() for n, g in self.masks.items()},
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for key in ("u", "z"):
            for n, t in state[key].items():
                getattr(self, key)[n].copy_(t)
        self.rho = dict(state["rho"])
        self.frozen, self.stable = state["frozen"], state["stable"]
        for n, vec in state["masks"].items():
            self.masks[n] = GlobalMask.from_vector(vec, self.theta[n].shape, self.sparsity[n].shape_keep < 1.0)
