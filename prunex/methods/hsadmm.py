"""`hsadmm`: PruneX's Hierarchical Structured ADMM (paper Alg. 1), and the shared ADMM method base.

One iteration is one outer ADMM iteration: phase 1, E local epochs of SGD (momentum, weight
decay) with the proximal term rho_1 (theta - z_i + u) of eq. (8) added to every gradient; then
the engine's consensus (phases 2-5, `prunex.admm.hsadmm.HSADMM`).

Training on the frozen mask (sec. 4.5, Alg. 1 line 11): once the mask is frozen (`prunex.admm.freeze`:
settled, at T_freeze, or for retraining), "standard distributed training on a fixed sparse manifold".
At the first iteration on the frozen mask every rank's theta restarts from the masked consensus z, with
the duals and SGD momentum zeroed (`ConsensusEngine.restart_on_mask`); from then on every SGD step
multiplies the constrained layers' gradients by the mask, so theta, its momentum and z stay exactly zero
off the mask. After the outer loop (or once the residuals have converged) `--retrain-epochs R` more
iterations run on the frozen mask, one local epoch each. The evaluated, exported and final model is the
masked consensus z (equal to theta's average on the mask); its BatchNorm statistics are re-estimated
before evaluation (`--bn-batches`), or, with `--bn-batches 0`, those the engine averaged over all ranks
at every consensus (only then are they sent: `RunConfig.averages_bn_stats`). `freeze.parquet` records
when the mask froze and why.

Phase 1 starts from the rank's own theta (Alg. 1 line 4); `ADMMConfig.phase1_start` "z", a stated variant, starts
every phase 1 after the first from the global consensus z instead.
`ADMMConfig.retraining` "admm_from_z", "admm_from_z_anchor_z" and "local_sgd", three more stated variants, start
every phase 1 on the frozen mask from z: the second pulls towards z_i rather than z_i - u, the third adds no
proximal term (local SGD between the consensus rounds, which are unchanged in all three).

SGD momentum (`ADMMConfig.momentum_policy`): one optimizer serves the whole run, so by default
("carry") the momentum buffers of one phase 1 carry into the next outer iteration's, across the jump
of the anchor z_i - u and any rescaling of rho_1; "reset" starts every phase 1 from zero momentum, a
fresh solve of eq. (8). docs/hsadmm.md says what we measured.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import nn

from prunex.admm.hsadmm import HSADMM
from prunex.methods.base import Context, IterationResult, Method, load_model_state, model_state
from prunex.pruning import constrained_layers

# Owners of the consensus engine's state (sec. 4.1.2), for checkpoints: u is the rank's own dual
# (eq. 12); z_i (`z_node`) and v are computed identically on the P ranks of a node (eq. 9, 13);
# every other entry (the global z, the penalties, the masks, the freeze state) is identical on all ranks.
ENGINE_OWNERS = {"u": "rank", "z_node": "node", "v": "node"}


class ProximalPull:
    """What phase 1 adds to every gradient (eq. (8)): ``grad += rho_1 (theta - anchor)`` per parameter, anchor
    z_i - u, then, on a frozen mask (sec. 4.5), ``grad *= mask`` on the constrained layers, so that theta and its
    momentum stay exactly 0 off the mask. On all parameters at once with multi-tensor ops: theta - anchor in
    one, the add in one per distinct rho_1 (the penalties are per layer but take few values), the mask in one.
    On a CPU these are the per-tensor ops in the same order, the same bits as one loop over the parameters; on a
    GPU a few launches where the loop made ~3 and a temporary per parameter every SGD step (ResNet-152: 467
    parameters, 154 masked; issue 27), at the price of every temporary alive at once (one model's size)."""

    def __init__(
        self,
        params: dict[str, torch.Tensor],
        anchors: dict[str, torch.Tensor],
        rho: dict[str, float],
        masks: dict[str, torch.Tensor],
    ) -> None:
        names = list(params)
        self.params = list(params.values())
        self.anchors = [anchors[n] for n in names]
        groups: dict[float, list[int]] = {}
        for i, n in enumerate(names):
            groups.setdefault(rho[n], []).append(i)
        self.groups = list(groups.items())
        self.masked = [i for i, n in enumerate(names) if n in masks]
        self.masks = [masks[names[i]] for i in self.masked]

    @torch.no_grad()
    def add_to_grads(self) -> None:
        grads = [p.grad for p in self.params]
        pulls = torch._foreach_sub(self.params, self.anchors)  # theta - z_i + u
        for rho, idx in self.groups:
            torch._foreach_add_([grads[i] for i in idx], [pulls[i] for i in idx], alpha=rho)  # + rho_1 (...)
        if self.masked:  # frozen mask: no step off it
            torch._foreach_mul_([grads[i] for i in self.masked], self.masks)


class ADMMMethod(Method):
    """Local proximal SGD + a consensus engine; subclasses choose the engine."""

    engine_class: type = HSADMM

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        cfg = ctx.config
        a = cfg.admm
        model = ctx.model
        self.params = dict(model.named_parameters())
        # BatchNorm statistics ride along in the consensus only when evaluation uses them as they are
        # (bn_batches == 0); otherwise they are re-estimated before every evaluation and would be sent for nothing
        buffers = {n: b for n, b in model.named_buffers() if b.is_floating_point()} if cfg.averages_bn_stats else {}
        self.sparsity = constrained_layers(
            model, filter_keep=a.filter_keep, channel_keep=a.channel_keep, shape_keep=a.shape_keep, include=a.layers
        )
        self.engine = self.engine_class(self.params, buffers, self.sparsity, a, ctx.comm, cfg.weight_decay)
        self.optimizer = self.make_sgd(model.parameters())
        self.eval_copy = copy.deepcopy(model)
        self.epochs_done = 0
        self.retrain_left: int | None = None  # set when the outer loop ends
        self.masked_from: int | None = None  # the first iteration trained on the frozen mask
        self._train_masks: dict[str, torch.Tensor] | None = None

    @property
    def num_iterations(self) -> int:
        a = self.ctx.config.admm
        return a.iterations + a.retrain_epochs

    def local_training(self, epochs: int) -> float:
        """Phase 1 (Alg. 1 line 4, eq. (8)): SGD on the shard with the proximal term."""
        model = self.ctx.model
        model.train()
        if self.ctx.config.admm.momentum_policy == "reset":
            self.optimizer.state.clear()  # zero momentum: a fresh solve of eq. (8) around the new anchor
        # anchors z_i^k - u^k and penalties fixed during phase 1; the frozen mask ({} while it is dynamic). On the
        # frozen mask, `ADMMConfig.retraining` "local_sgd" adds no pull (rho_1 0 in phase 1 only) and
        # "admm_from_z_anchor_z" pulls towards z_i (the duals out of phase 1 only)
        masks = self.masks_for_training()
        retraining = self.ctx.config.admm.retraining if self.engine.frozen else "admm"
        rho = self.engine.rho_intra
        if retraining == "local_sgd":
            rho = dict.fromkeys(rho, 0.0)
        anchors = self.engine.anchors(duals=retraining != "admm_from_z_anchor_z")
        pull = ProximalPull(self.params, anchors, rho, masks)
        losses: list[torch.Tensor] = []  # read once after phase 1, not once per step (a device sync each)
        for _ in range(epochs):
            for x, y in self.batches(self.epochs_done):
                self.optimizer.zero_grad(set_to_none=True)
                loss = self.criterion(model(x), y)
                loss.backward()
                pull.add_to_grads()
                self.optimizer.step()
                losses.append(loss.detach())
            self.epochs_done += 1
        total = sum(torch.stack(losses).tolist()) if losses else 0.0  # the per-step values, added in order
        # its finiteness is checked by every rank together after the consensus
        # (prunex.training.train.ranks_agree_on_failure)
        return total / max(len(losses), 1)

    def masks_for_training(self) -> dict[str, torch.Tensor]:
        """The frozen mask per constrained layer, for phase 1 (empty while the mask is dynamic), made once. The
        restart on the mask is `start_on_mask`'s, at the first frozen iteration (module docstring)."""
        if not self.engine.frozen:
            return {}
        if self._train_masks is None:
            self._train_masks = self.engine.train_masks()
        return self._train_masks

    def start_on_mask(self, k: int) -> None:
        """Iteration ``k`` is the first on the frozen mask: theta from the masked consensus, duals and
        momentum zeroed (`ConsensusEngine.restart_on_mask`)."""
        self.engine.restart_on_mask()
        self.optimizer.state.clear()
        self.masked_from = k

    def train_iteration(self, k: int) -> IterationResult:
        a = self.ctx.config.admm
        retraining = self.retrain_left is not None or k >= a.iterations
        if retraining and self.engine.freeze.force(k) and self.ctx.topo.rank == 0:
            self.ctx.log.append("freeze", [self.engine.freeze.row(k)])
        if self.engine.frozen and self.masked_from is None:
            self.start_on_mask(k)
        elif k > 0 and a.phase1_start == "z":  # a variant of Alg. 1 line 4 (`ADMMConfig.phase1_start`)
            self.engine.theta_from_z()
        elif self.masked_from is not None and a.retraining != "admm":  # a variant (`ADMMConfig.retraining`)
            self.engine.theta_from_z()
        timer = self.ctx.comm.timer
        local = timer.start()
        loss = self.local_training(1 if retraining else a.local_epochs)
        local.stop()
        round_ = timer.start()
        result = self.engine.consensus(k, force_frozen=retraining)
        round_.stop()
        # phase 1 apart from phases 2-5 on the device's clock (the round ends in a device read already, so
        # reading the spans here adds no wait); the round's time besides communication is consensus_s minus
        # the iteration's comm_s (the only collectives of an iteration are the round's)
        rank = self.ctx.topo.rank
        self.ctx.log.append(
            "rounds", [{"iteration": k, "rank": rank, "local_s": local.seconds, "consensus_s": round_.seconds}]
        )
        if result.frozen and self.ctx.topo.rank == 0:
            self.ctx.log.append("freeze", [self.engine.freeze.row(k)])
        self.ctx.log.append("residuals", result.residual_rows)
        self.ctx.log.append("masks", result.mask_rows)
        self.ctx.log.append("overhead", result.overhead_rows)
        if retraining:
            self.retrain_left = (a.retrain_epochs if self.retrain_left is None else self.retrain_left) - 1
        elif result.converged and a.stop_on_convergence:
            self.retrain_left = a.retrain_epochs  # converged: go on to masked retraining
        self.finished = self.retrain_left is not None and self.retrain_left <= 0
        last = self.finished or k + 1 == self.num_iterations
        if last and self.ctx.topo.rank == 0:
            self.ctx.log.append("final_masks", self.final_mask_rows())
        evaluate = last or (k + 1) % self.ctx.config.eval_every == 0
        return IterationResult(
            train_loss=loss, epoch=float(self.epochs_done), evaluate=evaluate, extra={"frozen": self.engine.frozen}
        )

    def final_mask_rows(self) -> list[dict]:
        """The global group masks of the final model, as 0/1 strings (for Fig. 13)."""
        return [g.row(n) for n, g in self.engine.masks.items()]

    def eval_model(self) -> nn.Module:
        """The masked consensus z, with the BatchNorm statistics averaged over all ranks (when the engine
        averages them) or this rank's own (re-estimated for z before evaluation, `prunex.training.train`)."""
        with torch.no_grad():
            params = dict(self.eval_copy.named_parameters())
            for n, z in self.engine.z.items():
                params[n].copy_(z)
            mine = dict(self.ctx.model.named_buffers())
            for n, b in self.eval_copy.named_buffers():
                b.copy_(mine[n])
        return self.eval_copy

    def state_dict(self) -> dict[str, dict[str, Any]]:
        """Per rank: theta (the model's parameters), BatchNorm statistics, the optimizer's momentum,
        u. Per node: z_i and v. Replicated: z, penalties, masks, freeze state, epoch counters."""
        params, buffers = model_state(self.ctx.model)
        out: dict[str, dict[str, Any]] = {
            "replicated": {
                "epochs_done": self.epochs_done,
                "retrain_left": self.retrain_left,
                "masked_from": self.masked_from,
                "engine": {},
            },
            "node": {"engine": {}},
            "rank": {"params": params, "buffers": buffers, "optimizer": self.optimizer.state_dict(), "engine": {}},
        }
        for key, value in self.engine.state_dict().items():
            out[ENGINE_OWNERS.get(key, "replicated")]["engine"][key] = value
        return out

    def load_state_dict(self, state: dict[str, dict[str, Any]]) -> None:
        own = state["rank"]
        load_model_state(self.ctx.model, own["params"], own["buffers"])
        self.optimizer.load_state_dict(own["optimizer"])
        self.engine.load_state_dict(
            {k: v for role in ("replicated", "node", "rank") for k, v in state[role]["engine"].items()}
        )
        rep = state["replicated"]
        self.epochs_done, self.retrain_left = rep["epochs_done"], rep["retrain_left"]
        self.masked_from = rep.get("masked_from")  # absent in checkpoints written before masked retraining


class HSADMMMethod(ADMMMethod):
    name = "hsadmm"
    engine_class = HSADMM
