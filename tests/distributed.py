"""Run a function in several real gloo processes (no mocks): the test harness for collectives.

`run_distributed(fn, world_size, *args)` spawns `world_size` processes, each with RANK,
WORLD_SIZE, LOCAL_RANK and MASTER_ADDR/PORT set and a gloo default group initialised, calls
`fn(rank, *args)`, and returns the list of return values in rank order. An exception in any
rank fails the call with that rank's traceback; the whole run is bounded by `timeout_s`.
"""

from __future__ import annotations

import os
import pickle
import socket
import traceback
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import torch.distributed as dist
import torch.multiprocessing as mp


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank: int, world: int, port: int, fn: Callable, args: tuple, queue: Any, timeout_s: float) -> None:
    os.environ.update(
        RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world),
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
    )  # fmt: skip
    import torch

    torch.set_num_threads(1)
    try:
        dist.init_process_group("gloo", rank=rank, world_size=world, timeout=timedelta(seconds=timeout_s))
        result = fn(rank, *args)
        queue.put((rank, "ok", pickle.dumps(result)))
    except BaseException:
        queue.put((rank, "error", traceback.format_exc()))
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def run_distributed(fn: Callable, world_size: int, *args: Any, timeout_s: float = 120.0) -> list[Any]:
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    port = free_port()
    procs = mp.start_processes(
        _worker, args=(world_size, port, fn, args, queue, timeout_s / 2), nprocs=world_size,
        join=False, start_method="spawn",
    )  # fmt: skip
    import time

    deadline = time.monotonic() + timeout_s
    while not procs.join(timeout=max(0.1, min(1.0, deadline - time.monotonic()))):
        if time.monotonic() > deadline:
            for p in procs.processes:
                p.kill()
            raise TimeoutError(f"distributed test did not finish in {timeout_s} s")
    results: dict[int, Any] = {}
    while not queue.empty():
        rank, status, payload = queue.get()
        if status == "error":
            raise AssertionError(f"rank {rank} failed:\n{payload}")
        results[rank] = pickle.loads(payload)
    missing = set(range(world_size)) - set(results)
    assert not missing, f"missing results from ranks {missing}"
    return [results[r] for r in range(world_size)]
