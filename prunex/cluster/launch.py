"""Launching runs with submitit, one code path for a laptop and for Slurm: submit, reattach, wait.

`launch` (one run) and `submit` + `wait_all` (many, for the experiment driver) claim each run
before submitting (`prunex.cluster.lock.claim_run`): a run a live Slurm job trains is reattached to, never
submitted twice; a finished run is skipped; a run whose job is gone is submitted again and resumes
from its checkpoints. Runs of one shape and time limit go out as one job array (`submission_key`). A
refused `sbatch` is one line with Slurm's message (`prunex.cluster.slurm.SubmitError`). Waiting echoes
rank 0's progress and names the rank whose error caused a failure (`source_error`); a rank that failed
while the others still run ends its job after `FAILED_RANK_GRACE_S`. Ctrl-C/SIGTERM while waiting
cancels the jobs (or, with `detach`, leaves Slurm jobs running) and raises
`prunex.cluster.interrupt.Interrupted` with the line to print (`interrupted`).

Around it, each in its own module: the executor and its parameters (`prunex.cluster.executor`), where a
run lives (`prunex.cluster.rundir`), the refusals before anything is launched (`prunex.cluster.preflight`),
what each task of a job runs (`prunex.cluster.task.TrainJob`).
"""

from __future__ import annotations

import re
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import submitit
from submitit.core.utils import UncompletedJobError

from prunex.cluster import jobs, local_fork
from prunex.cluster.executor import make_executor, submitit_parameters
from prunex.cluster.interrupt import Interrupted, deferred, last_signal, resume_hint
from prunex.cluster.lock import RunClaim, claim_run, record_job, release_claim
from prunex.cluster.preflight import check_start, preflight
from prunex.cluster.rundir import run_dir_for
from prunex.cluster.slurm import SlurmOptions, SubmitError, submission
from prunex.cluster.task import ExportJob, TrainJob  # TrainJob: also what jobs pickled before it moved unpickle as
from prunex.training import checkpoint
from prunex.training.checkpoint import newest_common_iteration
from prunex.training.config import ConfigError, RunConfig
from prunex.training.log import DONE, TRAINED

T = TypeVar("T")

__all__ = [
    "CANCEL_WAIT_S",
    "FAILED_RANK_GRACE_S",
    "SubmitInterrupted",
    "Submitted",
    "by_submission",
    "failed_ranks",
    "interrupted",
    "launch",
    "source_error",
    "submission_key",
    "submit",
    "wait",
    "wait_all",
]


def _clear_leftovers(run_dir: Path) -> None:
    """Before a new job of a run this launcher owns: an earlier attempt with checkpoints is resumed by
    the trainer; without checkpoints its logs are cleared (never while a job owns the run)."""
    if checkpoint.newest_complete(run_dir) is not None:
        return
    shutil.rmtree(run_dir / "parts", ignore_errors=True)
    for stale in [*run_dir.glob("*.parquet"), run_dir / "final_model.pt", run_dir / TRAINED]:
        stale.unlink(missing_ok=True)


class SubmitInterrupted(KeyboardInterrupt):
    """Ctrl-C/SIGTERM during `submit`; `entries` are the jobs submitted (and recorded) before it."""

    def __init__(self, entries: list[Submitted]) -> None:
        super().__init__("interrupted while submitting")
        self.entries = entries


@dataclass
class Submitted:
    """A run and the job training it, or exporting it (`export`: its export job, `RunConfig.export_job`),
    submitted here or reattached to; `slurm` and `folder`: what the run was submitted with, which its export
    job is submitted with once training ends (`wait_all`)."""

    config: RunConfig
    run_dir: Path
    job: submitit.Job
    record: jobs.JobRecord
    attached: bool = False
    export: bool = False
    slurm: SlurmOptions | None = None
    folder: Path | None = None


