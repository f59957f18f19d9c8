"""A local job's tasks forked from its controller after it loaded the job's module (`prunex.cluster.local_fork`).
That a forked run trains bitwise as a spawned one is checked in `tests/test_resume.py` (its uninterrupted run
spawns its tasks, the killed and resumed one forks them)."""

from __future__ import annotations

import inspect
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from submitit.core.utils import JobPaths

from prunex.cluster import jobs, local_fork
from prunex.training.config import RunConfig

PROBE_MODULE = "colorsys"  # a module neither submitit nor a task imports: loaded in a task only if preloaded


def _task_view() -> dict[str, object]:
    """What a task sees of how it started (runs in the job's tasks)."""
    return {
        "start": os.environ.get(local_fork.TASK_START_ENV),
        "rank": os.environ.get("SUBMITIT_LOCAL_GLOBALID"),
        "probe_loaded": PROBE_MODULE in sys.modules,
        "parent": os.getppid(),
        "pgid": os.getpgrp(),
    }


def _fail() -> None:
    raise ValueError("the task's own error")


@pytest.fixture(autouse=True)
def _this_module_importable_in_the_tasks(monkeypatch: pytest.MonkeyPatch) -> None:
    """The jobs below run this module's functions: their tasks unpickle them by this module's name."""
    here = str(Path(__file__).resolve().parent)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [here, os.environ.get("PYTHONPATH")])))


def _run_job(folder: Path, fn: object, preload: str, tasks: int = 2) -> object:
    executor = jobs.LocalGroupExecutor(folder=str(folder))
    executor.update_parameters(tasks_per_node=tasks, timeout_min=2, preload=preload)
    return executor.submit(fn)


def test_the_tasks_are_forked_from_the_controller_that_loaded_the_module(tmp_path: Path) -> None:
    job = _run_job(tmp_path / "forked", _task_view, preload=PROBE_MODULE)
    views = job.results()
    assert [v["rank"] for v in views] == ["0", "1"]
    # loaded once, in the controller: each task found it there
    assert all(v["start"] == PROBE_MODULE and v["probe_loaded"] for v in views)
    # children of the controller (the job id) and in its process group, as submitit's own tasks are
    assert all(v["parent"] == int(job.job_id) and v["pgid"] == int(job.job_id) for v in views)
    # each task writes its own logs, submitit's lines among them
    for k in (0, 1):
        assert "Job completed successfully" in JobPaths(job.paths.folder, job.job_id, k).stdout.read_text()


def test_a_module_that_does_not_load_spawns_the_tasks_as_before(tmp_path: Path) -> None:
    views = _run_job(tmp_path / "spawned", _task_view, preload="no_such_module_here").results()
    assert [(v["start"], v["probe_loaded"]) for v in views] == [(None, False), (None, False)]
    views = _run_job(tmp_path / "plain", _task_view, preload="").results()
    assert [(v["start"], v["probe_loaded"]) for v in views] == [(None, False), (None, False)]


def test_a_forked_task_s_exception_reaches_the_launcher_and_its_log(tmp_path: Path) -> None:
    job = _run_job(tmp_path / "failing", _fail, preload=PROBE_MODULE, tasks=1)
    with pytest.raises(Exception, match="the task's own error"):
        job.result()
    log = job.paths.stderr.read_text()
    assert "ValueError: the task's own error" in log and log.count("Traceback") >= 1


FORKED_TASK_PROBE = """
import os, signal, sys, time
from prunex.cluster.local_fork import ForkedTask

def wait(task):
    deadline = time.monotonic() + 30
    while task.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    return task.returncode

pid = os.fork()
if pid == 0:
    os._exit(7)
print(wait(ForkedTask(pid)))
pid = os.fork()
if pid == 0:
    time.sleep(60)
    os._exit(0)
task = ForkedTask(pid)
task.send_signal(signal.SIGTERM)
print(wait(task))
task.send_signal(signal.SIGTERM)  # after the end: nothing, no error
print("ok")
"""


def test_a_forked_child_reports_its_exit_status_and_signal_as_popen_does() -> None:
    # in a fresh interpreter: a fork of the pytest worker would carry its threads and signal handlers
    proc = subprocess.run([sys.executable, "-c", FORKED_TASK_PROBE], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["7", str(-signal.SIGTERM), "ok"]


def test_exit_statuses_are_an_interpreter_s(capsys: pytest.CaptureFixture) -> None:
    assert [local_fork._exit_status(c) for c in (None, 0, 3, -1, 256)] == [0, 0, 3, 255, 0]
    assert local_fork._exit_status("a message") == 1 and capsys.readouterr().err == "a message\n"


def test_only_a_run_on_the_cpu_is_forked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    module = "prunex.training.train"
    monkeypatch.setattr(local_fork, "GPU_DEVICE_FILES", (str(tmp_path / "nvidia0"),))
    monkeypatch.delenv(local_fork.FORK_ENV, raising=False)
    cpu, auto, cuda = (RunConfig(method="ddp", executor="local", device=d) for d in ("cpu", "auto", "cuda"))
    assert [local_fork.preload_for([c], module) for c in (cpu, auto, cuda)] == [module, module, ""]
    assert local_fork.preload_for([cpu, auto], module) == module
    assert local_fork.preload_for([cpu, cuda], module) == ""  # one submission: all its runs forked, or none
    (tmp_path / "nvidia0").touch()  # a GPU on this machine: `auto` may use it
    assert [local_fork.preload_for([c], module) for c in (cpu, auto, cuda)] == [module, "", ""]
    monkeypatch.setenv(local_fork.FORK_ENV, "0")
    assert local_fork.preload_for([cpu], module) == ""


def test_the_module_a_controller_loads_is_the_one_its_task_imports() -> None:
    from prunex.cluster.task import ExportJob, TrainJob

    assert f"from {TrainJob.module} import train" in inspect.getsource(TrainJob._run)
    assert f"from {ExportJob.module} import finish_export" in inspect.getsource(ExportJob.__call__)
