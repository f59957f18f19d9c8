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
