"""The submitit executor a run goes out on, and exactly the parameters it is given.

- `debug`: submitit's DebugExecutor, one process in the foreground (1 x 1 topologies).
- `local`: `prunex.cluster.jobs.LocalGroupExecutor` (submitit's LocalExecutor as a process group that dies
  with its launcher), M x P processes on this machine (nodes emulated blockwise).
- `slurm`: submitit's SlurmExecutor, `nodes=M`, `tasks_per_node=P`, one GPU per task unless the run
  is on the CPU. What Slurm is asked for (partition, account, GPUs, CPUs, memory, setup, time
  limit from the performance model) is `prunex.cluster.slurm.executor_parameters`, from
  `prunex.cluster.slurm.SlurmOptions`: a site preset (`--site puhti`), the `PRUNEX_SLURM_*` environment,
  command-line options; on a mini cluster (no GPUs) its GPU requests are dropped with a visible note
  (`submitit_parameters`). `make_executor` refuses an unsubmittable run first
  (`prunex.cluster.slurm.check_submission`: no account, a torch that cannot run on the site's GPUs).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import submitit

from prunex.cluster import jobs
from prunex.cluster.slurm import SlurmOptions, check_submission, executor_parameters, on_minicluster
from prunex.minicluster.helpers import adapt_slurm_params
from prunex.training.config import RunConfig


def submitit_parameters(
    config: RunConfig, slurm: SlurmOptions | None = None, *, export: bool = False
) -> tuple[dict[str, Any], list[str]]:
    """Exactly what `make_executor` passes to submitit's `update_parameters`, and the notes it prints.
    On a mini cluster (no GPUs) GPU requests are dropped with a visible note, so the `paper`
    profile's Slurm parameters resolve there too. `export`: the run's export job's (`RunConfig.export_job`)."""
    params = executor_parameters(config, slurm, export=export)
    notes: list[str] = []
    if config.executor == "slurm" and on_minicluster():
        params, notes = adapt_slurm_params(params)
    return params, notes


def make_executor(
    config: RunConfig, folder: str | Path, slurm: SlurmOptions | None = None, *, export: bool = False
) -> submitit.Executor:
    """A submitit executor for the run, after `prunex.cluster.slurm.check_submission` (one-line refusals). On a
    mini cluster (no GPUs) GPU requests are dropped with a visible note, so the `paper` profile's Slurm
    parameters resolve there too. The local executor is `prunex.cluster.jobs.LocalGroupExecutor`: the job is a
    process group that dies with its launcher. `export`: the executor of the run's export job."""
    check_submission(config, slurm, export=export)
    params, notes = submitit_parameters(config, slurm, export=export)
    if config.executor == "local":
        executor: submitit.Executor = jobs.LocalGroupExecutor(folder=str(folder))
        executor.update_parameters(**{k: v for k, v in params.items() if k != "name"})
        return executor
    cluster = {"debug": "debug", "slurm": "slurm"}[config.executor]
    executor = submitit.AutoExecutor(folder=str(folder), cluster=cluster)
    for note in notes:
        print(f"[{config.name}] note: {note}", file=sys.stderr, flush=True)
    executor.update_parameters(**params)
    return executor
