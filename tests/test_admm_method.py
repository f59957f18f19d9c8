"""The ADMM methods' policies on 2 real gloo processes (1 node x 2): SGD momentum across outer
iterations, and BatchNorm statistics in the consensus only when evaluation does not re-estimate them."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from distributed import run_distributed
from torch import nn
from torch.utils.data import TensorDataset

from prunex.admm.residuals import HSADMM_TABLE_COLUMNS
from prunex.training.config import ADMMConfig, RunConfig

BATCH = 8


class TinyBN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn = nn.BatchNorm2d(4)
        self.conv2 = nn.Conv2d(4, 6, 3)
        self.fc = nn.Linear(6 * 4 * 4, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.relu(self.conv2(torch.relu(self.bn(self.conv(x))))).flatten(1))


def _run(rank: int, tmp: str, admm: ADMMConfig, bn_batches: int) -> dict:
    from prunex.comm import Comm
    from prunex.methods import method_class
    from prunex.methods.base import Context
    from prunex.training.log import RunLog
    from prunex.training.topology import build_groups, discover

    topo = discover(1, 2)
    groups = build_groups(topo, 60)
    comm = Comm(topo, groups, torch.device("cpu"))
    g = torch.Generator().manual_seed(7)
    data = TensorDataset(torch.randn(2 * BATCH, 3, 8, 8, generator=g), torch.randint(0, 10, (2 * BATCH,), generator=g))
    cfg = RunConfig(
        method="hsadmm", procs_per_node=2, batch_size=BATCH, weight_decay=0.0, bn_batches=bn_batches, admm=admm
    )
    torch.manual_seed(0)
    model = TinyBN()
    ctx = Context(cfg, topo, groups, comm, torch.device("cpu"), model, data, RunLog(tmp, rank))
    method = method_class("hsadmm")(ctx)
    out: dict = {"buffers_in_consensus": sorted(method.engine.buffers), "starts_at_z": []}
    train = method.local_training

    def local_training(epochs: int) -> float:  # where each phase 1 starts
        out["starts_at_z"].append(all(torch.equal(method.engine.z[n], p) for n, p in model.named_parameters()))
        return train(epochs)

    method.local_training = local_training
    import prunex.methods.hsadmm as hsadmm_module

    made = hsadmm_module.ProximalPull
    out["pull_rho"] = []  # the largest rho_1 phase 1 adds, per outer iteration
    out["anchor"] = []  # per outer iteration: phase 1's anchor is z_i - u ("z_i - u"), z_i ("z_i") or neither

    def pull(params: dict, anchors: dict, rho: dict, masks: dict) -> object:
        out["pull_rho"].append(max(rho.values()))
        e = method.engine
        z_i = getattr(e, e.ANCHOR)
        with_u = all(torch.equal(anchors[n], z_i[n] - e.u[n]) for n in anchors)
        without = all(torch.equal(anchors[n], z_i[n]) for n in anchors)
        if not any(bool(e.u[n].any()) for n in anchors):  # u == 0 (the start, the freeze) makes the two anchors one
            out["anchor"].append("u = 0" if with_u else "neither")
        else:
            out["anchor"].append("z_i - u" if with_u else "z_i" if without else "neither")
        return made(params, anchors, rho, masks)

    # patched in this pool process only while this run trains: the pool's later tasks (other modules') get the real one
    hsadmm_module.ProximalPull = pull
    try:
        for k in range(admm.iterations):  # one SGD step per outer iteration (one batch per rank)
            comm.iteration = k
            method.train_iteration(k)
    finally:
        hsadmm_module.ProximalPull = made
    p = model.conv2.weight
    out["momentum_is_last_grad"] = torch.equal(method.optimizer.state[p]["momentum_buffer"], p.grad)
    records = comm.drain()
    out["intra_bytes"] = sum(r["bytes"] for r in records if (r["level"], r["op"]) == ("intra", "allreduce"))
    out["param_bytes"] = 4 * sum(q.numel() for q in model.parameters())
    out["buffer_bytes"] = 4 * sum(b.numel() for b in model.buffers() if b.is_floating_point())
    out["table_bytes"] = 4 * len(HSADMM_TABLE_COLUMNS) * len(list(model.parameters()))  # float32 residual table
    return out


@pytest.mark.parametrize("policy", ["carry", "reset"])
def test_momentum_policy(policy: str, tmp_path: Path) -> None:
    # both outer iterations dynamic: the freeze restarts momentum whatever the policy (masked retraining)
    admm = ADMMConfig(iterations=2, local_epochs=1, momentum_policy=policy, freeze_iteration=2)
    for r in run_distributed(_run, 2, str(tmp_path), admm, 2):
        # weight decay 0 and one step per phase 1: a reset buffer is exactly the step's (proximal) gradient,
        # a carried one also holds 0.9 x the previous outer iteration's
        assert r["momentum_is_last_grad"] == (policy == "reset")


@pytest.mark.parametrize("start", ["theta", "z"])
def test_phase1_starts_from_the_ranks_own_theta_or_from_z(start: str, tmp_path: Path) -> None:
    # both outer iterations dynamic (the freeze restarts theta from z whatever the start); iteration 0 starts from
    # the initialisation, which z is a copy of
    admm = ADMMConfig(iterations=2, local_epochs=1, phase1_start=start, freeze_iteration=2)
    for r in run_distributed(_run, 2, str(tmp_path), admm, 2):
        assert r["starts_at_z"] == [True, start == "z"]


@pytest.mark.parametrize("retraining", ["admm", "admm_from_z", "admm_from_z_anchor_z", "local_sgd"])
def test_on_the_frozen_mask_phase1_is_admms_or_local_sgds(retraining: str, tmp_path: Path) -> None:
    # iteration 0 dynamic, the mask frozen at T_freeze 1: iteration 1 restarts from z (masked retraining's start,
    # whatever the variant, duals zeroed), iteration 2 starts from its own theta (Alg. 1) or from z again, pulled
    # towards z_i - u, towards z_i, or not at all
    admm = ADMMConfig(iterations=3, local_epochs=1, freeze_iteration=1, channel_keep=0.5, retraining=retraining)
    for r in run_distributed(_run, 2, str(tmp_path), admm, 2):
        assert r["starts_at_z"] == [True, True, retraining != "admm"]
        assert r["pull_rho"][0] > 0  # the dynamic phase 1 is Alg. 1's either way
        assert all((rho == 0) == (retraining == "local_sgd") for rho in r["pull_rho"][1:]), r["pull_rho"]
        # the duals are 0 at the start and zeroed at the freeze; by iteration 2 the consensus of 1 has moved them
        assert r["anchor"][:2] == ["u = 0", "u = 0"], r["anchor"]
        assert r["anchor"][2] == ("z_i" if retraining == "admm_from_z_anchor_z" else "z_i - u"), r["anchor"]


@pytest.mark.parametrize("bn_batches, average", [(2, None), (0, None), (2, True)])
def test_bn_statistics_travel_only_when_not_reestimated(bn_batches: int, average: bool | None, tmp_path: Path) -> None:
    admm = ADMMConfig(iterations=2, local_epochs=1, freeze_iteration=1, average_bn_stats=average)
    sends = average if average is not None else bn_batches == 0
    for r in run_distributed(_run, 2, str(tmp_path), admm, bn_batches):
        assert bool(r["buffers_in_consensus"]) == sends
        # the intra-node payload per iteration: theta + u, plus the statistics only when they are averaged,
        # and the residual table summed in the node (`HSADMM.total`)
        assert r["intra_bytes"] == 2 * (r["param_bytes"] + (r["buffer_bytes"] if sends else 0) + r["table_bytes"])
