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

The z_i step is the minimiser of the augmented Lagrangian eq. (6) in z_i:

    z~_i = [rho_1 sum_j (theta_ij + u_ij) + rho_2 (z - v_i)] / (lambda / M + P rho_1 + rho_2).

Eq. (9) as printed writes z_i where z belongs and drops the factor P of the P intra-node terms;
we implement the derivation.

Masks. Each node's projection gives group masks (kept filters, kept input channels, and kept
shape positions for shape sparsity); leaders take their union with one uint8 AllReduce-MAX
(eq. (14)). The global support is the Cartesian product of the united groups, which is exactly
what `compress` keeps (eq. (15)) and `decompress` restores (sec. 4.4.3); entries outside it are
zero in z (Alg. 1 line 22), an approximation of eq. (11) that the paper makes too.

Dual residual of the inter-node level: we use Boyd's rho_2 ||z^{k+1} - z^k||; sec. 3.4 prints
rho_2 (z_i^{k+1} - z^k), which is not a dual residual of the z-update.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from prunex.admm.residuals import LevelResidual, rebalance, tolerances
from prunex.comm import Comm, compress, decompress
from prunex.comm.bucket import Bucketer
from prunex.config import ADMMConfig
from prunex.pruning import LayerSparsity, group_mask_from_mask, support_mask


@dataclass
class ConsensusResult:
    converged: bool
    frozen: bool  # the mask was frozen during this iteration
    residual_rows: list[dict] = field(default_factory=list)
    mask_rows: list[dict] = field(default_factory=list)
    overhead_rows: list[dict] = field(default_factory=list)  # compress/decompress seconds (H-SADMM)


def _indicator(idx: torch.Tensor, n: int) -> torch.Tensor:
    out = torch.zeros(n, dtype=torch.uint8, device=idx.device)
    out[idx] = 1
    return out


class GlobalMask:
    """The cluster-wide support of a constrained layer: united filters, channels (and shapes)."""

    def __init__(self, out_keep: torch.Tensor, in_keep: torch.Tensor, shape_keep: torch.Tensor | None, ndim: int):
        self.out_keep, self.in_keep = out_keep.bool(), in_keep.bool()
        self.shape_keep = shape_keep.bool() if shape_keep is not None else None
        self.ndim = ndim
        self.out_idx = torch.nonzero(self.out_keep).flatten()
        self.in_idx = torch.nonzero(self.in_keep).flatten()

    @classmethod
    def from_support(cls, keep: torch.Tensor, with_shape: bool) -> GlobalMask:
        """Group masks of a projected support (sec. 4.4.1: `any` over the other dimensions)."""
        g = group_mask_from_mask(keep)
        out_keep = torch.zeros(keep.shape[0], dtype=torch.bool, device=keep.device).index_fill_(0, g.out_idx, True)
        in_keep = torch.zeros(keep.shape[1], dtype=torch.bool, device=keep.device).index_fill_(0, g.in_idx, True)
        return cls(out_keep, in_keep, keep.any(dim=0) if with_shape else None, keep.dim())

    @classmethod
    def from_vector(cls, vec: torch.Tensor, shape: torch.Size, with_shape: bool) -> GlobalMask:
        """Inverse of `vector()`."""
        o, i = vec[: shape[0]], vec[shape[0] : shape[0] + shape[1]]
        s = vec[shape[0] + shape[1] :].reshape(shape[1:]) if with_shape else None
        return cls(o, i, s, len(shape))

    def numel_vector(self) -> int:
        return len(self.out_keep) + len(self.in_keep) + (self.shape_keep.numel() if self.shape_keep is not None else 0)

    @classmethod
    def full(cls, shape: torch.Size, device: torch.device, with_shape: bool) -> GlobalMask:
        def ones(*dims: int) -> torch.Tensor:
            return torch.ones(*dims, dtype=torch.bool, device=device)

        return cls(ones(shape[0]), ones(shape[1]), ones(*shape[1:]) if with_shape else None, len(shape))

    def element_mask(self) -> torch.Tensor:
        """Boolean mask broadcastable to the weight: K_out x K_in (x kept shape positions)."""
        m = self.out_keep[:, None] & self.in_keep[None, :]
        m = m.reshape(m.shape + (1,) * (self.ndim - 2))
        return m & self.shape_keep[None] if self.shape_keep is not None else m

    def density(self) -> float:
        """Fraction of the weight's entries inside the support (the mask broadcasts over kernels)."""
        return self.element_mask().float().mean().item()

    def vector(self) -> torch.Tensor:
        parts = [self.out_keep, self.in_keep] + ([self.shape_keep.flatten()] if self.shape_keep is not None else [])
        return torch.cat([p.to(torch.uint8) for p in parts])

    def changed_groups(self, other: GlobalMask) -> int:
        n = int((self.out_keep != other.out_keep).sum() + (self.in_keep != other.in_keep).sum())
        if self.shape_keep is not None and other.shape_keep is not None:
            n += int((self.shape_keep != other.shape_keep).sum())
        return n