@dataclass
class _Attempt:
    """A Slurm job's current attempt as the failed-rank watch sees it: a requeue starts a new one, and
    the result files the killed attempt left (or its dying processes still write) are not this one's."""

    ran: bool = False  # seen running at some look
    off_node: bool = False  # not running at the last look, after it had run (requeued, pending again)
    since: float = 0.0  # epoch seconds: result files last written at or before are an earlier attempt's

    def look(self, running: bool) -> bool:
        """Record one look at squeue; True when the results read so far must be forgotten (the job was
        requeued: it is pending again, or running again after that)."""
        forget = self.ran and (not running or self.off_node)
        if forget:
            self.since = time.time()
        self.off_node = self.ran and not running
        self.ran = self.ran or running
        return forget


def launch(config: RunConfig, slurm: SlurmOptions | None = None, *, echo: bool = True, detach: bool = False) -> Path:
    """Submit one run (or reattach to the live Slurm job training it), show rank 0's progress, wait
    for it; returns the run directory.

    A finished run (DONE marker) is not run again. Raises `RuntimeError` with the job's error when
    any task fails, `prunex.cluster.lock.LockHeld` when another launcher's live job trains the run, and
    `prunex.cluster.interrupt.Interrupted` after Ctrl-C/SIGTERM (the jobs cancelled, or left running with
    `detach`).
    """
    if detach and config.executor != "slurm":
        raise ConfigError("--detach leaves a Slurm job running; a local job ends with its launcher")
    check_start(config)
    run_dir = preflight(config)
    if (run_dir / DONE).exists():
        if echo:
            print(f"[{config.name}] already done: {run_dir}", flush=True)
        return run_dir
    try:
        entries = submit([config], slurm, run_dir / "submitit", echo=echo)
    except SubmitInterrupted as e:
        raise interrupted(e.entries, e.entries, detach) from None
    failures = wait_all(entries, echo=echo, detach=detach)
    if failures:
        raise RuntimeError(failures[0][1])
    return run_dir


def submit(
    configs: list[RunConfig],
    slurm: SlurmOptions | None,
    folder: Path | None = None,
    *,
    echo: bool = True,
    one_at_a_time: bool = False,
) -> list[Submitted]:
    """Claim every run (`prunex.cluster.lock.claim_run`) and submit a job for each run no live job trains;
    runs a live Slurm job trains are reattached to. Finished runs are skipped. Runs of one shape
    (nodes x tasks) and time limit go out as one Slurm job array (`executor.batch()`, `submission_key`)
    in `folder` (default: each run's own `submitit/`); `one_at_a_time`: an array runs one task at a time
    (sbatch --array=...%1, in submission order). A TRAINED run (`prunex.training.export_step`) gets its export
    job only. Returns one `Submitted` per unfinished run. A submission that fails part-way (sbatch refuses a later
    array) cancels the jobs this call submitted before it, which nobody would wait for, and says so."""
    out: list[Submitted] = []
    owned: list[tuple[RunConfig, Path, RunClaim]] = []
    try:
        for c in configs:
            run_dir = run_dir_for(c)
            check_start(c)
            if (run_dir / DONE).exists():
                continue
            claim = claim_run(run_dir, c.name)
            if claim.attach is not None:
                job = jobs.rebuild(claim.attach)
                export = c.export_job and claim.attach.tasks == 1  # the training job of an export_job run has more
                out.append(
                    Submitted(c, run_dir, job, claim.attach, attached=True, export=export, slurm=slurm, folder=folder)
                )
                if echo:
                    print(f"[{c.name}] reattached to {claim.attach.describe()}, which is still running", flush=True)
            else:
                owned.append((c, run_dir, claim))
        for export in (False, True):
            stage = [o for o in owned if (o[1] / TRAINED).exists() == export]
            for items in by_submission(stage, slurm, folder, config_of=lambda item: item[0], export=export):
                # an interrupt waits until the group's jobs are submitted, recorded and in `out`, then cancels them
                # (raised inside `_submit_group`, it would leave them running and their claims released)
                with deferred():
                    out += _submit_group(items, slurm, folder, echo, one_at_a_time, export=export)
                    owned = [o for o in owned if o not in items]
    except BaseException as e:
        for _, run_dir, _ in owned:  # claimed, never submitted
            release_claim(run_dir)
        if isinstance(e, KeyboardInterrupt):
            raise SubmitInterrupted(out) from None
        mine = [o for o in out if not o.attached]  # submitted by this call before the failure: nobody would wait
        if isinstance(e, Exception) and mine:
            for o in mine:
                jobs.cancel(o.record)  # the next launch submits them again (their records say the jobs are gone)
            what = f"cancelled the {len(mine)} job(s) it had submitted before: " + " ".join(
                dict.fromkeys(o.record.job_id for o in mine)
            )
            if isinstance(e, SubmitError):
                raise SubmitError(f"{e}; {what}") from None
            e.add_note(what)
        raise
    return out


