"""A submitted training job seen from outside: is it alive, how to cancel it, how to get it back.

A run directory records the job that trains it (`prunex.cluster.lock`); this module answers questions about
such a job from any process, including a launcher started after the one that submitted it:

- `slurm`: the job id (an array element is `ARRAYID_INDEX`). Alive while `squeue` lists it in a
  state that can still run (pending, running, completing, suspended, requeued); cancelled with
  `scancel`; `rebuild` gives submitit's `SlurmJob(folder, job_id)` back, so a new launcher can
  wait for it and read its results.
- `local`: submitit's LocalExecutor, except that its controller starts in a session of its own
  (`LocalGroupExecutor`): the controller's pid is the job id and the process group of the whole
  job (controller and ranks). Alive while a process of that group is (zombies aside); cancelled by
  signalling the group. The terminal's Ctrl-C reaches only the launcher, which decides what
  happens (`prunex.cluster.interrupt`). A local job never outlives its launcher: the controller asks the
  kernel for a signal when its parent (the launcher) dies and then kills its whole process group,
  and every training rank asks for SIGKILL when its own parent (the controller) dies
  (`die_with_parent`), so even `kill -9` of the launcher or of the controller ends the job.
  submitit's SIGTERM bypass is for Slurm preemption; local ranks take SIGTERM's default action.
- `debug`: the job runs inside its launcher; it is alive while that process is.

Liveness of a local or debug job can be judged only on its own host; elsewhere it is unknown.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import submitit
from submitit.local.local import LocalExecutor, LocalJob

from prunex.cluster import local_fork

ALIVE, GONE, UNKNOWN = "alive", "gone", "unknown"
# squeue states in which a job may still run or write (slurm squeue(1), JOB STATE CODES)
SLURM_LIVE_STATES = {
    "PENDING",
    "CONFIGURING",
    "RUNNING",
    "COMPLETING",
    "SUSPENDED",
    "REQUEUED",
    "REQUEUE_FED",
    "REQUEUE_HOLD",
    "RESIZING",
    "SIGNALING",
    "STAGE_OUT",
    "STOPPED",
    "RESV_DEL_HOLD",
    "SPECIAL_EXIT",
    "POWER_UP_NODE",
    "PREEMPTED",  # requeued next, where the job asks for it (Checkpointable); else purged after MinJobAge
}
# Reasons a job pends for (slurm.schedmd.com/job_reason_codes.html) that the queue's progress does not clear: the
# request exceeds what the partition, account or QOS gives one job, or names what does not exist. Most last until
# the job is changed; some until an administrator changes a limit or brings nodes back, so the job is not cancelled.
SLURM_STUCK_REASONS = {
    "PartitionNodeLimit": "more nodes than its partition gives a job (or its nodes are down)",
    "PartitionConfig": "what its partition cannot give (nodes, or CPUs, memory or GPUs per node)",
    "PartitionTimeLimit": "a longer time limit than its partition allows",
    "BadConstraints": "constraints no node satisfies",
    "AccountNotAllowed": "an account its partition does not allow",
    "InvalidAccount": "an account Slurm does not know",
    "InvalidQOS": "a QOS Slurm does not know",
}
_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def stuck_reason(reason: str) -> str:
    """What a pending job's squeue reason says, where the queue's progress alone does not clear it; "" otherwise
    (Resources, Priority, Dependency, an aggregate limit of the group, none yet)."""
    if reason in SLURM_STUCK_REASONS:
        return SLURM_STUCK_REASONS[reason]
    # a limit on one job (QOSMaxWallDurationPerJobLimit, AssocMaxNodesPerJobLimit, QOSMaxCpuPerNode...), not one on
    # what a user's or an account's jobs use together (QOSMaxCpuPerUserLimit, AssocGrp*), which running jobs clear
    if reason.startswith(("QOSMax", "AssocMax")) and ("PerJob" in reason or "PerNode" in reason):
        return "more than its account or QOS gives one job"
    return ""


class SlurmUnavailable(RuntimeError):
    """Slurm did not answer (squeue failed): nothing can be said about a Slurm job."""


@dataclass(frozen=True)
class JobRecord:
    """What a run directory records about the job training it (`<run>/job.json`)."""

    executor: str  # debug, local or slurm
    job_id: str  # Slurm job id, the local job's process group, or the launcher's pid (debug)
    folder: str  # submitit's folder of the job (its logs and result files)
    tasks: int
    host: str  # where it was submitted (a local or debug job runs there)
    launcher_pid: int
    submitted: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> JobRecord:
        return cls(
            executor=str(d["executor"]),
            job_id=str(d["job_id"]),
            folder=str(d["folder"]),
            tasks=int(d["tasks"]),
            host=str(d["host"]),
            launcher_pid=int(d["launcher_pid"]),
            submitted=str(d["submitted"]),
        )

    def describe(self) -> str:
        where = "" if self.executor == "slurm" else f" on {self.host}"
        return f"{self.executor} job {self.job_id}{where} (submitted {self.submitted} by pid {self.launcher_pid})"


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def record_of(job: submitit.Job, executor: str, tasks: int) -> JobRecord:
    """The record of a job this process just submitted (a debug job is this process)."""
    job_id = str(os.getpid()) if executor == "debug" else str(job.job_id)
    return JobRecord(executor, job_id, str(job.paths.folder), tasks, socket.gethostname(), os.getpid(), now())


# -- processes -------------------------------------------------------------------------------------
def pid_alive(pid: int) -> bool:
    """A live, non-zombie process of this host."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True  # no /proc: kill(0) is all there is


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of process group `pgid` on this host. Zombies are skipped: a
    container's pid 1 may never reap the controller of a job whose launcher died."""
    proc = Path("/proc")
    if not proc.is_dir():
        try:
            os.killpg(pgid, 0)
            return [pgid]
        except ProcessLookupError:
            return []
        except PermissionError:
            return [pgid]
    members = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:  # state, ppid, pgrp
            members.append(int(entry.name))
    return members


