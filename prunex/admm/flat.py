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

The round is a sequence of the steps of `prunex.admm.steps`, shared with hsadmm: `sum_theta_plus_u`
over the flat group, `z_node_step` (its flat form), `project_groups` of the global z (once frozen,
`mask_frozen_in_buckets`), `dual_update` (u only); penalties, tolerances, residual balancing (`FlatNorms`,
`flat_residual`, `rebalance`), the mask model and mask freezing (`MaskFreeze`) are those of hsadmm; `rho_intra`
is the one penalty.
"""

from __future__ import annotations

import torch

from prunex.admm.engine import ConsensusEngine, ConsensusResult, NormReader
from prunex.admm.residuals import FlatNorms, flat_residual, rebalance
from prunex.admm.steps import (
    difference,
    dual_update,
    mask_frozen_in_buckets,
    sum_theta_plus_u,
    z_node_step,
)
from prunex.comm.bucket import Bucketer
from prunex.pruning import project_groups


class FlatADMM(ConsensusEngine):
    """Consensus ADMM over the flat group, with the same interface as `HSADMM`."""

    def init_engine(self) -> None:
        self.buckets = Bucketer(self.cfg.bucket_mb, self.dtype, self.device)

    @torch.no_grad()
    def consensus(self, k: int, *, force_frozen: bool = False) -> ConsensusResult:
        topo, comm = self.topo, self.comm
        N = topo.world_size
        dynamic = self.begin_round(k, force_frozen)
        summed, buffer_sums = sum_theta_plus_u(self.theta, self.u, self.buffers, self.buckets, comm, "flat")

        drift: dict[str, int] = {}
        names = self.names  # every step on all layers at once (multi-tensor ops, as `HSADMM.consensus`)
        z_next = z_node_step(
            [summed[n] for n in names], rho1=[self.rho_intra[n] for n in names], members=N, lam_share=self.lam
        )
        if dynamic:
            for i, n in enumerate(names):
                if n in self.sparsity:  # projection of the global z, after synchronisation
                    z_next[i], mask = project_groups(z_next[i], self.sparsity[n])
                    drift[n] = mask.drift(self.masks[n])
                    self.masks[n] = mask
        else:  # the frozen mask, in place in the buckets where z~ lies, all layers at once
            mask_frozen_in_buckets(self.buckets, names, self.masks)
        z = [self.z[n] for n in names]
        norms = NormReader(len(names), self.layer_squares)  # each temporary normed as it is made, in the one scratch
        scratch = self.flats("scratch")
        norms.add(("dz",), [difference(z_next, z, self.scratch)], scratch)
        torch._foreach_copy_(z, z_next)
        theta, u = [self.theta[n] for n in names], [self.u[n] for n in names]
        norms.add(("r",), [dual_update(u, theta, z, self.scratch)], scratch)  # u += theta - z
        norms.add(("theta",), *self.normable(theta))
        norms.add(("u", "z"), [u, z], self.flats("u", "z"))
        norms = norms.read(names, FlatNorms)  # one device-to-host read for the round
        for b, t in buffer_sums.items():
            self.buffers[b].copy_(t / N)

        froze_now = False
        if dynamic:
            froze_now = self.freeze.observe(k, sum(drift.values()) if self.sparsity else None)

        totals = self.total([norms[n].table_row() for n in self.names])
        residuals = {
            n: flat_residual(row, norms[n], numel=self.theta[n].numel(), rho=self.rho_intra[n], world=N, cfg=self.cfg)
            for row, n in zip(totals, self.names, strict=True)
        }
        rows = []
        for n in self.names:
            base = {"iteration": k, "rank": topo.rank, "node": topo.node, "layer": n}
            rows += norms[n].log_rows(base, self.rho_intra[n])
        if self.cfg.adaptive_rho:
            rebalance(self.rho_intra, self.u, residuals, self.cfg)
        if dynamic:
            self.grow_penalties()
        converged = all(r.converged for r in residuals.values())
        return ConsensusResult(converged, froze_now, rows, self.mask_rows(k, drift))