def by_submission(
    items: list[T],
    slurm: SlurmOptions | None,
    folder: Path | None,
    config_of: Callable[[T], RunConfig] | None = None,
    *,
    export: bool = False,
) -> list[list[T]]:
    """`items` (runs, or anything `config_of` maps to its run's configuration) split into the job arrays they
    go out as (equal `submission_key`), each in order, in the order of their first run; without `folder` each
    run goes out in its own folder, so on its own. `export`: the arrays of their export jobs."""
    groups: dict[tuple, list[T]] = {}
    for item in items:
        c = config_of(item) if config_of is not None else item
        groups.setdefault(submission_key(c, slurm, folder or run_dir_for(c), export=export), []).append(item)
    return list(groups.values())


def submission_key(config: RunConfig, slurm: SlurmOptions | None, folder: Path | str, *, export: bool = False) -> tuple:
    """Runs with equal keys go out as one job array, which sbatch gives one set of parameters: the same
    executor, shape (nodes x tasks), submitit folder and time limit (`timeout_min`). A run whose
    estimate differs gets a submission of its own, so every run's limit is the one the dry run prints.
    `export`: the key of the run's export job (one node, one task, `RunConfig.export_job`)."""
    params = submitit_parameters(config, slurm, export=export)[0]
    return (config.executor, params["nodes"], params["tasks_per_node"], str(folder), params.get("timeout_min"), export)


def _submit_group(
    items: list[tuple[RunConfig, Path, RunClaim]],
    slurm: SlurmOptions | None,
    folder: Path | None,
    echo: bool,
    one_at_a_time: bool = False,
    *,
    export: bool = False,
) -> list[Submitted]:
    first = items[0][0]
    if not export:  # an export job's run keeps what its training wrote
        for _, run_dir, _ in items:
            _clear_leftovers(run_dir)
    executor = make_executor(first, folder or items[0][1] / "submitit", slurm, export=export)
    if first.executor == "local":  # the tasks forked from a controller that loaded their module once
        module = (ExportJob if export else TrainJob).module
        executor.update_parameters(preload=local_fork.preload_for([c for c, _, _ in items], module))
    if one_at_a_time and first.executor == "slurm":
        executor.update_parameters(slurm_array_parallelism=1)
    out = _submit_and_record(executor, items, echo, export)  # its callers defer an interrupt over it
    for e in out:
        e.slurm, e.folder = slurm, folder
    return out


def _submit_and_record(
    executor: submitit.Executor, items: list[tuple[RunConfig, Path, RunClaim]], echo: bool, export: bool = False
) -> list[Submitted]:
    first = items[0][0]
    task = ExportJob if export else TrainJob
    experiments = sorted({c.experiment for c, _, _ in items})
    if len(items) == 1:
        names = f"{'the export of ' if export else ''}run {first.name}"
    else:
        names = f"the {len(items)} {'exports' if export else 'runs'} of {', '.join(experiments)}"
    try:
        with jobs.outside_job_env(), submission(names):
            if len(items) == 1:
                submitted = [executor.submit(task(first, str(items[0][1])))]
            else:
                suffix = "-export" if export else ""
                executor.update_parameters(
                    name=f"prunex-{experiments[0] if len(experiments) == 1 else 'suite'}{suffix}"
                )
                with executor.batch():
                    submitted = [executor.submit(task(c, str(d))) for c, d, _ in items]
    except SubmitError:  # sbatch refused (a partition, an account, a limit): Slurm's message, one line
        raise
    except Exception as e:  # anything else submitit raised: one line, not a traceback
        raise RuntimeError(f"submitting {names} failed: {_last_line(str(e))}") from e
    out = []
    for (c, run_dir, claim), job in zip(items, submitted, strict=True):
        record = jobs.record_of(job, c.executor, 1 if export else c.world_size)
        record_job(run_dir, record, claim.previous)
        out.append(Submitted(c, run_dir, job, record, export=export))
        if echo:
            what = "export job" if export else "job"
            shape = "1x1" if export else f"{c.nodes}x{c.procs_per_node}"
            print(f"[{c.name}] submitted {what} {record.job_id} ({c.executor}, {shape}) -> {run_dir}", flush=True)
    return out


