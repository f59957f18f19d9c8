"""The fault-injection seam (`prunex.training.faults`): read from the environment, inert unless asked."""

from __future__ import annotations

import torch

from prunex.training.config import RunConfig
from prunex.training.faults import Faults
from prunex.training.topology import Topology


def test_faults_come_from_the_environment_and_only_the_asked_rank_injects() -> None:
    assert Faults.from_env({}) == Faults()  # no variable: nothing at any iteration
    faults = Faults.from_env({"PRUNEX_FAULT_NAN_AT": "2", "PRUNEX_FAULT_HOLD_RUNS": "x*"})
    assert (faults.nan_at, faults.preempt_at, faults.hold_at, faults.hold_runs) == (2, -1, -1, "x*")
    config = RunConfig(method="ddp", name="r")
    for rank in (0, 1):
        model = torch.nn.Linear(2, 2)
        topo = Topology(rank=rank, world_size=2, nodes=1, procs_per_node=2)
        faults.before_iteration(1, config, topo, model)
        assert torch.isfinite(model.weight).all()  # not iteration 2
        faults.before_iteration(2, config, topo, model)
        assert torch.isfinite(model.weight).all() == (rank != 0)  # rank 0 only
