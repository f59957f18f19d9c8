"""Hierarchical Structured ADMM: phases 2 to 5 of Alg. 1 on one rank (paper sec. 3, 4.2-4.5).

State (sec. 4.1.2): device-local `theta` (the model's parameters, updated by the caller's local
SGD, phase 1) and `u`; node consensus `z_node` (z_i) and `v`, replicated on the node's ranks;
global consensus `z`; per-layer penalties `rho_intra` (rho_1) and `rho_inter` (rho_2).

The objective this implementation solves. Eq. (6) scales the data term by 1/N, eq. (7) does
not; we follow eq. (7) (f_ij is the shard's mean loss) and the local SGD of phase 1 applies weight
decay lambda to theta, as the paper's optimizer does (sec. 5.1.5). The z_i step keeps eq. (6)'s
lambda/(2M) ||z_i||^2. At consensus theta_ij = z_i = z = x the problem is therefore

    min_x  sum_ij f_ij(x) + (N + 1) lambda / 2 ||x||^2,   x in S,

i.e. N times eq. (1) with weight decay lambda (N + 1) / N.

`HSADMM.consensus` is the round as a sequence of named steps (`prunex.admm.steps`):

1. `comm.barrier`: ranks finish local training at different times; the wait is logged apart.
2. Phase 2: `sum_theta_plus_u` over the node (intra AllReduce), then `z_node_step`, the minimiser of
   eq. (6) in z_i, z~_i = [rho_1 sum_j (theta_ij + u_ij) + rho_2 (z - v_i)] / (lambda/M + P rho_1 + rho_2)
   (eq. (9) as printed writes z_i where z belongs and drops the factor P; we implement the derivation).
3. Phase 3: `project_groups` (eq. (10)) while the mask is dynamic; after sec. 4.5's freeze (`MaskFreeze`) the
   frozen mask, on every layer at once (`mask_frozen_in_buckets`).
4. Phase 4: `sync_masks` (eq. (14)) while the mask is dynamic, then `inter_node_average` (eq. (15):
   compress, leaders' AllReduce / M, Broadcast to the node, decompress).
5. Phase 5: `dual_update` (eqs. (12)-(13)), the residuals (`HSADMMNorms`, `hsadmm_residuals`) and
   residual balancing of both penalties (`rebalance`).

Masks. Each node's projection gives group masks; the leaders' union is per group, and the global
support is the Cartesian product of the united groups, which is exactly what `compress` keeps and
`decompress` restores (`prunex.pruning.masks`); entries outside it are zero in z (Alg. 1 line 22), an
approximation of eq. (11) that the paper makes too.

Dual residual of the inter-node level: we use Boyd's rho_2 ||z^{k+1} - z^k||; sec. 3.4 prints
rho_2 (z_i^{k+1} - z^k), which is not a dual residual of the z-update.
"""

from __future__ import annotations

import torch

from prunex.admm.engine import ConsensusEngine, ConsensusResult, NormReader, flat_state
from prunex.admm.residuals import HSADMMNorms, hsadmm_residuals, rebalance
from prunex.admm.steps import (
    difference,
    dual_update,
    inter_node_average,
    mask_frozen_in_buckets,
    sum_theta_plus_u,
    sync_masks,
    z_node_step,
)
from prunex.comm import native
from prunex.comm.bucket import Bucketer
from prunex.comm.wire import WireBuckets
from prunex.pruning import GroupMask, project_groups

__all__ = ["HSADMM", "ConsensusResult"]


