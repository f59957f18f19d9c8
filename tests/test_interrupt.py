"""What SIGINT and SIGTERM do inside a launcher (prunex.cluster.interrupt), with real signals to this process."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from prunex.cluster import interrupt


def test_sigterm_is_an_interrupt_once_and_its_exit_code_says_which(monkeypatch) -> None:
    monkeypatch.setattr(interrupt.STATE, "last", float("-inf"))
    with interrupt.interruptible():
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler raises as soon as the signal is delivered
        os.kill(os.getpid(), signal.SIGINT)  # the same Ctrl-C arriving twice (terminal and run_all.sh)
        time.sleep(0.1)  # ...is not a second interrupt
    assert interrupt.last_signal() == signal.SIGTERM
    assert interrupt.Interrupted("x", interrupt.last_signal()).exit_code == 143
    assert signal.getsignal(signal.SIGTERM) is not interrupt._handler  # restored afterwards


def test_deferred_signals_arrive_when_the_block_ends(monkeypatch) -> None:
    monkeypatch.setattr(interrupt.STATE, "last", float("-inf"))
    done = False
    other = threading.Thread(target=time.sleep, args=(1.0,), daemon=True)  # the kernel may pick any thread
    other.start()
    with interrupt.interruptible(), pytest.raises(KeyboardInterrupt):
        with interrupt.deferred():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.2)
            done = True  # the block was not torn apart
    assert done and interrupt.last_signal() == signal.SIGINT


def test_resume_hint() -> None:
    assert interrupt.resume_hint(None).startswith("interrupted before its first checkpoint")
    assert interrupt.resume_hint(2) == (
        "interrupted after iteration 3; run the same command again to resume from the checkpoint"
    )


def test_ctrl_c_again_while_cancelling_still_cancels_every_job(monkeypatch, tmp_path, capsys) -> None:
    """Review (2026-11-28): the launcher sent one scancel per job outside the block that takes a second Ctrl-C,
    so a Ctrl-C arriving while the cancels went out (80 array elements on the paper profile) left the remaining
    jobs running. The cancels are now sent under `deferred()`: every job gets its own, then the launcher stops
    waiting. Real signals to this process; the Slurm calls are the fakes (no Slurm here)."""
    from prunex.cluster import jobs
    from prunex.cluster import launch as launcher
    from prunex.training.config import RunConfig

    monkeypatch.setattr(interrupt.STATE, "last", float("-inf"))
    monkeypatch.setattr(interrupt, "DEBOUNCE_S", 0.0)
    cancelled: list[str] = []

    def cancel(record: jobs.JobRecord) -> None:
        if len(cancelled) == 3:
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C again, in the middle of the cancels
            time.sleep(0.05)
        cancelled.append(record.job_id)

    monkeypatch.setattr(jobs, "cancel", cancel)
    monkeypatch.setattr(jobs, "wait_gone", lambda *a, **k: pytest.fail("waited after the second Ctrl-C"))
    monkeypatch.setattr(jobs, "kill", lambda record: None)
    entries = [
        launcher.Submitted(
            RunConfig(method="ddp", name=f"r{i}"),
            tmp_path / f"r{i}",
            None,
            jobs.JobRecord("slurm", f"7_{i}", str(tmp_path), 1, "h", 1, "now"),
        )
        for i in range(8)
    ]
    with interrupt.interruptible():
        result = launcher.interrupted(entries, entries, detach=False)
    assert cancelled == [f"7_{i}" for i in range(8)]
    assert isinstance(result, interrupt.Interrupted)
    assert "not waiting for Slurm job(s) 7_0 7_1" in capsys.readouterr().err
