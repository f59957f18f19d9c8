"""Who may write where: one driver per results directory, one job per run.

**Results directory** (`results_lock`): two drivers (`python -m experiments.*`, `./run_all.sh`)
pointed at the same results directory would submit the same runs twice; the second finds
`<results>/.prunex.lock`, says who holds it, and exits. The owner is the driver's process, or,
when the driver runs as a Slurm job (`./run_all.sh --submit-driver`), that job. An owner that is
gone (a dead process on this host, a Slurm job squeue no longer lists) is taken over with a note
(takeovers one at a time, flock on `<results>/.prunex.lock.takeover`, so two launchers that find the same gone
owner do not both end up holding the lock); the lock file appears with its owner already in it; the lock is
re-entrant for its own process.

**Run** (`claim_run`, `record_job`, `job_owns_run`): a run directory is written by one job, the job
that trains it, not by whoever launched it. `<run>/job.json` names that job (executor, job id,
submitit folder, host, submission time, `prunex.cluster.jobs.JobRecord`); `<run>/jobs.jsonl` keeps one line
per job ever submitted for the run. A launcher first claims the run (job.json in state
`submitting`), submits, then records the job id. A later launcher of the same run:

- finds a live Slurm job: it reattaches to it (waits and reports; nothing is submitted);
- finds a live local or debug job whose launcher is alive: it refuses, naming the job and how to
  stop it (a local job belongs to its launcher's terminal); a local job whose launcher died ends
  within moments (`prunex.cluster.jobs.die_with_parent`) and is waited for;
- finds the job gone (squeue no longer lists it, its process group is empty): takes the run over.

The job checks the record too (`job_owns_run`, first thing in every task): a job that is not the
run's recorded job refuses to train, so two jobs never write one run directory at once.
The claim itself is serialised with flock on `<run>/.job.lock` where the file system supports it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from prunex.cluster import jobs
from prunex.cluster.preflight import unwritable_results
from prunex.training.log import write_json

LOCK_NAME = ".prunex.lock"
JOB_FILE = "job.json"
JOB_HISTORY = "jobs.jsonl"
CLAIM_MUTEX = ".job.lock"
TAKEOVER_MUTEX = ".prunex.lock.takeover"  # in the results directory: one takeover of a gone owner's lock at a time
SUBMITTING = "submitting"
SUBMITTING_STALE_S = 600.0  # a claim from another host older than this is a launcher that died
DEAD_LAUNCHER_WAIT_S = 30.0  # a local job of a dead launcher is gone within moments; wait this long


class LockHeld(RuntimeError):
    """Another live process or job writes here; the message says who and what to do."""


# -- the results directory (one driver) ------------------------------------------------------------
def _owner_alive(owner: dict, me: dict) -> bool | None:
    """Whether the lock's owner lives: True/False, None when it cannot be told from here."""
    if owner.get("slurm_job_id"):
        try:
            return jobs.slurm_states([str(owner["slurm_job_id"])]).get(str(owner["slurm_job_id"])) in (
                jobs.SLURM_LIVE_STATES
            )
        except jobs.SlurmUnavailable:
            return None
    if owner.get("host") == me["host"] and isinstance(owner.get("pid"), int):
        return jobs.pid_alive(owner["pid"])
    return None


def _read_owner(path: Path) -> dict:
    try:
        owner = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return owner if isinstance(owner, dict) else {}


def _create_with(path: Path, content: dict) -> bool:
    """Create `path` holding `content` as JSON, in one step: a reader never finds it empty or half written (the
    file is written aside, then hard-linked into place, which fails if `path` exists). False if it exists. On a
    file system without hard links: an exclusive create, then the write."""
    tmp = path.with_name(f"{path.name}.{socket.gethostname()}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(content))
    try:
        os.link(tmp, path)
        return True
    except FileExistsError:
        return False
    except OSError as e:
        if e.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOSYS, errno.EXDEV, errno.EMLINK):
            raise
    finally:
        tmp.unlink(missing_ok=True)
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as f:
        json.dump(content, f)
    return True