class HSADMM(ConsensusEngine):
    """Phases 2-5 of Alg. 1 for the parameters `theta` of one rank (arguments: `ConsensusEngine`)."""

    STATE = ("u", "v", "z_node", "z")
    PENALTIES = ("rho_intra", "rho_inter")
    ANCHOR = "z_node"  # eq. (8): rho_1 (theta - z_i + u)
    DUALS = ("u", "v")
    DUAL_OF = {"rho_intra": "u", "rho_inter": "v"}
    RESTART_FROM_Z = ("z_node",)

    def init_engine(self) -> None:
        with torch.no_grad():
            # Alg. 1 line 1: z_i from the same initialisation; v = 0 (each one flat buffer: `flat_state`)
            self.v = flat_state(self.theta, copy=False)
            self.z_node = flat_state(self.theta, copy=True)
        self.rho_inter = dict.fromkeys(self.names, self.cfg.rho_inter)
        self.node_masks: dict[str, GroupMask] = {}
        self.intra_buckets = Bucketer(self.cfg.bucket_mb, self.dtype, self.device)
        sharded = self.cfg.inter_exchange == "sharded"  # buckets padded to P equal shards
        self.inter_buckets = Bucketer(
            self.cfg.bucket_mb, self.dtype, self.device, multiple=self.topo.procs_per_node if sharded else 1
        )
        # the compact buckets' type on the wire and their way across nodes (`prunex.comm.wire`)
        self.wire = WireBuckets(self.cfg.wire_dtype, self.cfg.inter_exchange)
        if self.device.type == "cpu":  # build the CPU compress kernel now, not inside the first timed compress
            native.available()

    def total(self, rows: list[list[float]]) -> list[list[float]]:
        """The residual table summed over every rank (Alg. 1 line 28), kept off the flat group: float32,
        an AllReduce(sum) in the node, one across nodes by the leaders only, then a Broadcast in the node.

        Deliberately not the float64 flat AllReduce of `ConsensusEngine.total`: the totals only feed the
        stopping test and residual balancing (ratios against mu = 10), for which float32's 1e-7 relative
        error is immaterial, and a node's link then carries 2 (M-1)/M of a 4-byte table once instead of
        2 (N-1)/N of an 8-byte one. The logged per-rank residuals are computed before and are unchanged.
        """
        table = torch.tensor(rows, dtype=torch.float32, device=self.device)
        self.comm.all_reduce(table, "intra", "sum")
        if self.topo.is_leader:
            self.comm.all_reduce(table, "inter", "sum")
        self.comm.broadcast(table, "intra")
        return table.cpu().tolist()

    @torch.no_grad()
    def consensus(self, k: int, *, force_frozen: bool = False) -> ConsensusResult:
        """One consensus round after the local training of outer iteration `k` (0-based)."""
        topo, comm = self.topo, self.comm
        P, M = topo.procs_per_node, topo.nodes
        dynamic = self.begin_round(k, force_frozen)
        # Phase 2 (lines 6-8): intra-node AllReduce(sum) of theta + u, then the z_i step. Every step of the
        # round runs on all layers at once (multi-tensor ops: the same values as a loop over the layers, in
        # a few launches; a GPU round was launch-bound with one loop iteration per parameter, issue 27).
        # The per-parameter lists are made again each round rather than cached: the round's eight lists of 467
        # entries (ResNet-152) cost ~0.2 ms of Python on a 2-core EPYC VM (timeit, beside a CI run), and a cache
        # would go stale silently were any state tensor ever replaced instead of updated in place.
        names = self.names
        summed, node_buffers = sum_theta_plus_u(self.theta, self.u, self.buffers, self.intra_buckets, comm, "intra")
        z, v, z_node = ([state[n] for n in names] for state in (self.z, self.v, self.z_node))
        z_tilde = z_node_step(
            [summed[n] for n in names],
            rho1=[self.rho_intra[n] for n in names],
            members=P,
            lam_share=self.lam / M,
            outer=([self.rho_inter[n] for n in names], z, v),
            scratch=self.scratch,
        )
        # Phase 3 (lines 10-14): projection while the mask is dynamic, the frozen mask afterwards (line 11: in
        # place in the intra-node buckets, where z~_i lies, all layers at once).
        if dynamic:
            for i, n in enumerate(names):
                if n in self.sparsity:
                    z_tilde[i], self.node_masks[n] = project_groups(z_tilde[i], self.sparsity[n])
        else:
            mask_frozen_in_buckets(self.intra_buckets, names, self.masks)
        # each temporary is normed as it is made, in the one scratch; the norms stay on the device until one read
        norms = NormReader(len(names), self.layer_squares)
        scratch = self.flats("scratch")
        norms.add(("dz_node",), [difference(z_tilde, z_node, self.scratch)], scratch)
        torch._foreach_copy_(z_node, z_tilde)
        node_buffers = {b: t / P for b, t in node_buffers.items()}

        # Phase 4 (lines 16-22): mask sync while dynamic, then the compact inter-node average.
        drift: dict[str, int] = {}
        froze_now = False
        if dynamic:
            if self.sparsity:
                new_masks = sync_masks({n: self.node_masks[n] for n in self.sparsity}, comm)
                drift = {n: new_masks[n].drift(self.masks[n]) for n in self.sparsity}
                self.masks = new_masks
            froze_now = self.freeze.observe(k, sum(drift.values()) if self.sparsity else None)
        spans: dict[str, list] = {"compress": [], "decompress": []}  # device-clock spans, read at the end
        z_new, global_buffers = inter_node_average(
            self.z_node,
            self.v,
            self.masks,
            node_buffers,
            self.inter_buckets,
            comm,
            spans=spans,
            wire=self.wire,
            pipeline=self.cfg.pipeline_buckets,
        )

        # Phase 5 (lines 23-31): the z update, dual updates, residuals, penalty balancing.
        z_next = [z_new[n] for n in names]
        norms.add(("dz",), [difference(z_next, z, self.scratch)], scratch)
        torch._foreach_copy_(z, z_next)
        theta, u = [self.theta[n] for n in names], [self.u[n] for n in names]
        norms.add(("r_inter",), [dual_update(v, z_node, z, self.scratch)], scratch)  # eq. (13), line 23
        norms.add(("r_intra",), [dual_update(u, theta, z_node, self.scratch)], scratch)  # eq. (12), line 27
        norms.add(("theta",), *self.normable(theta))
        states = ("z_node", "u", "z", "v")
        norms.add(states, [z_node, u, z, v], self.flats(*states))
        norms = norms.read(names, HSADMMNorms)  # one device read for the round (Alg. 1 line 28)
        for b, t in global_buffers.items():
            self.buffers[b].copy_(t)

        totals = self.total([norms[n].table_row(topo.is_leader) for n in self.names])
        residuals = {
            n: hsadmm_residuals(
                row,
                numel=self.theta[n].numel(),
                rho_intra=self.rho_intra[n],
                rho_inter=self.rho_inter[n],
                nodes=M,
                procs_per_node=P,
                cfg=self.cfg,
            )
            for row, n in zip(totals, self.names, strict=True)
        }
        converged = all(a.converged and b.converged for a, b in residuals.values())
        rows = []
        for n in self.names:
            base = {"iteration": k, "rank": topo.rank, "node": topo.node, "layer": n}
            rows += norms[n].log_rows(base, self.rho_intra[n], self.rho_inter[n], topo.is_leader)
        if self.cfg.adaptive_rho:  # line 31
            rebalance(self.rho_intra, self.u, {n: r[0] for n, r in residuals.items()}, self.cfg)
            rebalance(self.rho_inter, self.v, {n: r[1] for n, r in residuals.items()}, self.cfg)
        if dynamic:
            self.grow_penalties()
        mask_rows = self.mask_rows(k, drift, self.node_masks if dynamic else None)
        overhead = {
            "iteration": k,
            "rank": topo.rank,
            "compress_s": sum((t.seconds for t in spans["compress"]), 0.0),  # leaders only
            "decompress_s": sum((t.seconds for t in spans["decompress"]), 0.0),
        }
        return ConsensusResult(converged, froze_now, rows, mask_rows, [overhead])