def wait(
    job: submitit.Job,
    config: RunConfig,
    run_dir: Path,
    stopped_after: list[int] | None = None,
    tasks: int | None = None,
    grace_s: float = jobs.GONE_GRACE_S,
) -> None:
    """Wait for a job; a failed task is a RuntimeError naming the run, the job and its logs.

    The message names the ranks that ended without a result first (killed, out of memory, preempted
    without requeue: the likely cause), then the first error a surviving rank raised. `stopped_after`:
    the ranks whose failure made the launcher stop the others (`wait_all`), named instead, unless all they
    raised was the loss of a peer (`PEER_LOSS`): then a rank without a result is still the cause (a rank
    SIGKILLed mid-run, whose peer's gloo error was written while that peer was slow to exit). `tasks`: the job's
    (default the run's world size; its export job has one). A Slurm job that squeue no longer lists, with a task
    that wrote no result and no final state in sacct after `grace_s` (a cluster without job accounting), has
    failed: submitit alone would wait for it for ever (`jobs.await_end`).
    """
    tasks = config.world_size if tasks is None else tasks  # an export job has one (RunConfig.export_job)
    try:
        if isinstance(job, submitit.SlurmJob) and not jobs.await_end(job, tasks, grace_s):
            raise UncompletedJobError(
                f"job {job.job_id} left the queue without a result from every task, and sacct does not know how it "
                f"ended after {grace_s:g} s (no job accounting on this cluster?)"
            )
        job.results()
    except Exception as e:  # submitit re-raises the task's exception with its traceback text
        dead = _ranks_without_result(job, tasks)
        source = source_error(job, tasks)
        lost_a_peer = source is not None and _is_peer_loss(source[1])  # no rank raised an error of its own
        cause = ""
        if dead and stopped_after and not lost_a_peer:
            failed = ", ".join(map(str, stopped_after))
            cause = f"rank{'s' if len(stopped_after) > 1 else ''} {failed} failed and the launcher stopped the others "
            cause += f"after {FAILED_RANK_GRACE_S:g} s; "
        elif dead:
            ranks = ", ".join(map(str, dead))
            cause = f"rank{'s' if len(dead) > 1 else ''} {ranks} ended without a result (killed, out of memory or "
            cause += "lost its node: see its log); "
        message = _last_line(str(e))
        if source is not None and not dead:  # the rank that failed first, not a peer that lost it
            rank, own, consequences = source
            message = f"rank {rank}: {own}"
            if consequences:
                message += f" (then rank{'s' if len(consequences) > 1 else ''} {', '.join(map(str, consequences))} "
                message += "failed as a consequence: a peer's lost connection or the agreed stop)"
        raise RuntimeError(
            f"run {config.name} failed (job {job.job_id}, logs in {Path(job.paths.folder)}): {cause}{message}"
        ) from e


# What a rank raises when a peer failed, not why the run failed: a lost connection (gloo, NCCL), a
# collective that timed out waiting for the peer, or the stop every rank agrees on (prunex.training.train).
PEER_LOSS = (
    "connection closed by peer",
    "connection reset by peer",
    "broken pipe",
    "connection refused",
    "timed out",
    "communicator was aborted",
    "stopped in iteration",
)


def _is_peer_loss(message: str) -> bool:
    return any(p in message.lower() for p in PEER_LOSS)


