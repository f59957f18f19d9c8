"""One clock per device for every time the logs hold: communication, compute, compression, iterations.

    python -c "import torch; from prunex.comm.clocks import timer_for; t = timer_for(torch.device('cpu')); \\
        s = t.start(); s.stop(); print(s.seconds)"

`timer_for(device)` is the only choice of clock; everything that times work calls `timer.start()`
where the measured work begins and `span.stop()` where it ends, and reads `span.seconds` later.

- **CPU** (`CPUTimer`): `time.perf_counter()` at `start()` and at `stop()`, exactly what the CPU
  path has always measured (work on the CPU is done when the call returns).
- **CUDA** (`CUDATimer`): a `torch.cuda.Event(enable_timing=True)` recorded on the *current* stream
  at `start()` and at `stop()`; `seconds` waits for the end event and returns the GPU time between
  the two (`Event.elapsed_time`). Kernels are asynchronous, so a host clock around a launch measures
  the launch, not the work; the events are ordered with the work on its stream, and they are read
  only after the step (the trainer drains the records after each iteration), so timing adds no
  synchronisation inside a step. A collective enqueued by NCCL on its own stream is bracketed
  correctly: NCCL's stream waits for the current stream before the collective, and a synchronous
  collective (or `Work.wait()`) makes the current stream wait for NCCL's before the end event.
  For DDP's asynchronous buckets the end event is recorded in the future's callback, whose current
  stream torch has made wait for the collective (`prunex.comm.Comm.record_future`).

Events of different streams on one device share the device clock, so a span may start on one stream
and end on another.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod

import torch


class Span(ABC):
    """One measured interval: `stop()` ends it, `seconds` reads it (after the work, on CUDA)."""

    @abstractmethod
    def stop(self) -> Span:
        """End the interval here (on CUDA: on the current stream)."""

    @property
    @abstractmethod
    def seconds(self) -> float:
        """Seconds between start and stop (on CUDA: waits for the end event on first read)."""

    @abstractmethod
    def interval(self, origin: Span) -> tuple[float, float]:
        """(start, stop) in seconds after ``origin``'s start, on the same clock (read after the work)."""


def exclusive_seconds(intervals: list[tuple[float, float]]) -> list[float]:
    """Per interval, the seconds it adds to the union of those that start before it (a sweep by start):
    the values sum to the length of the union, so spans in flight together (pipelined buckets, DDP's
    buckets when communication is the bottleneck) are not counted twice. Disjoint intervals keep their
    lengths."""
    out = [0.0] * len(intervals)
    covered = -float("inf")
    for i in sorted(range(len(intervals)), key=lambda j: intervals[j][0]):
        start, stop = intervals[i]
        out[i] = max(0.0, stop - max(start, covered))
        covered = max(covered, stop)
    return out


class Timer(ABC):
    device_type: str = ""

    @abstractmethod
    def start(self) -> Span:
        """Begin an interval here (on CUDA: on the current stream)."""


class _CPUSpan(Span):
    __slots__ = ("t0", "t1")

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.t1: float | None = None

    def stop(self) -> Span:
        self.t1 = time.perf_counter()
        return self

    @property
    def seconds(self) -> float:
        if self.t1 is None:
            raise RuntimeError("span read before stop()")
        return self.t1 - self.t0

    def interval(self, origin: Span) -> tuple[float, float]:
        assert isinstance(origin, _CPUSpan)
        return self.t0 - origin.t0, self.t0 - origin.t0 + self.seconds


def end_no_earlier(span: Span, t: float) -> None:
    """A stopped host span ends at `t` (a `time.perf_counter()` reading) if it ended before it: the alpha-beta
    model's transfer, busy from the launch for its delay, ends the collective it models (`Comm.all_reduce_start`)."""
    if not isinstance(span, _CPUSpan) or span.t1 is None:
        raise TypeError("end_no_earlier takes a stopped host span")
    span.t1 = max(span.t1, t)


class CPUTimer(Timer):
    """Host clock: `time.perf_counter()` at both ends."""

    device_type = "cpu"

    def start(self) -> Span:
        return _CPUSpan()


class _CUDASpan(Span):
    __slots__ = ("device", "begin", "end", "_seconds")

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.begin = torch.cuda.Event(enable_timing=True)
        self.end = torch.cuda.Event(enable_timing=True)
        self.begin.record(torch.cuda.current_stream(device))
        self._seconds: float | None = None

    def stop(self) -> Span:
        self.end.record(torch.cuda.current_stream(self.device))
        return self

    @property
    def seconds(self) -> float:
        if self._seconds is None:
            self.begin.synchronize()  # the two may sit on different streams (DDP's buckets)
            self.end.synchronize()
            self._seconds = self.begin.elapsed_time(self.end) / 1e3  # elapsed_time is in milliseconds
        return self._seconds

    def interval(self, origin: Span) -> tuple[float, float]:
        assert isinstance(origin, _CUDASpan)
        seconds = self.seconds  # waits for this span's events
        origin.begin.synchronize()
        start = origin.begin.elapsed_time(self.begin) / 1e3
        return start, start + seconds


class CUDATimer(Timer):
    """Device clock: CUDA events on the current stream, read after the work."""

    device_type = "cuda"

    def __init__(self, device: torch.device) -> None:
        self.device = device

    def start(self) -> Span:
        return _CUDASpan(self.device)


def timer_for(device: torch.device) -> Timer:
    """The clock of `device`: CUDA events on a GPU, the host's perf_counter otherwise."""
    return CUDATimer(device) if device.type == "cuda" else CPUTimer()
