"""A non-finite loss on one rank stops every rank at once, the failing rank named (issue 27).

Before, the rank whose loss became NaN raised alone and its peers blocked in their next collective until
the collective timeout or the launcher's watch ended them. Now every rank reports its loss's finiteness in
one AllReduce after each iteration (`prunex.training.train.ranks_agree_on_failure`) and all raise together: the
failing rank with its cause, the others naming it. Two real gloo processes, rank 0's weights set to NaN at
iteration 1 by the tests' fault seam (`PRUNEX_FAULT_NAN_AT`).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from distributed import close_pool, run_distributed

from prunex.training.config import ADMMConfig, RunConfig

NAN_ENV = {"PRUNEX_FAULT_NAN_AT": "1"}


@pytest.fixture(scope="module", autouse=True)
def _close() -> object:
    yield
    close_pool(2, NAN_ENV)


def _diverge(rank: int, root: str, data_root: str, method: str) -> str:
    import torch

    from prunex.training.topology import discover
    from prunex.training.train import _train

    cfg = RunConfig(
        method=method,
        nodes=2,
        data_root=data_root,
        train_subset=128,
        epochs=1,
        batch_size=32,
        bn_batches=1,
        eval_every=1000,
        collective_timeout_s=60,
        results=root,
        name=f"diverge-{method}",
        admm=ADMMConfig(iterations=3, local_epochs=1, freeze_iteration=2),
    )
    try:
        _train(cfg, Path(root) / cfg.experiment / cfg.name, discover(2, 1), torch.device("cpu"))
    except FloatingPointError as e:
        return str(e)
    return "finished"


@pytest.mark.parametrize("method", ["ddp", "hsadmm"])
def test_a_nan_on_one_rank_stops_every_rank_naming_it(method: str, data_root: Path, tmp_path: Path) -> None:
    t0 = time.monotonic()
    first, second = run_distributed(_diverge, 2, str(tmp_path), str(data_root), method, timeout_s=120, env=NAN_ENV)
    elapsed = time.monotonic() - t0
    assert first.startswith("rank 0 (node 0) failed in iteration 1 during local computation: FloatingPointError"), first
    assert "loss became nan" in first
    assert second.startswith("rank 1 (node 1) stopped in iteration 1: rank 0 had a non-finite training loss"), second
    assert elapsed < 30, f"{elapsed:.0f} s: the peers waited for a timeout (collective timeout 60 s)"