def source_error(job: submitit.Job, tasks: int) -> tuple[int, str, list[int]] | None:
    """(rank, its error's last line, the other failed ranks) for the rank whose error is its own, read from
    the tasks' result files: the first that is not a peer's loss (`PEER_LOSS`), else the lowest failed
    rank; None when no task recorded an error (issue 29: a full disk or a corrupt checkpoint on rank 1
    was reported as rank 0's "Connection closed by peer")."""
    from submitit.core.utils import pickle_load

    errors: dict[int, str] = {}
    for r in range(tasks):
        try:
            outcome, payload = pickle_load(job.task(r).paths.result_pickle)[:2]
        except Exception:  # no result file (killed), or one being written
            continue
        if outcome == "error":
            errors[r] = _last_line(str(payload))
    if not errors:
        return None
    own = [r for r, m in errors.items() if not _is_peer_loss(m)]
    rank = own[0] if own else min(errors)
    return rank, errors[rank], sorted(set(errors) - {rank})


# A rank that raised (its result file says "error") while the others still run: they usually fail on
# their own at their next collective within seconds; one that waits for a peer that never came (a
# rendezvous that failed on rank 0) would wait for the whole collective timeout (300 s by default).
# After this grace the launcher ends the job (local: its process group; Slurm: scancel).
FAILED_RANK_GRACE_S = 15.0


def failed_ranks(job: submitit.Job, tasks: int, outcomes: dict[int, str], newer_than: float = 0.0) -> list[int]:
    """Tasks of a running multi-task job whose result file records an exception. `outcomes` (rank ->
    "success" or "error") remembers the result files already read, so each is read once; files last
    written at or before `newer_than` (epoch seconds) are an earlier attempt's and are skipped."""
    from submitit.core.utils import pickle_load

    for r in range(tasks):
        path = job.task(r).paths.result_pickle
        if r in outcomes or not path.exists():
            continue
        try:
            if path.stat().st_mtime <= newer_than:
                continue
        except OSError:
            continue
        try:
            outcomes[r] = pickle_load(path)[0]
        except Exception:  # being written: looked at again at the next poll
            continue
    return sorted(r for r, outcome in outcomes.items() if outcome == "error")


def _ranks_without_result(job: submitit.Job, tasks: int) -> list[int]:
    """Tasks of a finished job that wrote no result file (submitit writes one on success and on error)."""
    if tasks <= 1:
        return []
    return [r for r in range(tasks) if not job.task(r).paths.result_pickle.exists()]


# Lines of a task's log that are not its error: submitit's own log lines, rank 0's progress lines
# (`[run] iteration ...`, `_Tail`) and the heading and separators submitit puts around an error stream.
_NOT_AN_ERROR = re.compile(
    r"^(submitit (DEBUG|INFO|WARNING|ERROR|CRITICAL)\b|\[[^\]]+\] |-{4,}$|Error stream produced:$)"
)


def _last_line(text: str) -> str:
    """The exception line of a task's traceback (submitit's error text holds the whole log); where there is
    none, submitit's "has not produced any output (state: ...)" for a killed task (it quotes the task's whole
    error stream after it), else the last line that is not submitit's logging or a progress line (issue 29:
    such lines ended up in the launcher's one-line error)."""
    lines = [re.sub(r"^\[rank\d+\]:\s*", "", ln).strip() for ln in text.strip().splitlines()]
    for line in reversed(lines):
        if re.match(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit)\b", line):
            return line
    uncompleted = re.search(r"has not produced any output \(state: [^)\n]*\)", text)  # submitit's, for a killed task
    if uncompleted:
        return uncompleted.group(0)
    last = next((ln for ln in reversed(lines) if ln and not _NOT_AN_ERROR.match(ln)), "")
    return last or "no error message in its log"


