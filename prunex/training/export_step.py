"""`--export`: after training, the compact model (`prunex.pruning.export`) and its inference bench
(`prunex.bench.inference`), then the run is marked DONE.

Where it runs (`RunConfig.export_job`):

- **A one-task run** exports in its training job, on rank 0, after training (nothing else of the allocation
  waits for it); so does a run with `--bind-cores`, whose nodes share one machine (the regime profile's: a job
  of its own would free nothing and would run beside the next run of a serial wave, disturbing both timings).
- **A run of several tasks** does not: the export and the bench use one process, and the allocation's other
  GPUs would idle while it runs (the paper profile's Pareto runs are 16 x 4: 63 GPUs held for one rank's
  export). The training job ends with the run's tables merged, `final_model.pt` written and the marker
  `TRAINED` (not DONE); the launcher then submits an export job of one task and one GPU on one node
  (`prunex.cluster.task.ExportJob`, parameters `prunex.cluster.slurm.executor_parameters(..., export=True)`),
  which runs `finish_export` and marks the run DONE. A relaunch of a TRAINED run submits only the export job,
  so a failed or cancelled export never repeats training. Its time limit and GPU-hours are
  `prunex.cluster.estimate.estimate_export`'s, which `--dry-run` prints per submission.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from prunex.bench.inference import bench_run, describe
from prunex.cluster.regime import release_core
from prunex.pruning.export import export_run, summary
from prunex.training.config import EXPORT_CHECK_SAMPLES, RunConfig
from prunex.training.device import select_device
from prunex.training.log import DONE, TRAINED, merge_parts


def export_and_bench(run_dir: Path, device: torch.device, budget_s: float, batch: int) -> None:
    """The compact model and its inference bench, on this process's machine, with every core it may use.

    Runs before the run is marked DONE (a failure leaves the run unfinished, and a relaunch redoes only this).
    """
    cores = release_core()  # --bind-cores, in the training job: rank 0's one core; the other ranks are done
    if device.type == "cpu" and "OMP_NUM_THREADS" not in os.environ:
        torch.set_num_threads(cores)
    result = export_run(run_dir, device=device, require_done=False, check_samples=EXPORT_CHECK_SAMPLES)
    print(f"[{run_dir.name}] export: {summary(result)}", flush=True)
    dev = "auto" if device.type == "cuda" else "cpu"
    df = bench_run(run_dir, device=dev, budget_s=budget_s, batches=(1, batch), require_done=False)
    for line in describe(df).splitlines():  # each line its own "[run] ..." line: the launcher echoes those only
        print(f"[{run_dir.name}] inference: {line}", flush=True)


def export_device(config: RunConfig) -> torch.device:
    """The export job's device for the run's `--device`: as a rank's (`prunex.training.device.select_device`),
    the only task on its node."""
    available = torch.cuda.is_available()
    return select_device(
        config.device,
        0,
        1,
        cuda_available=available,
        visible=torch.cuda.device_count() if available else 0,
        visible_env=os.environ.get("CUDA_VISIBLE_DEVICES"),
    )


def finish_export(config: RunConfig, run_dir: str | Path) -> Path:
    """The export job's work: export and bench a TRAINED run, then mark it DONE. Idempotent on a DONE run."""
    run_dir = Path(run_dir)
    if (run_dir / DONE).exists():
        return run_dir
    if not (run_dir / TRAINED).exists():
        raise RuntimeError(f"run {config.name}: {run_dir} has no {TRAINED} marker: its training has not finished")
    export_and_bench(run_dir, export_device(config), config.bench_budget_s, config.bench_batch)
    merge_parts(run_dir, done=True)
    (run_dir / TRAINED).unlink(missing_ok=True)  # DONE says it all now
    print(f"[{config.name}] exported and benched: done", flush=True)
    return run_dir