@contextlib.contextmanager
def results_lock(results: str | Path) -> Iterator[None]:
    """Hold the results directory's lock for the duration of the block."""
    results = Path(results)
    try:
        results.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise unwritable_results(results, e) from None
    path = results / LOCK_NAME
    me = {"pid": os.getpid(), "host": socket.gethostname(), "started": jobs.now()}
    in_slurm_driver = os.environ.get("PRUNEX_DRIVER_JOB") and os.environ.get("SLURM_JOB_ID")
    if in_slurm_driver:
        me["slurm_job_id"] = os.environ["SLURM_JOB_ID"]
    for _ in range(2):
        try:
            created = _create_with(path, me)
        except OSError as e:
            raise unwritable_results(results, e) from None
        if not created:
            owner = _read_owner(path)
            if owner.get("pid") == me["pid"] and owner.get("host") == me["host"]:
                yield  # re-entrant: this process already holds it
                return
            alive = _owner_alive(owner, me)
            if alive is False:
                who = f"Slurm job {owner['slurm_job_id']}" if owner.get("slurm_job_id") else f"process {owner['pid']}"
                # Two launchers may find the same gone owner: the takeovers are serialised, and each removes the
                # lock only if it still names that owner. Else the second would remove the lock the first had just
                # taken and both would hold it.
                with _mutex(results, name=TAKEOVER_MUTEX):
                    if _read_owner(path) == owner:
                        print(f"note: taking over the lock of {who}, which is gone, in {results}", file=sys.stderr)
                        path.unlink(missing_ok=True)
                continue
            who = f"pid {owner.get('pid')} on {owner.get('host')}"
            if owner.get("slurm_job_id"):
                who += f" (Slurm job {owner['slurm_job_id']})"
            hint = "" if alive else f"; if that process is gone, remove {path}"
            raise LockHeld(
                f"results directory {results} is in use by {who} since {owner.get('started')}; "
                f"wait for it to finish or use another --results{hint}"
            ) from None
        try:
            yield
        finally:
            path.unlink(missing_ok=True)
        return
    raise LockHeld(f"could not take the lock {path}")


# -- a run (one job) -------------------------------------------------------------------------------
@dataclass(frozen=True)
class RunClaim:
    """The outcome of `claim_run`: either this launcher owns the run (`attach` is None) and must
    submit and `record_job`, or a live Slurm job owns it and `attach` is its record."""

    run_dir: Path
    attach: jobs.JobRecord | None = None
    previous: jobs.JobRecord | None = None  # the gone job whose run this claim takes over