class _Tail:
    """Rank 0's progress lines (`[run] ...`) of a job, as they are written."""

    def __init__(self, job: submitit.Job, from_end: bool) -> None:
        self.path = Path(job.paths.stdout)
        self.offset = self.path.stat().st_size if from_end and self.path.exists() else 0

    def lines(self) -> list[str]:
        if not self.path.exists():
            return []
        with open(self.path, errors="replace") as f:
            f.seek(self.offset)
            chunk = f.read()
            self.offset = f.tell()
        return [ln for ln in chunk.splitlines() if ln.startswith("[")]


def _finished(entry: Submitted, slurm: dict[str, str] | None) -> bool:
    """Whether the job has ended. A Slurm job: squeue no longer runs it (`slurm`: one squeue call
    for every job), or, when Slurm does not answer, every task wrote its result file."""
    if isinstance(entry.job, submitit.DebugJob):
        return True  # runs in the foreground when its results are asked for
    if entry.record.executor == "slurm":
        if slurm is not None:
            return jobs.state(entry.record, slurm) == jobs.GONE
        return all(entry.job.task(t).paths.result_pickle.exists() for t in range(entry.record.tasks))
    return entry.job.done()


def wait_all(
    entries: list[Submitted], *, echo: bool = True, detach: bool = False, poll_s: float = 1.0, slurm_poll_s: float = 5.0
) -> list[tuple[str, str]]:
    """Wait for every job, echoing rank 0's progress; returns (run name, error) for each failed run.

    Local and debug jobs are looked at every `poll_s`, Slurm jobs every `slurm_poll_s` (one squeue
    call for all of them; their log files are read then too, to spare a shared file system). A run whose
    training job ends TRAINED gets its export job here (`RunConfig.export_job`), which is then waited for too.
    Ctrl-C/SIGTERM (a KeyboardInterrupt, `prunex.cluster.interrupt`) cancels the jobs still running, or
    leaves Slurm jobs running with `detach`, and raises `Interrupted`. Any other exception in the
    launcher ends the local jobs it started (they die with their launcher process anyway).
    """
    entries, pending = list(entries), list(entries)
    runs = len({e.run_dir for e in entries})  # a run's export job, added on the way, is the same run
    failures: list[tuple[str, str]] = []
    tails = {id(e): _Tail(e.job, from_end=e.attached and len(entries) > 1) for e in pending}
    last_slurm, states, unavailable_since = float("-inf"), None, None
    reasons: dict[str, str] = {}  # a pending Slurm job's id -> why it waits (squeue's %r)
    told: set[tuple[str, str]] = set()  # (job id, reason) said once (`_say_if_stuck`)
    failed_since: dict[int, float] = {}  # id(entry) -> when a failed rank was first seen
    outcomes: dict[int, dict[int, str]] = {id(e): {} for e in pending}  # id(entry) -> result files read
    stopped: dict[int, list[int]] = {}  # id(entry) -> the failed ranks after which the job was ended
    attempts: dict[int, _Attempt] = {}  # id(entry) -> its Slurm job's current attempt
    try:
        while pending:
            slurm_pending = any(e.record.executor == "slurm" for e in pending)
            refresh = slurm_pending and time.monotonic() - last_slurm > slurm_poll_s
            if refresh:
                last_slurm = time.monotonic()
                try:
                    reasons.clear()
                    ids = (e.record.job_id for e in pending if e.record.executor == "slurm")
                    states = jobs.slurm_states(ids, reasons=reasons)
                    unavailable_since = None
                except jobs.SlurmUnavailable as err:  # keep waiting: result files still tell finished jobs
                    states = None
                    if unavailable_since is None or time.monotonic() - unavailable_since > 300:
                        print(f"note: {err}; still waiting for the jobs", file=sys.stderr, flush=True)
                        unavailable_since = time.monotonic()
            for e in list(pending):
                if e.record.executor == "slurm" and not refresh:
                    continue
                done = _finished(e, states)
                if echo:
                    for line in tails[id(e)].lines():
                        print(line, flush=True)
                if not done:
                    attempt = attempts.setdefault(id(e), _Attempt())
                    if e.record.executor == "slurm" and states is not None:
                        _say_if_stuck(e, reasons.get(e.record.job_id, ""), told)
                        running = states.get(e.record.job_id) == "RUNNING"
                        if attempt.look(running):
                            outcomes[id(e)].clear()
                            failed_since.pop(id(e), None)
                        if not running:
                            continue
                    _stop_after_failed_rank(e, outcomes[id(e)], failed_since, stopped, attempt.since)
                    continue
                pending.remove(e)
                if id(e) in stopped and e.record.executor == "local":
                    # the ranks it killed may still be exiting when the job's controller is done: gone before the
                    # launcher reports (a fault test found rank 1 of a stopped 1x2 job alive as launch returned)
                    jobs.wait_gone(e.record, CANCEL_WAIT_S["local"], job=e.job)
                if e.record.executor == "slurm" and not isinstance(e.job, submitit.DebugJob):
                    e.job.watcher.update()  # its final state now, not at submitit's next poll
                try:
                    wait(e.job, e.config, e.run_dir, stopped.get(id(e)), e.record.tasks)
                    # an interrupt while the export job is submitted waits until it is pending here, and so is
                    # cancelled with the rest (not left running, recorded but unwaited)
                    with deferred():
                        export = _export_after(e, echo)
                        if export is not None:
                            entries.append(export)
                            pending.append(export)
                            tails[id(export)] = _Tail(export.job, from_end=False)
                            outcomes[id(export)] = {}
                except RuntimeError as err:
                    failures.append((e.config.name, str(err)))
                    if runs > 1:
                        print(f"[{e.config.name}] FAILED: {err}", file=sys.stderr, flush=True)
                else:
                    if export is None and echo and runs > 1:
                        left = len({p.run_dir for p in pending})
                        print(f"[{e.config.name}] finished ({runs - left}/{runs})", flush=True)
            if pending:
                time.sleep(poll_s)
    except KeyboardInterrupt:
        raise interrupted(entries, pending, detach) from None
    except BaseException:
        for e in pending:
            if e.record.executor == "local":
                jobs.kill(e.record)
        raise
    return failures