def _set_pdeathsig(sig: int) -> bool:
    """Ask the kernel to send `sig` to this process when its parent dies (Linux only)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def die_with_parent(expected_parent: int | None = None, sig: int = signal.SIGKILL) -> None:
    """Have `sig` sent to this process as soon as its parent dies: prctl(PR_SET_PDEATHSIG) on Linux,
    else a thread polling the parent pid every 0.5 s. If the parent is already gone (it died before
    the request was made), send it now."""
    parent = expected_parent if expected_parent is not None else os.getppid()
    if not _set_pdeathsig(sig):

        def watch() -> None:
            while os.getppid() == parent:
                time.sleep(0.5)
            os.kill(os.getpid(), sig)

        threading.Thread(target=watch, name="die-with-parent", daemon=True).start()
    if os.getppid() != parent:
        os.kill(os.getpid(), sig)


# -- the local executor ----------------------------------------------------------------------------
class LocalGroupExecutor(LocalExecutor):
    """submitit's LocalExecutor whose controller runs `python -m prunex.cluster.jobs controller FOLDER`: a
    new session (process group = job id), dying with its launcher, then submitit's own Controller, or, given
    the parameter `preload` (a module name, `prunex.cluster.local_fork.preload_for`), one that loads that
    module once and forks the tasks from it (`prunex.cluster.local_fork.ForkingController`)."""

    def _submit_command(self, command: str) -> LocalJob:
        if self.parameters.get("setup"):
            raise ValueError("LocalGroupExecutor does not run `setup` commands; export the environment instead")
        ntasks = self.parameters.get("tasks_per_node", 1)
        # the environment submitit's start_controller (submitit 1.5.4, local/local.py) gives the controller,
        # but for the GPUs: submitit sets CUDA_VISIBLE_DEVICES to the first `gpus_per_node` GPUs, which hides
        # every GPU of the machine from a job that asks for none (measured on an H100: `--executor local
        # --device cuda` failed with CUDA_VISIBLE_DEVICES=''). A prunex job asks for none (the launcher does not
        # import torch to count them): it sees the GPUs its launcher sees, and each rank takes the one of its
        # local rank (prunex.training.device). Set only when the parameters ask for GPUs.
        env = dict(os.environ)
        n_gpus = self.parameters.get("gpus_per_node", 0)
        if n_gpus or self.parameters.get("visible_gpus", ()):
            visible = self.parameters.get("visible_gpus", ())
            gpus = range(n_gpus) if visible == () else visible[:n_gpus]
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(k) for k in gpus)
        env.update(
            SUBMITIT_LOCAL_NTASKS=str(ntasks),
            SUBMITIT_LOCAL_COMMAND=command,
            SUBMITIT_LOCAL_TIMEOUT_S=str(int(60 * self.parameters.get("timeout_min", 2.0))),
            SUBMITIT_LOCAL_SIGNAL_DELAY_S=str(int(self.parameters.get("signal_delay_s", 30))),
            SUBMITIT_LOCAL_NODEID="0",
            SUBMITIT_LOCAL_JOB_NUM_NODES="1",
            SUBMITIT_STDERR_TO_STDOUT="1" if self.parameters.get("stderr_to_stdout", False) else "",
            SUBMITIT_EXECUTOR="local",
            SUBMITIT_LOCAL_WITH_SHELL="",
            PRUNEX_LAUNCHER_PID=str(os.getpid()),
            # submitit would derive the rendezvous port from the job id (a seeded random port), which can
            # be one that another process on this machine already listens on (EADDRINUSE on rank 0); a
            # port the kernel just handed out as free is far less likely to be taken
            MASTER_PORT=str(free_port()),
        )
        # the module its controller loads once before forking the tasks, "" to spawn them (prunex.cluster.local_fork)
        env[local_fork.PRELOAD_ENV] = self.parameters.get("preload", "")
        cmd = [sys.executable, "-m", "prunex.cluster.jobs", "controller", str(self.folder)]
        process = subprocess.Popen(cmd, env=env, start_new_session=True)
        return LocalJob(folder=self.folder, job_id=str(process.pid), process=process, tasks=list(range(ntasks)))


def free_port() -> int:
    """A TCP port no process listens on now (the kernel's choice for port 0)."""
    with socket.socket() as sock:
        sock.bind(("", 0))
        return sock.getsockname()[1]


def _kill_own_group(signum: int, frame: object) -> None:
    os.killpg(os.getpgrp(), signal.SIGKILL)


def _controller_main(folder: str) -> None:
    """The local job's controller: when the launcher dies (SIGHUP, asked of the kernel; submitit's
    Controller uses SIGTERM and USR2), the whole process group, every task whatever it runs, is
    killed; then submitit's Controller runs the tasks (forked after loading the job's module, where the
    executor asked for it: `prunex.cluster.local_fork`)."""
    from submitit.local.local import Controller

    signal.signal(signal.SIGHUP, _kill_own_group)
    die_with_parent(int(os.environ["PRUNEX_LAUNCHER_PID"]), signal.SIGHUP)
    preload = os.environ.pop(local_fork.PRELOAD_ENV, "")  # the controller's, not the tasks'
    controller = local_fork.ForkingController(Path(folder), preload) if preload else Controller(Path(folder))
    controller.run()


@contextlib.contextmanager
def outside_job_env() -> Iterator[None]:
    """Submit as if from outside any job: a driver running as a Slurm job (`--submit-driver`) must
    not pass its own SLURM_*/SUBMITIT_* variables on to the jobs it submits (submitit's
    `helpers.clean_env`, keeping SLURM_CONF, which names the cluster)."""
    prefixes = ("SLURM_", "SLURMD_", "SRUN_", "SBATCH_", "SUBMITIT_")
    hidden = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith(prefixes) and k != "SLURM_CONF"}
    try:
        yield
    finally:
        os.environ.update(hidden)


