"""A local job's tasks forked from its controller, which has loaded the job's module once.

submitit's local Controller starts every task as a fresh interpreter (`python -u -m submitit.core._submit
FOLDER`), and each of them then imports torch, torchvision (which imports torch._dynamo) and the trainer: on a
2-core Intel Xeon VM, 2.8 s of CPU each with the collector paused (`prunex.startup`), before the task does
anything of its own. `ForkingController` imports the job's module (`TrainJob.module`, `ExportJob.module`) once,
in the job's controller, with the collector paused and then frozen, and forks the tasks from it. A job of P
tasks then pays for one import instead of P, and a requeued attempt (`--checkpoint-every-min`, preemption) for
none. Nothing else changes: a task is still a child process of the controller, in the job's process group, with
its own log files, its own environment variables (`SUBMITIT_LOCAL_*`), submitit's own `process_job` and its
result pickle, and the exit status of that code.

When the tasks are forked (`preload_for`): on Linux, for a run on the CPU (`--device cpu`, or `auto` on a
machine without GPU device files), unless `PRUNEX_LOCAL_FORK=0`. A run that may use a GPU is spawned as
before: forking after CUDA is initialised breaks the child's CUDA, and no GPU machine has checked that nothing
the trainer imports initialises it. If the module fails to load in the controller, the tasks are spawned too,
and each reports the failure in its own log, where it always was. Which way a run's tasks started is in its
`meta.json` (`task_start`).

What a forked task inherits that a fresh interpreter would have made anew, and what is done about it:
- Python's `random` and numpy's global generator: reseeded from the OS in each task, as a fresh interpreter
  seeds them. torch's default generator is untouched in the controller, so it starts from torch's fixed seed
  in every task as it did. The string hash seed is the controller's for all tasks (a fresh interpreter draws
  one per process); nothing the ranks must agree on may depend on it in either case.
- The controller's signal handlers: blocked across the fork, then SIGTERM and SIGHUP back to their defaults
  and SIGINT to Python's (KeyboardInterrupt) before they are unblocked, so none of the controller's ever
  runs in a task; submitit's `process_job` installs its own, as in a fresh task. A signal that came in
  between is delivered then, to the task's handler.
- Threads: numpy's BLAS pool and pyarrow's jemalloc start threads at import, and the child has only the
  forking thread. Both libraries register fork handlers; PyTorch's DataLoader forks its workers from processes
  that have far more running (OpenMP, gloo). Python 3.12 warns about forking a process with threads; that
  warning is silenced here, for this fork only.
- Its command line and /proc environ: the controller's (`python -m prunex.cluster.jobs controller FOLDER`),
  whatever it changes in its environment; the process name (`ps -o comm`) says which task it is
  (`task_name`: prunex-task0, prunex-task1, ...).
- The exit: the task's atexit handlers run and its streams are flushed, then `os._exit` with submitit's exit
  status; the controller's stack is never unwound in the child.
"""

from __future__ import annotations

import atexit
import ctypes
import importlib
import io
import os
import random
import signal
import sys
import traceback
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, NoReturn

from submitit.core import utils
from submitit.local.local import Controller

from prunex.startup import collector_paused

if TYPE_CHECKING:
    from prunex.training.config import RunConfig

PRELOAD_ENV = "PRUNEX_LOCAL_PRELOAD"  # the module the controller loads before forking (LocalGroupExecutor sets it)
FORK_ENV = "PRUNEX_LOCAL_FORK"  # "0": every task its own interpreter, as submitit starts them
TASK_START_ENV = "PRUNEX_TASK_START"  # set in a forked task: meta.json `task_start`
SUBMIT_MODULE = "submitit.core._submit"  # what submitit's local command runs in each task
GPU_DEVICE_FILES = ("/dev/nvidia0", "/dev/kfd")  # an NVIDIA GPU, an AMD GPU (ROCm's kernel driver)
# what the controller handles (SIGTERM forwarded to the tasks, SIGHUP kills the group) and Python's SIGINT: blocked
# across each fork, then in the child back to what a fresh interpreter has
RESET_SIGNALS = {signal.SIGTERM, signal.SIGHUP, signal.SIGINT}
TASK_NAME = "prunex-task{k}"  # a forked task's process name (ps -o comm, top; its command line is the controller's)
_PR_SET_NAME = 15  # linux/prctl.h


def _gpu_device_present() -> bool:
    return any(os.path.exists(path) for path in GPU_DEVICE_FILES)


def preload_for(configs: Sequence[RunConfig], module: str) -> str:
    """The module the controllers of one submission's local jobs (`configs`, its runs) load before forking the
    tasks, or "" for tasks spawned as fresh interpreters: forked only if every run may be (module docstring)."""
    if not sys.platform.startswith("linux") or os.environ.get(FORK_ENV, "1") == "0":
        return ""
    gpu = _gpu_device_present()
    on_cpu = all(c.device == "cpu" or (c.device == "auto" and not gpu) for c in configs)
    return module if on_cpu else ""