def _say_if_stuck(e: Submitted, reason: str, told: set[tuple[str, str]]) -> None:
    """One note on stderr, once per job and reason, when its Slurm job pends for a reason the queue's progress does
    not clear (`jobs.stuck_reason`: it asks for more nodes than its partition gives a job, ...): before, the
    launcher waited in silence, for ever where nothing changes. The job is left queued (an administrator may
    change the limit, or bring nodes back); Ctrl-C cancels it, as always."""
    what, job = jobs.stuck_reason(reason), e.record.job_id
    if not what or (job, reason) in told:
        return
    told.add((job, reason))
    print(
        f"note: [{e.config.name}] Slurm job {job} pends with reason {reason}: it asks for {what}, and may never "
        f"start (scontrol show job {job} shows the request); Ctrl-C cancels it, or scancel {job}",
        file=sys.stderr,
        flush=True,
    )


def _export_after(e: Submitted, echo: bool) -> Submitted | None:
    """After a training job that ended well: the run's export job, submitted, when the run is TRAINED
    (`RunConfig.export_job`); None when there is nothing to export. A refused submission is a RuntimeError
    naming the run, which stays TRAINED (the next launch submits the export only)."""
    if e.export or (e.run_dir / DONE).exists() or not (e.config.export_job and (e.run_dir / TRAINED).exists()):
        return None
    if echo:
        print(f"[{e.config.name}] trained; its export goes out as a job of one task", flush=True)
    claim = claim_run(e.run_dir, e.config.name)
    if claim.attach is not None:  # another launcher's export job, already running
        job = jobs.rebuild(claim.attach)
        return Submitted(
            e.config, e.run_dir, job, claim.attach, attached=True, export=True, slurm=e.slurm, folder=e.folder
        )
    try:
        return _submit_group([(e.config, e.run_dir, claim)], e.slurm, e.folder, echo, export=True)[0]
    except (SubmitError, ConfigError) as err:
        release_claim(e.run_dir)
        raise RuntimeError(f"run {e.config.name} is trained, but its export job was not submitted: {err}") from err
    except BaseException:
        release_claim(e.run_dir)
        raise


