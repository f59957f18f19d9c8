"""Launching a run with submitit: one code path for a laptop and for Slurm.

- `debug`: submitit's DebugExecutor, one process in the foreground (1 x 1 topologies).
- `local`: submitit's LocalExecutor, M x P processes on this machine (nodes emulated blockwise).
- `slurm`: submitit's SlurmExecutor, `nodes=M`, `tasks_per_node=P`, one GPU per task unless the run
  is on the CPU. What Slurm is asked for (partition, account, GPUs, CPUs, memory, setup, time
  limit from the performance model) comes from `prunex.slurm.SlurmOptions`: a site preset
  (`--site puhti`), the `PRUNEX_SLURM_*` environment, command-line options. `make_executor` refuses
  an unsubmittable run first (`prunex.slurm.check_submission`: no account, a torch that cannot run
  on the site's GPUs), and a refused `sbatch` is one line with Slurm's message (`SubmitError`).

Each task runs `TrainJob`, which exports torch.distributed's env:// variables with
`submitit.helpers.TorchDistributedEnvironment` and calls `prunex.train.train`. It never writes
`CUDA_VISIBLE_DEVICES`: a value the scheduler set (one GPU bound per task, or the node's GPUs) is
kept, and `prunex.device` picks the GPU among those the task sees.

Run identity: a run lives in `RESULTS/runs/<shared id>` (`run_dir_for`), named by its resolved
training configuration (`RunConfig.shared_id`), not by the experiment that asks for it. Each
experiment refers to it as `RESULTS/<experiment>/<name>`, a relative symbolic link made by
`preflight` (`link_run`), so two experiments asking for the same training share one run, trained
once, and the analysis finds it under either name.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import submitit

from prunex import checkpoint
from prunex.config import SHARED_RUNS_DIR, ConfigError, RunConfig
from prunex.log import DONE
from prunex.minicluster.helpers import adapt_slurm_params, export_torch_env
from prunex.slurm import SlurmOptions, SubmitError, check_submission, executor_parameters, on_minicluster, submission

__all__ = [  # SlurmOptions, SubmitError and executor_parameters live in prunex.slurm; importable from here too
    "SlurmOptions",
    "SubmitError",
    "TrainJob",
    "executor_parameters",
    "export_job_env",
    "launch",
    "make_executor",
    "prepare",
    "preflight",
    "run_dir_for",
    "submit_array",
    "submitit_parameters",
    "wait",
]


def submitit_parameters(config: RunConfig, slurm: SlurmOptions | None = None) -> tuple[dict[str, Any], list[str]]:
    """Exactly what `make_executor` passes to submitit's `update_parameters`, and the notes it prints.
    On a mini cluster (no GPUs) GPU requests are dropped with a visible note, so the `paper`
    profile's Slurm parameters resolve there too."""
    params = executor_parameters(config, slurm)
    notes: list[str] = []
    if config.executor == "slurm" and on_minicluster():
        params, notes = adapt_slurm_params(params)
    return params, notes


def make_executor(config: RunConfig, folder: str | Path, slurm: SlurmOptions | None = None) -> submitit.Executor:
    """A submitit executor for the run, after `prunex.slurm.check_submission` (one-line refusals)."""
    check_submission(config, slurm)
    cluster = {"debug": "debug", "local": "local", "slurm": "slurm"}[config.executor]
    executor = submitit.AutoExecutor(folder=str(folder), cluster=cluster)
    params, notes = submitit_parameters(config, slurm)
    for note in notes:
        print(f"[{config.name}] note: {note}", file=sys.stderr, flush=True)
    executor.update_parameters(**params)
    return executor


def run_dir_for(config: RunConfig) -> Path:
    """The run's directory: one per training configuration, shared by every experiment asking for it."""
    return Path(config.results).resolve() / SHARED_RUNS_DIR / config.shared_id


def experiment_path(config: RunConfig) -> Path:
    """Where the asking experiment finds the run: `RESULTS/<experiment>/<name>`, a link to `run_dir_for`."""
    return Path(config.results).resolve() / config.experiment / config.run_id


