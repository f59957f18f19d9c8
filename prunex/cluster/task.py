"""What each task of a submitted job runs, in the job's own processes: `TrainJob` (training), `ExportJob`
(a multi-task run's `--export`, a job of one task after training: `prunex.training.export_step`).

`TrainJob` checks that its job is the one the run directory records (`prunex.cluster.lock.job_owns_run`),
exports torch.distributed's env:// variables with `submitit.helpers.TorchDistributedEnvironment`
(`export_job_env`) and calls `prunex.training.train.train`. It never writes `CUDA_VISIBLE_DEVICES`: a
value the scheduler set (one GPU bound per task, or the node's GPUs) is kept, and
`prunex.training.device` picks the GPU among those the task sees. The launcher that submits it is
`prunex.cluster.launch`; a submitted job seen from outside is `prunex.cluster.jobs`.
"""

from __future__ import annotations

import contextlib
import faulthandler
import gc
import os
import signal
import socket
import sys

import submitit

from prunex.cluster import jobs
from prunex.cluster.lock import job_owns_run
from prunex.minicluster.helpers import export_torch_env
from prunex.startup import collector_paused
from prunex.training import checkpoint, stack_report
from prunex.training.config import RunConfig

# A rank that has not joined the others this fraction of the collective timeout after its task started prints
# every thread's Python stack to its log (stderr), once, and goes on (`TrainJob`). The ranks waiting for it fail
# at the full timeout saying the job's ranks did not all join and to read the logs
# (`prunex.training.device.rendezvous_store`); its log then says where it was (an import on a slow file system, a
# name lookup, ...). Half the timeout: printed before the launcher ends it. How: `prunex.training.stack_report`.
START_REPORT_FRACTION = 0.5


def _resolves(host: str) -> bool:
    try:
        socket.gethostbyname(host)
        return True
    except OSError:
        return False


def own_the_task(config: RunConfig, run_dir: str) -> None:
    """First thing in every task of a job (`TrainJob`, `ExportJob`): a local task ends with its launcher, and a job
    that is not the run's recorded one refuses to write it."""
    if config.executor == "local":
        # a local job ends with its launcher (prunex.cluster.jobs); SIGTERM ends a local rank (submitit
        # bypasses it for Slurm preemption, which does not exist here)
        jobs.die_with_parent(int(os.environ["SUBMITIT_LOCAL_JOB_ID"]))
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if config.executor != "debug":  # one job per run: this job must be the run's recorded one
        job_owns_run(run_dir, submitit.JobEnvironment().job_id)


class TrainJob(submitit.helpers.Checkpointable):
    """What each task of a submitted job runs.

    Preemption and time limits: submitit's signal (USR2 by default, `--signal=USR2@90` on Slurm)
    is deferred (`checkpoint.Preemption`): the ranks agree at the next evaluation point, write a
    checkpoint there and stop; then submitit's own handler runs on rank 0 (it calls `checkpoint()`,
    the inherited one: the same job with the same arguments, and requeues it), and every other rank
    exits as submitit's handler makes rank 0 exit. The requeued job resumes from that checkpoint.
    """

    module = "prunex.training.train"  # what `_run` imports: a local job's controller loads it before forking

    def __init__(self, config: RunConfig, run_dir: str) -> None:
        self.config, self.run_dir = config, run_dir

    def __call__(self) -> str:
        if self.config.executor == "debug":  # in the driver's own process, whose faulthandler is the driver's
            return self._run()
        faulthandler.enable()  # a fatal signal in native code (a kernel, NCCL) prints the Python stacks as well
        # cancelled by prunex.training.train.train once every rank has joined (START_REPORT_FRACTION)
        stack_report.report_after(START_REPORT_FRACTION * self.config.collective_timeout_s)
        try:
            return self._run()
        finally:
            stack_report.cancel()
            # The rank's work is done (logs, checkpoints and model written and closed; only submitit's result
            # file follows): the collector need not walk torch's and the trainer's millions of objects again as
            # the interpreter shuts down. On a 2-core EPYC that walk cost `python -c "import
            # prunex.training.train"` 1.2-2 s of its 7.3-8.7 s of user CPU (against os._exit or gc.freeze() at
            # its end), and a 1 x 2 DDP run's launcher and ranks 26.5-27.6 s against 22.4-23.3 s with this line;
            # atexit handlers, flushes and the exit status are unchanged.
            gc.freeze()

    def _run(self) -> str:
        own_the_task(self.config, self.run_dir)
        if self.config.executor == "slurm":
            # a port in the submitting shell's environment (sbatch exports it) would be every job's: two jobs
            # on one node would collide (EADDRINUSE); submitit derives one from the job id without it
            os.environ.pop("MASTER_PORT", None)
        driver_env = dict(os.environ) if self.config.executor == "debug" else None
        export_job_env()
        if self.config.executor == "debug":
            # one process, in the driver's own process: submitit's debug environment gives every job the same
            # port, which a previous in-process job's store (or anything else) may still hold (EADDRINUSE)
            os.environ["MASTER_PORT"] = str(jobs.free_port())
        with _loading(self.config):
            from prunex.training.train import train  # lazy: the whole trainer, loaded only when the job runs

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
            if driver_env is not None:  # the debug job's RANK, MASTER_PORT, ... must not leak into the driver's
                os.environ.clear()  # later submissions (sbatch exports the driver's environment)
                os.environ.update(driver_env)


def _loading(config: RunConfig) -> contextlib.AbstractContextManager[None]:
    """Around a task's lazy import of torch and the trainer: the collector paused, then frozen (`prunex.startup`),
    in the job's own fresh process; the debug executor runs the job in the driver's process, whose garbage a
    freeze would keep for good, so there the collector is only paused."""
    return collector_paused(freeze=config.executor != "debug")


def export_job_env() -> None:
    """In a task: `TorchDistributedEnvironment().export()` (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT,
    ...) plus, on a mini cluster node, the launch node's address as MASTER_ADDR (node names do not
    resolve) and the node's interface for gloo. `CUDA_VISIBLE_DEVICES` is left as the scheduler set
    it (submitit's export would overwrite it with the local rank, the wrong GPU where the scheduler
    already bound one per task); `prunex.training.device` picks among the GPUs the task sees."""
    env = export_torch_env(set_cuda_visible_devices=False)
    if not _resolves(env.master_addr) and os.environ.get("SLURM_LAUNCH_NODE_IPADDR"):
        os.environ["MASTER_ADDR"] = os.environ["SLURM_LAUNCH_NODE_IPADDR"]


class ExportJob:
    """The one task of a run's export job (`prunex.training.export_step`): the compact model and its
    inference bench of a TRAINED run, then DONE. It checks, as `TrainJob` does, that it is the run's recorded
    job; an interrupted or failed export is submitted again by the next launch (it has no checkpoint)."""

    module = "prunex.training.export_step"  # what `__call__` imports (TrainJob.module)

    def __init__(self, config: RunConfig, run_dir: str) -> None:
        self.config, self.run_dir = config, run_dir

    def __call__(self) -> str:
        own_the_task(self.config, self.run_dir)
        with _loading(self.config):
            from prunex.training.export_step import finish_export  # lazy: torch.export and the bench, in the job only

        try:
            return str(finish_export(self.config, self.run_dir))
        finally:
            if self.config.executor != "debug":
                gc.freeze()  # as TrainJob's: the collector's walk at exit is not worth its CPU
