"""Run a function in several real gloo processes (no mocks): the test harness for collectives.

`run_distributed(fn, world_size, *args)` calls `fn(rank, *args)` in each of `world_size`
processes that have RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE and MASTER_ADDR/PORT set and a
gloo default group initialised, and returns the return values in rank order. An exception in any
rank fails the call with that rank's traceback; every call is bounded by `timeout_s`.

The processes are kept in a pool per world size (and `env`: variables set in the processes before
they import torch, such as the behaviour pins' numerics) and reused by later calls (starting a
process and importing torch costs seconds); a pool whose call failed or timed out is killed, so a
rank stuck in a collective never leaks into the next test.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import os
import pickle
import queue
import socket
import time
import traceback
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from prunex.startup import collector_paused

with collector_paused():  # torch, loaded cheaper here and in every pool process that unpickles `_worker`
    import torch.multiprocessing as mp


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank: int, world: int, port: int, env: dict[str, str], tasks: Any, results: Any, parent: int) -> None:
    # Dies with the test process that started it, however that process ends: a pool's process left behind
    # waits on its task queue forever (CI at 4d0695d and a6264b1, 2026-11-27: the 1-rank pool of test_timing.py
    # was found orphaned after each passing suite, its pytest worker gone and the pool never closed; by which
    # path the worker ended without `_shutdown` was not established).
    from prunex.cluster.jobs import die_with_parent

    die_with_parent(parent)
    os.environ.update(env)
    os.environ.update(
        RANK=str(rank),
        WORLD_SIZE=str(world),
        LOCAL_RANK=str(rank),
        LOCAL_WORLD_SIZE=str(world),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
    )
    import torch
    import torch.distributed as dist

    from prunex.training.allocator import keep_freed_memory

    keep_freed_memory()  # as every rank of a launched run (prunex.training.train.train)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=timedelta(seconds=90))
    started = False
    while True:
        task = tasks.get()
        if task is None:
            break
        task_id, payload = task
        try:
            # the first task loads its test module and the trainer with it (`prunex.startup`); later ones, in a
            # process that has made garbage of its own, do not freeze it
            with contextlib.nullcontext() if started else collector_paused():
                fn, args = pickle.loads(payload)
            started = True
            results.put((task_id, rank, "ok", pickle.dumps(fn(rank, *args))))
        except BaseException:
            results.put((task_id, rank, "error", traceback.format_exc()))
        else:
            _destroy_task_groups()
    dist.destroy_process_group()


def _destroy_task_groups() -> None:
    """Destroy the process groups a finished task made (`build_groups`, `dist.new_group`); the pool's default
    group stays. Each gloo group keeps a transport thread (`gloo_tcp_loop`) that wakes while the process
    idles, one per group made (16 in a pool process after test_run_hsadmm, test_evaluation and test_admm_convex).
    The 4-process pool that the pool modules share (tests/conftest.py) then took ~170 s more CPU over the rest of
    a suite than the same tests alone (60-70 s per process against ~23 s; 2026-11-27, 2-core AMD EPYC,
    tests/cpu_sampler.py). torch lists the groups only in `distributed_c10d._world`, a private attribute: where
    a torch version lacks it, nothing is destroyed (the pool only idles less cheaply)."""
    import torch.distributed as dist

    groups = getattr(getattr(dist.distributed_c10d, "_world", None), "pg_group_ranks", None)
    for pg in list(groups or ()):
        if pg is not dist.GroupMember.WORLD:
            dist.destroy_process_group(pg)


class _Pool:
    def __init__(self, world: int, env: dict[str, str]) -> None:
        ctx = mp.get_context("spawn")
        self.world = world
        self.results = ctx.Queue()
        self.tasks = [ctx.Queue() for _ in range(world)]
        port = free_port()
        self.procs = [
            ctx.Process(
                target=_worker, args=(r, world, port, env, self.tasks[r], self.results, os.getpid()), daemon=True
            )
            for r in range(world)
        ]
        for p in self.procs:
            p.start()
        self.ids = itertools.count()

    def run(self, fn: Callable, args: tuple, timeout_s: float) -> list[Any]:
        task_id = next(self.ids)
        payload = pickle.dumps((fn, args))
        for q in self.tasks:
            q.put((task_id, payload))
        out: dict[int, Any] = {}
        deadline = time.monotonic() + timeout_s
        while len(out) < self.world:
            try:
                tid, rank, status, data = self.results.get(timeout=max(0.1, min(1.0, deadline - time.monotonic())))
            except queue.Empty:
                dead = [r for r, p in enumerate(self.procs) if not p.is_alive()]
                if dead or time.monotonic() > deadline:
                    msg = f"distributed call did not finish in {timeout_s} s (dead ranks: {dead})"
                    raise TimeoutError(msg) from None
                continue
            if tid != task_id:
                continue
            if status == "error":
                raise AssertionError(f"rank {rank} failed:\n{data}")
            out[rank] = pickle.loads(data)
        return [out[r] for r in range(self.world)]

    def kill(self) -> None:
        for p in self.procs:
            if p.is_alive():
                p.kill()
        for p in self.procs:
            p.join(timeout=5)


_POOLS: dict[tuple[int, tuple[tuple[str, str], ...]], _Pool] = {}


def _close(pool: _Pool) -> None:
    for q in pool.tasks:
        q.put(None)
    for p in pool.procs:
        p.join(timeout=5)
    pool.kill()


@atexit.register
def _shutdown() -> None:
    for pool in _POOLS.values():
        _close(pool)
    _POOLS.clear()


def close_pool(world_size: int, env: dict[str, str] | None = None) -> None:
    """End the pool of `run_distributed(..., world_size, env=env)`, if any (each process holds about
    a GB once it has trained: a test module with a pool of its own closes it when done)."""
    pool = _POOLS.pop((world_size, tuple(sorted((env or {}).items()))), None)
    if pool is not None:
        _close(pool)


def run_distributed(
    fn: Callable, world_size: int, *args: Any, timeout_s: float = 120.0, env: dict[str, str] | None = None
) -> list[Any]:
    key = (world_size, tuple(sorted((env or {}).items())))
    pool = _POOLS.get(key)
    if pool is None or not all(p.is_alive() for p in pool.procs):
        if pool is not None:
            pool.kill()
        pool = _POOLS[key] = _Pool(world_size, dict(env or {}))
    try:
        return pool.run(fn, args, timeout_s)
    except BaseException:
        pool.kill()
        del _POOLS[key]
        raise


def _train_rank(rank: int, config: Any, run_dir: str) -> None:
    import torch

    from prunex.training.topology import discover
    from prunex.training.train import _train

    Path(run_dir).mkdir(parents=True, exist_ok=True)
    _train(config, Path(run_dir), discover(config.nodes, config.procs_per_node), torch.device("cpu"))


def train_on_pool(config: Any, timeout_s: float = 300.0) -> Path:
    """A run trained by `prunex.training.train._train` (what every rank of a launched job runs after joining its
    process group) on the pool of `config.world_size` processes; returns its directory (`run_dir_for`), with
    the tables, model and DONE a launched job leaves. No process is started for it: for the modules that test
    what a method logs and sends; the launch around it (submitit, the job's own processes, signals) is
    tested end to end by tests/test_resume.py, tests/faults/ and tests/minicluster/."""
    from prunex.cluster.rundir import run_dir_for

    run_dir = run_dir_for(config)
    run_distributed(_train_rank, config.world_size, config, str(run_dir), timeout_s=timeout_s)
    return run_dir
