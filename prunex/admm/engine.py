"""What every consensus engine shares: its state, its penalties and masks, the residual table, the logs.

An engine holds, per parameter of the local model, the device-local ``theta`` (updated in place by the
caller's local SGD, phase 1) and its scaled dual ``u``, the global consensus ``z``, and per layer the
penalty ``rho_intra`` (rho_1, the proximal term's), the global group mask of every constrained layer
(`prunex.pruning.GroupMask`) and the freezing rule (`prunex.admm.freeze.MaskFreeze`). Subclasses add
their own state (H-SADMM: z_i, v, rho_2) in ``init_engine``, name it in ``STATE``/``PENALTIES`` and
implement ``consensus`` as a sequence of the steps of `prunex.admm.steps`. Checkpointing is here, once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

import torch

from prunex.admm.freeze import MaskFreeze
from prunex.admm.layer_norms import LayerSquares
from prunex.comm import Comm
from prunex.pruning import GroupMask, LayerSparsity
from prunex.training.config import ADMMConfig


@dataclass
class ConsensusResult:
    converged: bool
    frozen: bool  # the mask was frozen during this iteration
    residual_rows: list[dict] = field(default_factory=list)
    mask_rows: list[dict] = field(default_factory=list)
    overhead_rows: list[dict] = field(default_factory=list)  # compress/decompress seconds (H-SADMM)


class NormReader:
    """The per-layer norms of a round (Alg. 1 line 28), kept on the device until one read.

    Each `add` takes one or more columns (a list of tensors, one per layer, in layer order): a temporary
    can be normed as soon as it is made and its memory reused. `read` then reads every column with one
    `tolist()` (one device-to-host synchronisation per round).

    Two ways to norm, by where the round runs (issue 27: on a GPU a ResNet-152 round was host-bound, and
    most of its host time went to the norms' per-tensor outputs and to stacking them):

    - ``squares`` None (a CPU): one `torch._foreach_norm` per `add`, stacked, squared on the host, so the
      values are those one `.item()` per norm gave; the CPU round's results stay bitwise those of the
      per-layer loop.
    - ``squares`` given (a GPU): a column that lies in one flat buffer (``flats``: `flat_state`, or the
      scratch theta is copied into, `ConsensusEngine.normable`) is squared and summed per layer at once
      (`prunex.admm.layer_norms.LayerSquares`: no tensor per layer). A sum of squares and the square of a
      norm differ in rounding only: the norms feed the stopping test, the residual balancing (ratios
      against mu = 10) and the residual logs.
    """

    def __init__(self, layers: int, squares: LayerSquares | None = None) -> None:
        self.layers, self.squares = layers, squares
        self.fields: list[str] = []
        self.blocks: list[torch.Tensor] = []
        self.squared: list[bool] = []  # per field: its block holds squared norms (segmented) or norms

    def add(
        self, fields: tuple[str, ...], columns: list[list[torch.Tensor]], flats: list[torch.Tensor | None] | None = None
    ) -> None:
        """Norm ``columns`` (one list of ``layers`` tensors per name in ``fields``; ``flats``: per column the
        flat buffer its tensors are views of, back to back, or None)."""
        if len(fields) != len(columns) or any(len(c) != self.layers for c in columns):
            raise ValueError(f"{len(columns)} columns for fields {fields}, each of {self.layers} layers")
        if not self.layers:
            self.fields += fields
            self.squared += [False] * len(fields)
            return
        flats = flats if flats is not None else [None] * len(columns)
        dense = []
        for field_name, column, flat in zip(fields, columns, flats, strict=True):
            if self.squares is not None and flat is not None:
                self.fields.append(field_name)
                self.blocks.append(self.squares(flat))
                self.squared.append(True)
            else:
                dense.append((field_name, column))
        if dense:  # the columns without a flat buffer: one _foreach_norm, after the segmented ones
            self.fields += [name for name, _ in dense]
            self.blocks.append(torch.stack(torch._foreach_norm([t for _, column in dense for t in column])))
            self.squared += [False] * len(dense)

    def read(self, names: list[str], norms_cls: type) -> dict[str, Any]:
        """Every layer's ``norms_cls`` (`HSADMMNorms`, `FlatNorms`) of squared norms, from the columns added,
        by field name."""
        keys = [f.name for f in fields(norms_cls)]
        if sorted(self.fields) != sorted(keys):
            raise ValueError(f"normed {self.fields}, but {norms_cls.__name__} has {keys}")
        if not names:
            return {}
        values = torch.cat(self.blocks).tolist()
        L = self.layers
        columns = {}
        for j, (f, squared) in enumerate(zip(self.fields, self.squared, strict=True)):
            column = values[j * L : (j + 1) * L]
            columns[f] = column if squared else [x**2 for x in column]
        per_layer = zip(*[columns[k] for k in keys], strict=True)  # one tuple of the fields per layer
        return {n: norms_cls(*values) for n, values in zip(names, per_layer, strict=True)}


def flat_of(tensors: list[torch.Tensor]) -> torch.Tensor | None:
    """The one 1-D view that ``tensors`` are consecutive pieces of (as `flat_state` makes them), or None."""
    if not tensors:
        return None
    first = tensors[0]
    size, at = first.element_size(), first.data_ptr()
    for t in tensors:
        if t.data_ptr() != at or not t.is_contiguous() or t.dtype != first.dtype or t.device != first.device:
            return None
        at += t.numel() * size
    return torch.as_strided(first, (sum(t.numel() for t in tensors),), (1,), first.storage_offset())


def flat_state(like: Mapping[str, torch.Tensor], *, copy: bool) -> dict[str, torch.Tensor]:
    """Per-parameter state (a copy of ``like``, or zeros) as views of one flat buffer, back to back in
    ``like``'s order: the inter-node exchange on a GPU then packs c_i = z_i + v_i straight from it
    (`BucketShrinkPlan.compress` with ``plus``) instead of copying both into a stage. Where the tensors
    differ in dtype or device, each gets a buffer of its own (and the exchange copies into a stage)."""
    tensors = list(like.values())
    if not tensors or len({(t.dtype, t.device) for t in tensors}) != 1:
        return {n: t.detach().clone() if copy else torch.zeros_like(t) for n, t in like.items()}
    flat = torch.zeros(sum(t.numel() for t in tensors), dtype=tensors[0].dtype, device=tensors[0].device)
    out, offset = {}, 0
    for n, t in like.items():
        out[n] = flat.narrow(0, offset, t.numel()).view(t.shape)
        if copy:
            out[n].copy_(t)
        offset += t.numel()
    return out


class ConsensusEngine:
    """State and plumbing of a consensus engine over the parameters ``theta`` of one rank.

    Args:
        theta: name -> parameter tensor of the local model (updated in place by the caller).
        buffers: name -> floating-point buffer (BatchNorm statistics) averaged over all ranks at every
            consensus; empty when they are re-estimated before evaluation (`ADMMConfig.average_bn_stats`).
        sparsity: name -> structured constraint of the constrained layers (`constrained_layers`).
        cfg: ADMM options.
        comm: the rank's instrumented communication.
        weight_decay: lambda of eq. (1), used in the z step (and by the caller's SGD).
    """

    STATE: tuple[str, ...] = ("u", "z")  # per-parameter tensors
    ANCHOR = "z"  # the consensus variable the proximal term of phase 1 pulls theta towards
    PENALTIES: tuple[str, ...] = ("rho_intra",)
    DUALS: tuple[str, ...] = ("u",)  # scaled duals, zeroed at the start of masked retraining
    DUAL_OF = {"rho_intra": "u"}  # the scaled dual each penalty scales (rescaled when the penalty changes)
    RESTART_FROM_Z: tuple[str, ...] = ()  # per-parameter state set to z then (H-SADMM: z_i)

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
        unknown = set(self.sparsity) - set(self.names)
        if unknown:
            raise ValueError(f"constrained layers that are not parameters: {sorted(unknown)}")
        first = next(iter(self.theta.values()))
        self.device, self.dtype = first.device, first.dtype
        with torch.no_grad():
            # Alg. 1 line 1: theta and the consensus variables from the same initialisation; duals 0
            # u and z each in one flat buffer (`flat_state`), so that a GPU round norms them per layer at once
            self.u = flat_state(self.theta, copy=False)
            self.z = flat_state(self.theta, copy=True)
            # where a round forms its per-layer temporaries (z - v, the residuals, z^{k+1} - z^k), one at a
            # time: a round allocates no tensor per layer for them (`steps.difference`); not state
            self.scratch = list(flat_state(self.theta, copy=False).values())
        self._flats: dict[str, tuple[list[torch.Tensor], torch.Tensor | None]] = {}  # `flats`' answers
        # on a GPU `NormReader` norms the flat buffers per layer at once
        self.layer_squares = (
            LayerSquares([t.numel() for t in self.theta.values()], self.device)
            if self.device.type == "cuda" and self.names
            else None
        )
        self.rho_intra = dict.fromkeys(self.names, cfg.rho_intra)
        self.initial_rho = {"rho_intra": cfg.rho_intra, "rho_inter": cfg.rho_inter}
        # Alg. 1 line 1: m_global = 1
        self.masks = {
            n: GroupMask.full(tuple(self.theta[n].shape), self.device, s.with_shape) for n, s in self.sparsity.items()
        }
        self.freeze = MaskFreeze(cfg.freeze_iteration, cfg.freeze_patience)
        self.init_engine()

    def init_engine(self) -> None:
        """The subclass's own state and buffers (called at the end of construction)."""

    def flats(self, *keys: str) -> list[torch.Tensor | None]:
        """Per state name (``"scratch"`` for the scratch), the flat buffer its per-layer tensors are views of
        (`flat_of`), or None; always None off a GPU (``layer_squares`` None). Found once for the same tensor
        objects (compared by identity each round: a state tensor replaced rather than updated in place is
        looked at again, never read through a stale buffer)."""
        if self.layer_squares is None:
            return [None] * len(keys)
        out = []
        for key in keys:
            state = self.scratch if key == "scratch" else getattr(self, key)
            tensors = state if isinstance(state, list) else [state[n] for n in self.names]
            cached = self._flats.get(key)
            if cached is None or any(a is not b for a, b in zip(cached[0], tensors, strict=True)):
                cached = self._flats[key] = (tensors, flat_of(tensors))
            out.append(cached[1])
        return out

    def normable(self, tensors: list[torch.Tensor]) -> tuple[list[list[torch.Tensor]], list[torch.Tensor | None]]:
        """``tensors`` (theta: the model's own parameters, not one flat buffer) as `NormReader.add`'s columns and
        flats: on a GPU copied into the scratch first (one multi-tensor copy), so that they are normed per
        layer at once like the flat states; elsewhere as they are."""
        (scratch,) = self.flats("scratch")
        if scratch is None:
            return [tensors], [None]
        torch._foreach_copy_(self.scratch, tensors)
        return [self.scratch], [scratch]

    @property
    def frozen(self) -> bool:
        return self.freeze.frozen

    def anchors(self, duals: bool = True) -> dict[str, torch.Tensor]:
        """Per parameter, the point the proximal term of phase 1 pulls theta to: rho_1 (theta - anchor)
        (eq. (8): anchor = z_i - u_ij, ``ANCHOR = "z_node"``; flat consensus: z - u). `duals=False`: z_i (z)
        alone, `ADMMConfig.retraining` "admm_from_z_anchor_z"'s anchor on the frozen mask (a stated variant)."""
        consensus = getattr(self, self.ANCHOR)
        if not duals:
            return {n: consensus[n] for n in self.names}
        return {n: consensus[n] - self.u[n] for n in self.names}

    def begin_round(self, k: int, force_frozen: bool) -> bool:
        """Start consensus round ``k``: freeze the mask when asked (masked retraining), then wait for every
        rank (ranks finish local training at different times; the wait is logged as a `barrier`, so
        the collectives that follow are timed as transfers). Returns whether the mask is dynamic."""
        if force_frozen:
            self.freeze.force(k)
        self.comm.barrier("flat")
        return not self.freeze.frozen

    @torch.no_grad()
    def restart_on_mask(self) -> None:
        """Masked retraining's start (sec. 4.5, as docs/hsadmm.md reads it): the problem is now training on
        the fixed mask, so every rank's theta restarts from the masked consensus z and the consensus state
        from there: the scaled duals (u; H-SADMM also v) are 0, H-SADMM's z_i is z. The duals held the
        history of the dense theta's distance to the dynamic projection; on the mask that history is moot,
        and keeping it would pull theta towards z_i - u, a point off the new problem's consensus. The
        penalties start again from their initial values (grown to the cap they would hold every theta at
        its anchor, and training on the mask would stall); balancing goes on from there."""
        for key in self.PENALTIES:
            setattr(self, key, dict.fromkeys(self.names, self.initial_rho[key]))
        for n in self.names:
            if n in self.masks:
                # z on the frozen support (eq. 15's K): with shape sparsity the exchange compresses filters x
                # channels, so kernel positions every node pruned travel and hold mean(v_i), 0 only up to the
                # duals' rounding where the masks moved. Without shape sparsity z is exactly 0 there already,
                # and this leaves it bitwise as it was (`masked` keeps the kept entries, +0.0 elsewhere).
                self.z[n].copy_(self.masks[n].apply(self.z[n]))
            self.theta[n].copy_(self.z[n])
            for key in self.DUALS:
                getattr(self, key)[n].zero_()
            for key in self.RESTART_FROM_Z:
                getattr(self, key)[n].copy_(self.z[n])

    @torch.no_grad()
    def theta_from_z(self) -> None:
        """``ADMMConfig.phase1_start == "z"``: the next phase 1 starts from the global consensus z^k instead of the
        rank's own theta^k (a stated variant of Alg. 1 line 4); the duals and penalties are left as they are."""
        torch._foreach_copy_([self.theta[n] for n in self.names], [self.z[n] for n in self.names])

    @torch.no_grad()
    def grow_penalties(self) -> None:
        """``rho_schedule == "grow"``, after a dynamic round: every layer's penalty times
        g = (rho_max / initial)^(1 / T_freeze), capped at rho_max, its scaled dual rescaled as in residual
        balancing (rho y unchanged). From the initial value the cap is reached after T_freeze rounds, the
        iteration at which the mask is frozen at the latest (`ADMMConfig.rho_schedule`)."""
        if self.cfg.rho_schedule != "grow":
            return
        for key in self.PENALTIES:
            rho, dual = getattr(self, key), getattr(self, self.DUAL_OF[key])
            g = (self.cfg.rho_max / self.initial_rho[key]) ** (1.0 / self.cfg.freeze_iteration)
            duals, factors = [], []
            for n, old in rho.items():
                new = min(old * g, self.cfg.rho_max)
                if new != old:
                    duals.append(dual[n])
                    factors.append(old / new)
                    rho[n] = new
            if duals:
                torch._foreach_mul_(duals, factors)

    def train_masks(self) -> dict[str, torch.Tensor]:
        """Per constrained layer, the frozen global mask as a 0/1 tensor broadcastable to the parameter, in its
        dtype: what masked retraining multiplies theta's gradients by."""
        if not self.frozen:
            raise RuntimeError("the mask is not frozen")
        return {n: g.element_mask().to(self.dtype) for n, g in self.masks.items()}

    # -- residual table and logs ---------------------------------------------------------------------
    def total(self, rows: list[list[float]]) -> list[list[float]]:
        """The residual table summed over every rank: one small float64 flat AllReduce (Alg. 1 line 28)."""
        table = torch.tensor(rows, dtype=torch.float64, device=self.device)
        self.comm.all_reduce(table, "flat", "sum")
        return table.cpu().tolist()

    def mask_rows(
        self, k: int, drift: Mapping[str, int], node_masks: Mapping[str, GroupMask] | None = None
    ) -> list[dict]:
        """``masks.parquet`` rows: the global mask of every constrained layer (rank 0) and, while the mask
        is dynamic, each node's own mask (its leader; H-SADMM only). ``drift`` is the global mask's (the
        groups that changed since the previous iteration); a node's own drift is not measured, its rows
        carry 0 (`analysis` reads the global rows' only)."""
        rows = []
        topo = self.topo
        for n, g in self.masks.items():
            common = {"iteration": k, "layer": n, "total_out": g.total_out, "total_in": g.total_in}
            if topo.rank == 0:
                rows.append(
                    common
                    | {
                        "kind": "global",
                        "node": -1,
                        "kept_out": g.kept_out,
                        "kept_in": g.kept_in,
                        "density": g.density(),
                        "drift": drift.get(n, 0),
                    }
                )
            if node_masks is not None and topo.is_leader and n in node_masks:
                nm = node_masks[n]
                rows.append(
                    common
                    | {
                        "kind": "node",
                        "node": topo.node,
                        "kept_out": nm.kept_out,
                        "kept_in": nm.kept_in,
                        "density": nm.density(),
                        "drift": 0,
                    }
                )
        return rows

    # -- checkpoint ------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Everything resuming needs: the per-parameter state, the penalties, the masks, the freezing rule."""
        return {
            **{key: getattr(self, key) for key in self.STATE},
            **{key: getattr(self, key) for key in self.PENALTIES},
            "masks": {n: g.vector() for n, g in self.masks.items()},
            **self.freeze.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for key in self.STATE:
            for n, t in state[key].items():
                getattr(self, key)[n].copy_(t)
        for key in self.PENALTIES:
            setattr(self, key, dict(state[key]))
        for n, vec in state["masks"].items():
            self.masks[n] = GroupMask.from_vector(vec, self.masks[n].shape, self.sparsity[n].with_shape)
        self.freeze.load_state_dict(state)