def link_run(config: RunConfig) -> Path:
    """Make (or repoint) the experiment's relative link to the run directory; returns the link.

    A link to another run (the experiment now asks for a different training) is replaced
    atomically; the old run stays under RESULTS/runs. A real directory there is a run of the layout
    before shared runs: it is left alone and refused with one line.
    """
    link, target = experiment_path(config), run_dir_for(config)
    rel = Path(os.path.relpath(target, link.parent))
    if link.is_symlink():
        if Path(os.readlink(link)) == rel:
            return link
    elif link.exists():
        raise ConfigError(
            f"{link} is a run directory of the layout before shared runs (RESULTS/{SHARED_RUNS_DIR}/...): "
            "move it away or use another --results"
        )
    link.parent.mkdir(parents=True, exist_ok=True)
    tmp = link.parent / f".{link.name}.{uuid.uuid4().hex[:8]}.link"
    os.symlink(rel, tmp)
    os.replace(tmp, link)
    return link


def _resolves(host: str) -> bool:
    try:
        socket.gethostbyname(host)
        return True
    except OSError:
        return False


class TrainJob(submitit.helpers.Checkpointable):
    """What each task of a submitted job runs.

    Preemption and time limits: submitit's signal (USR2 by default, `--signal=USR2@90` on Slurm)
    is deferred (`checkpoint.Preemption`): the ranks agree at the next evaluation point, write a
    checkpoint there and stop; then submitit's own handler runs on rank 0 (it calls `checkpoint()`,
    the inherited one: the same job with the same arguments, and requeues it), and every other rank
    exits as submitit's handler makes rank 0 exit. The requeued job resumes from that checkpoint.
    """

    def __init__(self, config: RunConfig, run_dir: str) -> None:
        self.config, self.run_dir = config, run_dir

    def __call__(self) -> str:
        export_job_env()
        from prunex.train import train

        preemption = checkpoint.Preemption.install()
        try:
            return str(train(self.config, self.run_dir))
        except checkpoint.Preempted:
            if preemption is None:
                raise
            preemption.hand_over()  # rank 0: submitit requeues and exits; the others exit here
            sys.exit(-1)
        finally:
            if preemption is not None:
                preemption.uninstall()  # submitit's handler back in place (a no-op after hand_over)


def export_job_env() -> None:
    """In a task: `TorchDistributedEnvironment().export()` (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT,
    ...) plus, on a mini cluster node, the launch node's address as MASTER_ADDR (node names do not
    resolve) and the node's interface for gloo. `CUDA_VISIBLE_DEVICES` is left as the scheduler set
    it (submitit's export would overwrite it with the local rank, the wrong GPU where the scheduler
    already bound one per task); `prunex.device` picks among the GPUs the task sees."""
    env = export_torch_env(set_cuda_visible_devices=False)
    if not _resolves(env.master_addr) and os.environ.get("SLURM_LAUNCH_NODE_IPADDR"):
        os.environ["MASTER_ADDR"] = os.environ["SLURM_LAUNCH_NODE_IPADDR"]


def preflight(config: RunConfig) -> Path:
    """Checks that need the file system, before anything is launched; links the asking experiment
    to the run (`link_run`). Returns the run dir."""
    from prunex.data import DatasetMissing, load_dataset

    run_dir = run_dir_for(config)
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        probe = run_dir / ".write-test"
        probe.write_text("ok")
        probe.unlink()
    except OSError as e:
        raise ConfigError(f"results path {config.results!r} is not writable: {e.strerror}") from None
    link_run(config)
    try:
        load_dataset(config.dataset, config.data_root, train=False)  # also makes digits once
    except DatasetMissing as e:
        raise ConfigError(str(e)) from None
    return run_dir


def prepare(config: RunConfig) -> Path | None:
    """Preflight a run; None if already done. An unfinished earlier attempt with a complete checkpoint
    set is resumed by the trainer; without one its leftovers are cleared."""
    run_dir = preflight(config)
    if (run_dir / DONE).exists():
        return None
    if checkpoint.newest_complete(run_dir) is not None:
        return run_dir
    for stale in ("parts", "steps.parquet", "comm.parquet"):
        path = run_dir / stale
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    return run_dir