@contextlib.contextmanager
def _mutex(run_dir: Path, timeout_s: float = 60.0, name: str = CLAIM_MUTEX) -> Iterator[None]:
    try:
        fd = os.open(run_dir / name, os.O_CREAT | os.O_RDWR, 0o644)
    except OSError as e:
        raise unwritable_results(run_dir, e) from None
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise LockHeld(f"another launcher keeps {run_dir / name} locked") from None
                time.sleep(0.1)
            except OSError as e:
                if e.errno in (errno.ENOLCK, errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
                    break  # no flock on this file system: the claim is best effort
                raise
        yield
    finally:
        os.close(fd)


def read_job_file(run_dir: Path) -> dict | None:
    try:
        obj = json.loads((run_dir / JOB_FILE).read_text())
    except (OSError, ValueError):
        return None
    return obj if isinstance(obj, dict) else None


def current_job(run_dir: str | Path) -> jobs.JobRecord | None:
    """The job recorded as the run's owner (None: none recorded, or a claim still submitting)."""
    obj = read_job_file(Path(run_dir))
    if not obj or obj.get("state") == SUBMITTING:
        return None
    try:
        return jobs.JobRecord.from_dict(obj)
    except (KeyError, TypeError, ValueError):
        return None


def _write_claim(run_dir: Path) -> None:
    write_json(
        run_dir / JOB_FILE,
        {"state": SUBMITTING, "pid": os.getpid(), "host": socket.gethostname(), "since": time.time()},
    )


def _age_s(obj: dict) -> float:
    try:
        return time.time() - float(obj.get("since", 0))
    except (TypeError, ValueError):
        return float("inf")


def claim_run(run_dir: str | Path, name: str) -> RunClaim:
    """Claim `run_dir` for a new job, or find the live Slurm job to reattach to (module docstring).
    Raises LockHeld when a live job owned by another launcher, or one that cannot be checked from
    here, holds the run."""
    run_dir = Path(run_dir)
    deadline = time.monotonic() + DEAD_LAUNCHER_WAIT_S
    while True:
        with _mutex(run_dir):
            obj = read_job_file(run_dir)
            if obj is None:
                _write_claim(run_dir)
                return RunClaim(run_dir)
            if obj.get("state") == SUBMITTING:
                mine = obj.get("pid") == os.getpid() and obj.get("host") == socket.gethostname()
                here = obj.get("host") == socket.gethostname()
                live = jobs.pid_alive(int(obj.get("pid", -1))) if here else _age_s(obj) < SUBMITTING_STALE_S
                if live and not mine:
                    raise LockHeld(
                        f"run {name} is being submitted by pid {obj.get('pid')} on {obj.get('host')}; "
                        "wait a few seconds and run the same command again"
                    )
                _write_claim(run_dir)
                return RunClaim(run_dir)
            try:
                record = jobs.JobRecord.from_dict(obj)
            except (KeyError, TypeError, ValueError):
                print(f"note: {run_dir / JOB_FILE} is unreadable; taking the run over", file=sys.stderr)
                _write_claim(run_dir)
                return RunClaim(run_dir)
            mine = record.launcher_pid == os.getpid() and record.host == socket.gethostname()
            if mine and record.executor == "debug":  # this process's own foreground run, which has ended
                _write_claim(run_dir)
                return RunClaim(run_dir, previous=record)
            try:
                st = jobs.state(record)
            except jobs.SlurmUnavailable as e:
                raise LockHeld(
                    f"run {name} is owned by Slurm job {record.job_id}, and Slurm does not answer ({e})"
                ) from None
            if st == jobs.GONE:
                _write_claim(run_dir)
                return RunClaim(run_dir, previous=record)
            if st == jobs.UNKNOWN:
                raise LockHeld(
                    f"run {name} is owned by {record.describe()}, which cannot be checked from "
                    f"{socket.gethostname()}; run the command there, or, if that job is gone, "
                    f"remove {run_dir / JOB_FILE}"
                )
            if record.executor == "slurm":
                return RunClaim(run_dir, attach=record)
            if record.executor == "debug" or (jobs.pid_alive(record.launcher_pid) and not mine):
                where = "in the foreground of" if record.executor == "debug" else "by a job of"
                raise LockHeld(
                    f"run {name} is being trained {where} pid {record.launcher_pid} ({record.describe()}); "
                    f"wait for it, or stop it with Ctrl-C in its terminal (kill -INT {record.launcher_pid})"
                )
        # a local job whose launcher died, or this process's own after a cancel: it is ending (outside the mutex)
        if time.monotonic() > deadline:
            raise LockHeld(
                f"run {name} is still trained by {record.describe()} although its launcher is gone; "
                f"stop it with: {jobs.describe_cancel_command(record)}"
            )
        print(f"note: waiting for {record.describe()} to end before taking the run over", file=sys.stderr, flush=True)
        jobs.wait_gone(record, min(5.0, max(deadline - time.monotonic(), 0.1)))


def record_job(run_dir: str | Path, record: jobs.JobRecord, previous: jobs.JobRecord | None = None) -> None:
    """The claim is now this job's: write job.json and append the job to jobs.jsonl."""
    run_dir = Path(run_dir)
    write_json(run_dir / JOB_FILE, record.to_dict() | {"state": "submitted"})
    line = record.to_dict() | ({"replaces": previous.job_id} if previous else {})
    fd = os.open(run_dir / JOB_HISTORY, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(line, sort_keys=True) + "\n").encode())
    finally:
        os.close(fd)


def release_claim(run_dir: str | Path) -> None:
    """Drop this launcher's claim after a submission that failed (nothing was started)."""
    run_dir = Path(run_dir)
    with _mutex(run_dir):
        obj = read_job_file(run_dir)
        if obj and obj.get("state") == SUBMITTING and obj.get("pid") == os.getpid():
            (run_dir / JOB_FILE).unlink(missing_ok=True)


def job_history(run_dir: str | Path) -> list[dict]:
    """Every job submitted for the run, oldest first."""
    path = Path(run_dir) / JOB_HISTORY
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


class NotTheOwner(RuntimeError):
    """A job started for a run that another job owns."""


def job_owns_run(run_dir: str | Path, job_id: str, timeout_s: float = 120.0) -> None:
    """In a task, before anything is written: the run's record must name this job. A record still
    `submitting` is the launcher about to write this job's id, and is waited for."""
    run_dir = Path(run_dir)
    deadline = time.monotonic() + timeout_s
    while True:
        obj = read_job_file(run_dir) or {}
        if obj.get("state") != SUBMITTING:
            break
        if time.monotonic() > deadline:
            raise NotTheOwner(f"{run_dir / JOB_FILE} still names no job after {timeout_s:.0f} s; not training")
        time.sleep(0.2)
    owner = str(obj.get("job_id"))
    if owner != str(job_id):
        raise NotTheOwner(
            f"run {run_dir} belongs to job {owner} ({run_dir / JOB_FILE}), not to this job {job_id}: not training"
        )