# -- questions about a recorded job ----------------------------------------------------------------
def slurm_states(
    job_ids: Iterable[str], attempts: int = 3, retry_s: float = 2.0, reasons: dict[str, str] | None = None
) -> dict[str, str]:
    """squeue's state of each job id it still lists (array elements one by one). A failing squeue
    is asked again (`attempts` times, `retry_s` apart: a busy controller, an expired credential);
    then SlurmUnavailable. Unknown ids (long finished) are simply absent. `reasons`: filled with the
    reason each pending job waits for (squeue's %r)."""
    ids = sorted(set(job_ids))
    if not ids:
        return {}
    cmd = ["squeue", "-h", "-r", "-j", ",".join(ids), "-o", "%i|%T|%r"]
    for attempt in range(attempts):
        try:
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as e:
            error = f"squeue failed: {e}"
        else:
            if res.returncode == 0:
                break
            if "Invalid job id" in res.stderr:  # every id is unknown (long finished)
                return {} if len(ids) == 1 else _slurm_states_one_by_one(ids, reasons)
            error = f"squeue failed: {(res.stderr.strip().splitlines() or [f'exit code {res.returncode}'])[-1]}"
        if attempt + 1 == attempts:
            raise SlurmUnavailable(error)
        time.sleep(retry_s)
    out = {}
    for line in res.stdout.splitlines():
        job, _, rest = line.strip().partition("|")
        state, _, reason = rest.partition("|")
        if job:
            out[job] = state.strip()
            if reasons is not None and out[job] == "PENDING":
                reasons[job] = reason.strip()
    return out