def task_start() -> str:
    """How this task's process started, for meta.json: forked from its local job's controller, or its own
    interpreter (a Slurm task, a spawned local task)."""
    module = os.environ.get(TASK_START_ENV)
    return f"forked from the local job's controller after it loaded {module}" if module else "its own interpreter"


class ForkedTask:
    """The part of `subprocess.Popen` that submitit's Controller uses (`poll`, `send_signal`), for a forked child."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid == self.pid:
                self.returncode = os.waitstatus_to_exitcode(status)  # -N for signal N, as Popen's
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass


class ForkingController(Controller):
    """submitit's local Controller (signals, time limit, requeue, log files, clean-up), whose tasks are forked
    after `module` is loaded here once. Falls back to spawning them when the module does not load or the
    command is not submitit's task command."""

    def __init__(self, folder: Path, module: str) -> None:
        super().__init__(folder)
        self.module = module
        self.loaded: bool | None = None  # None: not tried yet

    def _load(self) -> bool:
        if self.loaded is None:
            try:
                with collector_paused(freeze=True):  # as a task's own import (prunex.cluster.task._loading)
                    importlib.import_module(self.module)
                self.loaded = True
            except Exception:  # noqa: BLE001 - each task imports it again and reports it in its own log
                self.loaded = False
        return self.loaded

    def start_tasks(self) -> None:
        command = self.command
        if command[-3:-1] != ["-m", SUBMIT_MODULE] or not self._load():
            super().start_tasks()
            return
        # as submitit's Controller.start_tasks, with fork instead of Popen
        self.folder.mkdir(exist_ok=True)
        paths = [utils.JobPaths(self.folder, self.pid, k) for k in range(self.ntasks)]
        self.stdouts = [p.stdout.open("a") for p in paths]
        self.stderrs = self.stdouts if self.stderr_to_stdout else [p.stderr.open("a") for p in paths]
        for k in range(self.ntasks):
            sys.stdout.flush()
            sys.stderr.flush()  # nothing of the controller's buffers is written again by the child
            # the controller's handlers must not run in the child: blocked until the child has put its own
            blocked = signal.pthread_sigmask(signal.SIG_BLOCK, RESET_SIGNALS)
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", DeprecationWarning)  # Python >= 3.12: "fork() ... multi-threaded"
                    pid = os.fork()
                if pid == 0:
                    _run_task(command[-1], k, self.pid, self.module, self.stdouts[k], self.stderrs[k], blocked)
                self.tasks.append(ForkedTask(pid))  # type: ignore[arg-type]  # what the Controller calls of a Popen
            finally:  # a SIGTERM that came meanwhile is forwarded to this task too
                signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


def task_name(k: int) -> str:
    """The process name of the job's forked task `k`: its command line and its /proc environ are those the
    controller started with, so `ps` and /proc tell the tasks apart by this name."""
    return TASK_NAME.format(k=k)


def _set_process_name(name: str) -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_NAME, name.encode()[:15], 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _stream(fd: int, errors: str) -> io.TextIOWrapper:
    """An unbuffered text stream on `fd`, as `python -u` makes sys.stdout and sys.stderr."""
    return io.TextIOWrapper(io.FileIO(fd, "w", closefd=False), encoding="utf-8", errors=errors, write_through=True)


def _exit_status(code: Any) -> int:
    """The exit status `sys.exit(code)` gives an interpreter."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def _run_task(
    folder: str, k: int, job_id: str, module: str, stdout: IO[str], stderr: IO[str], mask: set[signal.Signals]
) -> NoReturn:
    """In the forked child: become task `k` of the job (what `python -u -m submitit.core._submit FOLDER` with
    submitit's task environment would be), run it, and exit with its status without returning. `mask`: the
    signal mask to restore once the controller's handlers are replaced (they were blocked across the fork)."""
    status = 1
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        _set_process_name(task_name(k))
        os.dup2(stdout.fileno(), 1)
        os.dup2(stderr.fileno(), 2)
        sys.stdout = sys.__stdout__ = _stream(1, "strict")
        sys.stderr = sys.__stderr__ = _stream(2, "backslashreplace")
        os.environ.update(SUBMITIT_LOCAL_LOCALID=str(k), SUBMITIT_LOCAL_GLOBALID=str(k), SUBMITIT_LOCAL_JOB_ID=job_id)
        os.environ[TASK_START_ENV] = module
        random.seed()
        if "numpy.random" in sys.modules:
            sys.modules["numpy.random"].seed()
        from submitit.core.submission import process_job  # lazy: the child's own entry point, as in a fresh task

        process_job(folder)
        status = 0
    except SystemExit as e:  # submitit's requeue, a rank's sys.exit
        status = _exit_status(e.code)
    except KeyboardInterrupt:  # end as an interpreter killed by SIGINT does
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    except BaseException:  # noqa: BLE001 - printed as an interpreter prints an uncaught exception
        traceback.print_exc()
    try:
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(status)