class HSADMM:
    """Phases 2-5 of Alg. 1 for the parameters `theta` of one rank.

    Args:
        theta: name -> parameter tensor of the local model (updated in place by the caller).
        buffers: name -> floating-point buffer (BatchNorm statistics), averaged over all ranks at
            every consensus so that the consensus model evaluates correctly.
        sparsity: name -> structured constraint of the constrained layers (`constrained_layers`).
        cfg: ADMM options.
        comm: the rank's instrumented communication.
        weight_decay: lambda of eq. (1), used in the z_i step (and by the caller's SGD).
    """

    def __init__(
        self,
        theta: Mapping[str, torch.Tensor],
        buffers: Mapping[str, torch.Tensor],
        sparsity: Mapping[str, LayerSparsity],
        cfg: ADMMConfig,
        comm: Comm,
        weight_decay: float,
    ) -> None:
        self.cfg, self.comm, self.lam = cfg, comm, weight_decay
        self.topo = comm.topo
        self.names = list(theta)
        self.theta = dict(theta)
        self.buffers = dict(buffers)
        self.sparsity = dict(sparsity)
        unknown = set(self.sparsity) - set(self.names)
        if unknown:
            raise ValueError(f"constrained layers that are not parameters: {sorted(unknown)}")
        with torch.no_grad():
            # Alg. 1 line 1: theta, z_i, z from the same initialisation; u, v = 0; m_global = 1.
            self.u = {n: torch.zeros_like(t) for n, t in self.theta.items()}
            self.v = {n: torch.zeros_like(t) for n, t in self.theta.items()}
            self.z_node = {n: t.detach().clone() for n, t in self.theta.items()}
            self.z = {n: t.detach().clone() for n, t in self.theta.items()}
        self.rho_intra = dict.fromkeys(self.names, cfg.rho_intra)
        self.rho_inter = dict.fromkeys(self.names, cfg.rho_inter)
        device = next(iter(self.theta.values())).device
        self.masks = {
            n: GlobalMask.full(self.theta[n].shape, device, with_shape=s.shape_keep < 1.0)
            for n, s in self.sparsity.items()
        }
        self.node_masks: dict[str, GlobalMask] = {}
        self.frozen = cfg.freeze_iteration == 0
        self.stable = 0  # consecutive iterations without mask drift
        dtype = next(iter(self.theta.values())).dtype
        self.intra_buckets = Bucketer(cfg.bucket_mb, dtype, device)
        self.inter_buckets = Bucketer(cfg.bucket_mb, dtype, device)

    # -- phase 1 support --------------------------------------------------------------------------
    def anchors(self) -> dict[str, torch.Tensor]:
        """z_i - u_ij per parameter: the proximal term of eq. (8) is rho_1 (theta - anchor)."""
        return {n: self.z_node[n] - self.u[n] for n in self.names}

    # -- phases 2 to 5 ----------------------------------------------------------------------------
    @torch.no_grad()
    def consensus(self, k: int, *, force_frozen: bool = False) -> ConsensusResult:
        """One consensus round after the local training of outer iteration `k` (0-based)."""
        topo, comm = self.topo, self.comm
        P, M = topo.procs_per_node, topo.nodes
        if force_frozen:
            self.frozen = True
        dynamic = not self.frozen
        bnames = list(self.buffers)

        # Ranks finish local training at different times: wait for all of them here, so the
        # collectives below are timed as transfers (the wait is logged as a `barrier`).
        comm.barrier("flat")
        # Phase 2 (Alg. 1 lines 6-8): intra-node AllReduce(sum) of theta + u, then the z_i step.
        ib = self.intra_buckets
        ib.layout([self.theta[n].numel() for n in self.names] + [self.buffers[b].numel() for b in bnames])
        for i, n in enumerate(self.names):
            torch.add(self.theta[n].reshape(-1), self.u[n].reshape(-1), out=ib.view(i))
        for j, b in enumerate(bnames):
            ib.view(len(self.names) + j).copy_(self.buffers[b].reshape(-1))
        ib.all_reduce(comm, "intra", "sum")

        sq: dict[str, list[float]] = {}  # per layer: squared norms for the residuals (line 28)
        for i, n in enumerate(self.names):
            r1, r2 = self.rho_intra[n], self.rho_inter[n]
            s = ib.view(i, self.theta[n].shape)
            z_tilde = (r1 * s + r2 * (self.z[n] - self.v[n])) / (self.lam / M + P * r1 + r2)
            # Phase 3 (lines 10-14): projection while the mask is dynamic, frozen mask afterwards.
            if n in self.sparsity:
                if dynamic:
                    sp = self.sparsity[n]
                    keep = support_mask(
                        z_tilde, filter_keep=sp.filter_keep, channel_keep=sp.channel_keep, shape_keep=sp.shape_keep
                    )
                    self.node_masks[n] = GlobalMask.from_support(keep, with_shape=sp.shape_keep < 1.0)
                else:
                    keep = self.masks[n].element_mask()
                z_tilde.mul_(keep)
            d_node = (z_tilde - self.z_node[n]).norm().item()
            self.z_node[n].copy_(z_tilde)
            sq[n] = [d_node**2]
        node_buffers = {b: ib.view(len(self.names) + j, self.buffers[b].shape) / P for j, b in enumerate(bnames)}

        # Phase 4 (lines 16-22): mask sync, shrinkage, bucketed inter-node AllReduce, recovery.
        drift_by_layer: dict[str, int] = {}
        froze_now = False
        if dynamic and self.sparsity:
            vec = torch.cat([self.node_masks[n].vector() for n in self.sparsity])
            if topo.is_leader:
                comm.mask_sync(vec, "inter")  # eq. (14): union = MAX on {0, 1}
            comm.broadcast(vec, "intra")  # followers need the global index sets (line 25)
            new_masks = self._parse_vector(vec)
            drift_by_layer = {n: new_masks[n].changed_groups(self.masks[n]) for n in self.sparsity}
            self.masks = new_masks
            self.stable = self.stable + 1 if sum(drift_by_layer.values()) == 0 else 0
            if k + 1 >= self.cfg.freeze_iteration or self.stable >= self.cfg.freeze_patience:
                self.frozen = froze_now = True  # sec. 4.5: from the next iteration on
        elif dynamic and k + 1 >= self.cfg.freeze_iteration:
            self.frozen = froze_now = True

        compact_shapes = []
        for n in self.names:
            if n in self.sparsity:
                g = self.masks[n]
                compact_shapes.append((len(g.out_idx), len(g.in_idx), *self.theta[n].shape[2:]))
            else:
                compact_shapes.append(tuple(self.theta[n].shape))
        sizes = [math.prod(s) for s in compact_shapes] + [self.buffers[b].numel() for b in bnames]
        xb = self.inter_buckets
        xb.layout(sizes)  # one-shot: no reallocation once the compact sizes stop changing
        compress_span = decompress_spans = None  # device-clock spans (prunex.timing), read at the end
        if topo.is_leader:
            compress_span = comm.timer.start()
            for i, n in enumerate(self.names):
                c = self.z_node[n] + self.v[n]  # line 19: c = z_i + v_i
                if n in self.sparsity:
                    g = self.masks[n]
                    compress(c, g.out_idx, g.in_idx, out=xb.view(i, compact_shapes[i]))  # line 20, eq. (15)
                else:
                    xb.view(i).copy_(c.reshape(-1))  # dense in the same buckets
            for j, b in enumerate(bnames):
                xb.view(len(self.names) + j).copy_(node_buffers[b].reshape(-1))
            compress_span.stop()
            xb.all_reduce(comm, "inter", "avg")  # line 21: AllReduce on the compact buffers, / M
        xb.broadcast(comm, "intra")  # line 25: the compact z to the node's workers

        decompress_spans = []
        for i, n in enumerate(self.names):
            view = xb.view(i, compact_shapes[i])
            if n in self.sparsity:
                g = self.masks[n]
                span = comm.timer.start()
                z_new = decompress(view, g.out_idx, g.in_idx, self.theta[n].shape)  # line 22
                decompress_spans.append(span.stop())
            else:
                z_new = view.reshape(self.theta[n].shape)
            d_global = (z_new - self.z[n]).norm().item()
            self.z[n].copy_(z_new)
            # line 23: v_i += z_i - z (eq. 13), on every rank of the node (replicated state)
            r_inter = self.z_node[n] - self.z[n]
            self.v[n].add_(r_inter)
            # line 27: u_ij += theta_ij - z_i (eq. 12)
            r_intra = self.theta[n].detach() - self.z_node[n]
            self.u[n].add_(r_intra)
            sq[n] += [
                r_intra.norm().item() ** 2,
                self.theta[n].norm().item() ** 2,
                self.z_node[n].norm().item() ** 2,
                self.u[n].norm().item() ** 2,
                r_inter.norm().item() ** 2,
                self.z[n].norm().item() ** 2,
                self.v[n].norm().item() ** 2,
                d_global**2,
            ]
        for j, b in enumerate(bnames):
            self.buffers[b].copy_(xb.view(len(self.names) + j, self.buffers[b].shape))

        residuals = self._residuals(sq)
        converged = all(a.converged and b.converged for a, b in residuals.values())
        rows = self._residual_rows(k, sq)
        if self.cfg.adaptive_rho:
            self._balance(residuals)  # line 31
        overhead = {
            "iteration": k,
            "rank": topo.rank,
            "compress_s": compress_span.seconds if compress_span is not None else 0.0,  # leaders only
            "decompress_s": sum((d.seconds for d in decompress_spans), 0.0),
        }
        return ConsensusResult(converged, froze_now, rows, self._mask_rows(k, drift_by_layer, dynamic), [overhead])

    # -- helpers ----------------------------------------------------------------------------------
    def _parse_vector(self, vec: torch.Tensor) -> dict[str, GlobalMask]:
        out, pos = {}, 0
        for n, sp in self.sparsity.items():
            g = self.masks[n]
            size = g.numel_vector()
            out[n] = GlobalMask.from_vector(vec[pos : pos + size], self.theta[n].shape, sp.shape_keep < 1.0)
            pos += size
        return out

    def _residuals(self, sq: dict[str, list[float]]) -> dict[str, tuple[LevelResidual, LevelResidual]]:
        """Global residual totals per layer: one small flat AllReduce (Alg. 1 line 28)."""
        topo = self.topo
        leader = 1.0 if topo.is_leader else 0.0
        # columns: intra r^2, theta^2, z_i^2, u^2 (every rank); inter r^2, z^2, v^2, dz_i^2, dz^2 (leaders)
        table = torch.tensor(
            [
                [q[1], q[2], q[3], q[4], leader * q[5], leader * q[6], leader * q[7], leader * q[0], leader * q[8]]
                for q in (sq[n] for n in self.names)
            ],
            dtype=torch.float64,
        )
        dev = next(iter(self.theta.values())).device
        table = table.to(dev)
        self.comm.all_reduce(table, "flat", "sum")
        table = table.cpu()
        out = {}
        cfg = self.cfg
        N, M = topo.world_size, topo.nodes
        for row, n in zip(table.tolist(), self.names, strict=True):
            r_in, th, zi, u, r_x, z, v, dzi, dz = (math.sqrt(max(x, 0.0)) for x in row)
            numel = self.theta[n].numel()
            r1, r2 = self.rho_intra[n], self.rho_inter[n]
            # dz_i is replicated on the node's P ranks: the leaders' sum counts each node once
            # stacked over the N copies: ||z|| of the intra level is sqrt(sum over ranks ||z_i||^2) = zi
            ep, ed = tolerances(
                numel=N * numel,
                x_norm=th,
                z_norm=zi,
                scaled_dual_norm=u,
                rho=r1,
                eps_abs=cfg.eps_abs,
                eps_rel=cfg.eps_rel,
            )
            intra = LevelResidual(r_in, r1 * math.sqrt(topo.procs_per_node) * dzi, ep, ed)
            # stacked over the M nodes: the leaders' sums count every node once
            ep, ed = tolerances(
                numel=M * numel,
                x_norm=zi / math.sqrt(topo.procs_per_node),
                z_norm=z,
                scaled_dual_norm=v,
                rho=r2,
                eps_abs=cfg.eps_abs,
                eps_rel=cfg.eps_rel,
            )
            inter = LevelResidual(r_x, r2 * dz, ep, ed)
            out[n] = (intra, inter)
        return out

    def _residual_rows(self, k: int, sq: dict[str, list[float]]) -> list[dict]:
        topo = self.topo
        rows = []
        for n in self.names:
            q = sq[n]
            base = {"iteration": k, "rank": topo.rank, "node": topo.node, "layer": n}
            rows.append(
                base
                | {
                    "level": "intra",
                    "primal": math.sqrt(q[1]),
                    "dual": self.rho_intra[n] * math.sqrt(q[0]),
                    "rho": self.rho_intra[n],
                }
            )
            if topo.is_leader:
                rows.append(
                    base
                    | {
                        "level": "inter",
                        "primal": math.sqrt(q[5]),
                        "dual": self.rho_inter[n] * math.sqrt(q[8]),
                        "rho": self.rho_inter[n],
                    }
                )
        return rows

    def _balance(self, residuals: dict[str, tuple[LevelResidual, LevelResidual]]) -> None:
        rebalance(self.rho_intra, self.u, {n: r[0] for n, r in residuals.items()}, self.cfg)
        rebalance(self.rho_inter, self.v, {n: r[1] for n, r in residuals.items()}, self.cfg)

    def _mask_rows(self, k: int, drift: dict[str, int], dynamic: bool) -> list[dict]:
        rows = []
        topo = self.topo
        for n, g in self.masks.items():
            common = {"iteration": k, "layer": n, "total_out": len(g.out_keep), "total_in": len(g.in_keep)}
            if topo.rank == 0:
                rows.append(
                    common
                    | {
                        "kind": "global",
                        "node": -1,
                        "kept_out": len(g.out_idx),
                        "kept_in": len(g.in_idx),
                        "density": g.density(),
                        "drift": drift.get(n, 0),
                    }
                )
            if dynamic and topo.is_leader and n in self.node_masks:
                nm = self.node_masks[n]
                rows.append(
                    common
                    | {
                        "kind": "node",
                        "node": topo.node,
                        "kept_out": len(nm.out_idx),
                        "kept_in": len(nm.in_idx),
                        "density": nm.density(),
                        "drift": 0,
                    }
                )
        return rows

    # -- checkpoint -------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {
            "u": self.u,
            "v": self.v,
            "z_node": self.z_node,
            "z": self.z,
            "rho_intra": self.rho_intra,
            "rho_inter": self.rho_inter,
            "masks": {n: g.vector() for n, g in self.masks.items()},
            "frozen": self.frozen,
            "stable": self.stable,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for key in ("u", "v", "z_node", "z"):
            for n, t in state[key].items():
                getattr(self, key)[n].copy_(t)
        self.rho_intra, self.rho_inter = dict(state["rho_intra"]), dict(state["rho_inter"])
        for n, vec in state["masks"].items():
            self.masks[n] = GlobalMask.from_vector(vec, self.theta[n].shape, self.sparsity[n].shape_keep < 1.0)
        self.frozen, self.stable = state["frozen"], state["stable"]