def _stop_after_failed_rank(
    e: Submitted,
    outcomes: dict[int, str],
    failed_since: dict[int, float],
    stopped: dict[int, list[int]],
    newer_than: float = 0.0,
) -> None:
    """End a job one of whose ranks failed `FAILED_RANK_GRACE_S` ago while others still run (result files
    from before `newer_than`, a requeued job's killed attempt, do not count)."""
    if e.record.executor not in ("local", "slurm") or id(e) in stopped or e.record.tasks <= 1:
        return
    failed = failed_ranks(e.job, e.record.tasks, outcomes, newer_than)
    if not failed:
        return
    first = failed_since.setdefault(id(e), time.monotonic())
    if time.monotonic() - first < FAILED_RANK_GRACE_S:
        return
    stopped[id(e)] = failed
    which = ", ".join(map(str, failed))
    print(
        f"[{e.config.name}] rank{'s' if len(failed) > 1 else ''} {which} failed {FAILED_RANK_GRACE_S:g} s ago and the "
        f"others still run: ending job {e.record.job_id}",
        file=sys.stderr,
        flush=True,
    )
    if e.record.executor == "local":
        jobs.kill(e.record)
    else:
        jobs.cancel(e.record)


CANCEL_WAIT_S = {"local": 10.0, "slurm": 120.0}  # then a local job is killed; Slurm's KillWait applies


def interrupted(entries: list[Submitted], pending: list[Submitted], detach: bool) -> Interrupted:
    """Act on an interrupt: cancel (or, detached, leave) the pending jobs of `entries`; the message
    to print, as an `Interrupted` to raise."""
    signum = last_signal()
    if not entries:
        return Interrupted("interrupted before anything was submitted", signum)
    live = [e for e in pending if e.record.executor != "debug"]
    slurm_ids = " ".join(e.record.job_id for e in live if e.record.executor == "slurm")
    if detach and live:
        return Interrupted(
            f"detached: Slurm job{'s' if len(live) > 1 else ''} {slurm_ids} go{'' if len(live) > 1 else 'es'} on "
            f"running; run the same command again to reattach, or stop {'them' if len(live) > 1 else 'it'} with: "
            f"scancel {slurm_ids}",
            signum,
        )
    if live:
        what = ", ".join(e.record.describe() for e in live[:3]) + (
            f" and {len(live) - 3} more" if len(live) > 3 else ""
        )
        detach_hint = "; --detach leaves Slurm jobs running instead" if slurm_ids else ""
        print(
            f"interrupt: cancelling {what}; waiting until gone (Ctrl-C again to stop waiting){detach_hint}",
            file=sys.stderr,
            flush=True,
        )
        try:
            # every job gets its cancel (one scancel each): a Ctrl-C meanwhile is raised when they are all out, and
            # stops the waiting as one during it does
            with deferred():
                for e in live:
                    jobs.cancel(e.record)
            for e in live:
                if not jobs.wait_gone(e.record, CANCEL_WAIT_S[e.record.executor], job=e.job):
                    jobs.kill(e.record)
                    jobs.wait_gone(e.record, 5.0, job=e.job)
        except KeyboardInterrupt:
            for e in live:
                jobs.kill(e.record)  # local jobs end now; cancelled Slurm jobs end on their own
            if slurm_ids:
                print(f"interrupt: not waiting for Slurm job(s) {slurm_ids} to end (scancel sent)", file=sys.stderr)
    if len({e.run_dir for e in entries}) == 1:  # one run: its training job, or its export job after it
        e = (pending or entries)[-1]
        if e.export:
            return Interrupted(
                "interrupted while exporting; the run is trained: run the same command again to export it", signum
            )
        return Interrupted(resume_hint(newest_common_iteration(e.run_dir, e.config.world_size)), signum)
    names = ", ".join(e.config.name for e in pending[:4]) + (
        f" and {len(pending) - 4} more" if len(pending) > 4 else ""
    )
    return Interrupted(
        f"interrupted with {len(pending)} run(s) unfinished ({names}); run the same command again to resume from "
        "their checkpoints",
        signum,
    )


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use python -m prunex.run")