def _slurm_states_one_by_one(ids: list[str], reasons: dict[str, str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for i in ids:
        out |= slurm_states([i], reasons=reasons)
    return out


def state(record: JobRecord, slurm: dict[str, str] | None = None) -> str:
    """ALIVE, GONE or UNKNOWN (a local or debug job of another host). `slurm`: states from one
    `slurm_states` call for many records."""
    if record.executor == "slurm":
        states = slurm if slurm is not None else slurm_states([record.job_id])
        return ALIVE if states.get(record.job_id) in SLURM_LIVE_STATES else GONE
    if record.host != socket.gethostname():
        return UNKNOWN
    if record.executor == "local":
        return ALIVE if group_members(int(record.job_id)) else GONE
    return ALIVE if pid_alive(int(record.job_id)) else GONE


def cancel(record: JobRecord) -> None:
    """Ask the job to end: SIGTERM to a local job's process group, scancel of a Slurm job."""
    if record.executor == "slurm":
        subprocess.run(["scancel", record.job_id], capture_output=True, text=True, timeout=60, check=False)
    elif record.executor == "local":
        try:
            os.killpg(int(record.job_id), signal.SIGTERM)
        except ProcessLookupError:
            pass


def kill(record: JobRecord) -> None:
    """End a local job now (SIGKILL to its process group)."""
    if record.executor == "local":
        try:
            os.killpg(int(record.job_id), signal.SIGKILL)
        except ProcessLookupError:
            pass


def wait_gone(record: JobRecord, timeout_s: float, poll_s: float = 0.25, job: submitit.Job | None = None) -> bool:
    """Wait until the job is gone; False on timeout. `job`: the launcher's own handle of a local
    job, polled so that its controller is reaped (not left a zombie)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if job is not None and isinstance(job, LocalJob):
            job.done()
        if state(record) != ALIVE:
            return True
        time.sleep(poll_s)
    return False


# How long a Slurm job that squeue no longer lists may take to show how it ended: every task's result file
# (a shared file system's attribute cache can hide a new file for a while) or sacct's final state (slurmdbd
# records a job shortly after slurmctld lets it go). Past it the job is over with neither. On a cluster
# without job accounting, sacct never knows a job, and submitit's `Job.wait`, which waits while sacct's
# state is UNKNOWN, would wait for ever for a job that died without writing results (a rank SIGKILLed by
# the out-of-memory killer, a node lost).
GONE_GRACE_S = 120.0


def await_end(job: submitit.Job, tasks: int, grace_s: float = GONE_GRACE_S, poll_s: float = 5.0) -> bool:
    """Wait until submitit can tell how the Slurm job `job` of `tasks` tasks ended: every task's result file
    exists, or sacct gives a final state. True then; False once squeue has not listed the job in a live
    state for `grace_s` and neither is there (`job.results()` would then wait for ever). While squeue lists it,
    or cannot answer, this waits: the job's own time limit bounds that."""
    gone_since = None
    while True:
        if all(job.task(t).paths.result_pickle.exists() for t in range(tasks)):
            return True
        if job.watcher.is_done(job.job_id, mode="standard"):  # sacct, at submitit's own polling rate
            return True
        try:
            listed = slurm_states([job.job_id]).get(job.job_id) in SLURM_LIVE_STATES
        except SlurmUnavailable:
            listed = True  # cannot tell: the job may still run
        now = time.monotonic()
        if listed:
            gone_since = None
        elif gone_since is None:
            gone_since = now
        elif now - gone_since >= grace_s:
            return False
        time.sleep(poll_s)


def rebuild(record: JobRecord) -> submitit.Job:
    """submitit's handle on a recorded Slurm job (another launcher submitted it)."""
    if record.executor != "slurm":
        raise ValueError(f"only a Slurm job can be reattached, not a {record.executor} job")
    return submitit.SlurmJob(folder=record.folder, job_id=record.job_id, tasks=tuple(range(record.tasks)))


def describe_cancel_command(record: JobRecord) -> str:
    if record.executor == "slurm":
        return f"scancel {record.job_id}"
    return f"kill -TERM -- -{record.job_id}"


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "controller":
        _controller_main(sys.argv[2])
    else:
        sys.exit(
            "usage: python -m prunex.cluster.jobs controller FOLDER (started by LocalGroupExecutor); "
            f"got {sys.argv[1:]}"
        )