def launch(config: RunConfig, slurm: SlurmOptions | None = None, *, echo: bool = True) -> Path:
    """Submit one run, show rank 0's progress, wait for it; returns the run directory.

    A finished run (DONE marker) is not run again. Raises `RuntimeError` with the job's error when
    any task fails.
    """
    run_dir = prepare(config)
    if run_dir is None:
        if echo:
            print(f"[{config.name}] already done: {run_dir_for(config)}", flush=True)
        return run_dir_for(config)
    executor = make_executor(config, run_dir / "submitit", slurm)
    with submission(f"run {config.name}"):
        job = executor.submit(TrainJob(config, str(run_dir)))
    if echo:
        print(
            f"[{config.name}] submitted job {job.job_id} ({config.executor}, {config.nodes}x"
            f"{config.procs_per_node}) -> {run_dir}",
            flush=True,
        )
    _follow(job, echo)
    wait(job, config, run_dir)
    return run_dir


def wait(job: submitit.Job, config: RunConfig, run_dir: Path) -> None:
    """Wait for a job; a failed task is a RuntimeError naming the run, the job and its logs.

    The message names the ranks that ended without a result first (killed, out of memory, preempted
    without requeue: the likely cause), then the first error a surviving rank raised.
    """
    try:
        job.results()
    except Exception as e:  # submitit re-raises the task's exception with its traceback text
        dead = _ranks_without_result(job, config.world_size)
        cause = ""
        if dead:
            ranks = ", ".join(map(str, dead))
            cause = f"rank{'s' if len(dead) > 1 else ''} {ranks} ended without a result (killed, out of memory or "
            cause += "lost its node: see its log); "
        raise RuntimeError(
            f"run {config.name} failed (job {job.job_id}, logs in {run_dir / 'submitit'}): {cause}{_last_line(str(e))}"
        ) from e


def _ranks_without_result(job: submitit.Job, tasks: int) -> list[int]:
    """Tasks of a finished job that wrote no result file (submitit writes one on success and on error)."""
    if tasks <= 1:
        return []
    return [r for r in range(tasks) if not job.task(r).paths.result_pickle.exists()]


def submit_array(
    configs: list[RunConfig], slurm: SlurmOptions | None = None
) -> list[tuple[RunConfig, Path, submitit.Job]]:
    """Submit runs that share their executor parameters as one Slurm job array (`executor.batch()`).

    Finished runs are skipped. Returns (config, run dir, job) for each submitted run.
    """
    pending = [(c, d) for c in configs if (d := prepare(c)) is not None]
    if not pending:
        return []
    folder = Path(pending[0][0].results).resolve() / pending[0][0].experiment / "submitit"
    executor = make_executor(pending[0][0], folder, slurm)
    executor.update_parameters(name=f"prunex-{pending[0][0].experiment}")
    with submission(f"the {len(pending)} runs of {pending[0][0].experiment}"), executor.batch():
        jobs = [executor.submit(TrainJob(c, str(d))) for c, d in pending]
    return [(c, d, j) for (c, d), j in zip(pending, jobs, strict=True)]


def _last_line(text: str) -> str:
    """The exception line of a task's traceback (submitit's error text holds the whole log)."""
    lines = [re.sub(r"^\[rank\d+\]:\s*", "", ln).strip() for ln in text.strip().splitlines()]
    for line in reversed(lines):
        if re.match(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit)\b", line):
            return line
    return next((ln for ln in reversed(lines) if ln), text)


def _follow(job: submitit.Job, echo: bool, poll_s: float = 1.0) -> None:
    """Echo rank 0's progress lines while the job runs (the debug executor runs in the foreground)."""
    if isinstance(job, submitit.DebugJob):
        return
    offset = 0
    while True:
        finished = job.done()
        path = Path(job.paths.stdout)
        if echo and path.exists():
            with open(path, errors="replace") as f:
                f.seek(offset)
                chunk = f.read()
                offset = f.tell()
            for line in chunk.splitlines():
                if line.startswith("["):
                    print(line, flush=True)
        if finished:
            return
        time.sleep(poll_s)


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use python -m prunex.run")
