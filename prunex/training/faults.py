"""Fault injection for the tests: the one seam between the training loop and the test hooks.

The loop (`prunex.training.train`) builds one `Faults` from the environment before its first iteration and
calls `Faults.before_iteration` at the start of each; with no ``PRUNEX_FAULT_*`` variable set that
call does nothing. Used by tests/faults, tests/test_resume.py and the mini cluster's interrupt tests:

- ``PRUNEX_FAULT_NAN_AT=K``: rank 0 fills one parameter of its training model with NaN at the start
  of iteration K, so the divergence check (`prunex.training.train.ranks_agree_on_failure`) meets a NaN loss
  through the ordinary training path.
- ``PRUNEX_FAULT_PREEMPT_AT=K``: the last rank sends itself submitit's preemption signal at the
  start of iteration K, as Slurm does before a time limit.
- ``PRUNEX_FAULT_HOLD_AT=K``: rank 0 of a run whose name matches ``PRUNEX_FAULT_HOLD_RUNS`` (a glob,
  default every run) stops before iteration K while the file ``PRUNEX_FAULT_HOLD_FILE`` exists
  (without one: for ``PRUNEX_FAULT_HOLD_S`` seconds, default 60), never longer than 80% of the
  collective timeout, so that interrupts and restarts can be tested at a known point of a run.
- ``PRUNEX_FAULT_STALL_START_RANK=R`` and ``PRUNEX_FAULT_STALL_START_S=S``: rank R sleeps S seconds before
  the rendezvous (`Faults.before_rendezvous`), a rank stuck while starting (a slow import or file system).
- ``PRUNEX_FAULT_EXPORT_FAIL=1``: a run that exports in its training job (`RunConfig.export_job` false) fails
  as its export starts, after its training is saved (`Faults.before_export`).
"""

from __future__ import annotations

import fnmatch
import os
import signal
import time
from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch import nn

from prunex.training.config import RunConfig
from prunex.training.topology import Topology


@dataclass(frozen=True)
class Faults:
    """The faults asked for by the environment (module docstring); -1: none at any iteration."""

    nan_at: int = -1
    preempt_at: int = -1
    hold_at: int = -1
    hold_runs: str = "*"
    hold_file: str | None = None
    hold_s: float = 60.0
    stall_start_rank: int = -1
    stall_start_s: float = 0.0
    export_fail: bool = False

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Faults:
        env = os.environ if environ is None else environ
        return cls(
            nan_at=int(env.get("PRUNEX_FAULT_NAN_AT", "-1")),
            preempt_at=int(env.get("PRUNEX_FAULT_PREEMPT_AT", "-1")),
            hold_at=int(env.get("PRUNEX_FAULT_HOLD_AT", "-1")),
            hold_runs=env.get("PRUNEX_FAULT_HOLD_RUNS", "*"),
            hold_file=env.get("PRUNEX_FAULT_HOLD_FILE"),
            hold_s=float(env.get("PRUNEX_FAULT_HOLD_S", "60")),
            stall_start_rank=int(env.get("PRUNEX_FAULT_STALL_START_RANK", "-1")),
            stall_start_s=float(env.get("PRUNEX_FAULT_STALL_START_S", "0")),
            export_fail=env.get("PRUNEX_FAULT_EXPORT_FAIL", "") == "1",
        )

    def before_rendezvous(self, rank: int) -> None:
        """Stall rank `stall_start_rank` before it joins the others (nothing, normally)."""
        if rank == self.stall_start_rank:
            _stall_before_rendezvous(self.stall_start_s)

    def before_iteration(self, k: int, config: RunConfig, topo: Topology, model: nn.Module) -> None:
        """Inject what is due at the start of iteration `k` on this rank (nothing, normally)."""
        if k == self.hold_at and topo.rank == 0:
            self._hold(config)
        if k == self.nan_at and topo.rank == 0:
            with torch.no_grad():
                next(model.parameters()).fill_(float("nan"))
        if k == self.preempt_at and topo.rank == topo.world_size - 1:
            preemption_signal()

    def before_export(self) -> None:
        """Fail the in-job export as it starts (nothing, normally)."""
        if self.export_fail:
            raise RuntimeError("fault injection: the export fails")

    def _hold(self, config: RunConfig) -> None:
        if not fnmatch.fnmatch(config.name, self.hold_runs):
            return
        # with a hold file, as long as it exists (PRUNEX_FAULT_HOLD_S is the hold without one), and never so long
        # that the waiting peers' collectives time out
        limit = 0.8 * config.collective_timeout_s
        if self.hold_file is None:
            limit = min(self.hold_s, limit)
        print(f"[{config.name}] fault injection: holding", flush=True)
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline and (self.hold_file is None or os.path.exists(self.hold_file)):
            time.sleep(0.1)


def _stall_before_rendezvous(seconds: float) -> None:
    time.sleep(seconds)  # named, so that a stack dump of this rank shows where it is


def preemption_signal() -> None:
    """Send this process submitit's preemption signal, as Slurm would before a time limit."""
    from submitit import JobEnvironment

    os.kill(os.getpid(), getattr(signal, "SIG" + JobEnvironment.USR_SIG))
