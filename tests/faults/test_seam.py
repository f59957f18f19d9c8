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


def test_a_hold_with_a_file_lasts_while_the_file_exists_not_hold_s(tmp_path) -> None:
    """PRUNEX_FAULT_HOLD_S is the hold without a file; with one, the hold ends when the file goes (bounded only
    by the collective timeout). A test on a loaded machine holding past PRUNEX_FAULT_HOLD_S saw its run go on."""
    import threading
    import time

    hold = tmp_path / "hold"
    hold.touch()
    faults = Faults.from_env(
        {"PRUNEX_FAULT_HOLD_AT": "1", "PRUNEX_FAULT_HOLD_FILE": str(hold), "PRUNEX_FAULT_HOLD_S": "0.2"}
    )
    topo = Topology(rank=0, world_size=1, nodes=1, procs_per_node=1)
    config, model = RunConfig(method="ddp", name="r"), torch.nn.Linear(2, 2)  # built before the clock starts
    threading.Timer(1.0, hold.unlink).start()
    t0 = time.monotonic()
    faults.before_iteration(1, config, topo, model)
    assert 1.0 <= time.monotonic() - t0 < 5.0
    t0 = time.monotonic()  # without a file: PRUNEX_FAULT_HOLD_S
    no_file = Faults.from_env({"PRUNEX_FAULT_HOLD_AT": "1", "PRUNEX_FAULT_HOLD_S": "0.2"})
    no_file.before_iteration(1, config, topo, model)
    assert 0.2 <= time.monotonic() - t0 < 1.0
