"""Job functions that measure a minicluster's links (submitted through submitit by the tests).

They live in the package (not in the test module) so that submitit's pickle refers to an importable
module inside the job.
"""

from __future__ import annotations

import datetime
import os
import signal
import socket
import time

from .helpers import export_torch_env
from .wire import link_model_active, node_iface, read_counters


def _init_gloo(timeout_s: float):
    import torch.distributed as dist

    env = export_torch_env()
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=timeout_s))
    return env, dist


def allreduce_probe(nbytes: int = 50_000_000, repeats: int = 2, timeout_s: float = 60.0) -> dict:
    """Time an ``nbytes`` AllReduce inside each node and between the node leaders.

    Groups: one per node (ranks of a node; block distribution) and the leaders (local rank 0 of each
    node).  On the leaders the node's wire counters are read around each inter-node AllReduce.
    Returns, per rank, a dict with the best/all timings and the wire deltas.
    """
    import torch

    env, dist = _init_gloo(timeout_s)
    rank, world = dist.get_rank(), dist.get_world_size()
    per_node = env.local_world_size
    n_nodes = world // per_node
    node_groups = [dist.new_group(list(range(k * per_node, (k + 1) * per_node))) for k in range(n_nodes)]
    leaders = list(range(0, world, per_node))
    leader_group = dist.new_group(leaders)
    my_node = rank // per_node
    is_leader = rank in leaders

    numel = nbytes // 4
    x = torch.ones(numel, dtype=torch.float32)
    small = torch.ones(1024)
    # warm up every group (connections are set up lazily by some gloo versions)
    dist.all_reduce(small, group=node_groups[my_node])
    if is_leader:
        dist.all_reduce(small, group=leader_group)
    dist.barrier()

    intra, inter, tx, rx, intra_wire = [], [], [], [], []
    for _ in range(repeats):
        dist.barrier()
        c0 = read_counters()
        t = time.perf_counter()
        dist.all_reduce(x, group=node_groups[my_node])
        intra.append(time.perf_counter() - t)
        c1 = read_counters()
        if c0 is not None and c1 is not None:  # bytes the node's shaped link carried meanwhile (tx + rx)
            intra_wire.append(c1[0] - c0[0] + c1[1] - c0[1])
        dist.barrier()
        if is_leader:
            c0 = read_counters()
            t = time.perf_counter()
            dist.all_reduce(x, group=leader_group)
            inter.append(time.perf_counter() - t)
            c1 = read_counters()
            if c0 is not None and c1 is not None:
                tx.append(c1[0] - c0[0])
                rx.append(c1[1] - c0[1])
        dist.barrier()
    result = {
        "rank": rank,
        "world": world,
        "node": os.environ.get("SLURMD_NODENAME", socket.gethostname()),
        "leader": is_leader,
        "master_addr": os.environ.get("MASTER_ADDR"),
        "gloo_ifname": os.environ.get("GLOO_SOCKET_IFNAME"),
        "iface": node_iface(),
        "link_model_active": link_model_active(),
        "nbytes": numel * 4,
        "intra_s": intra,
        "intra_wire_bytes": intra_wire,
        "inter_s": inter,
        "tx_bytes": tx,
        "rx_bytes": rx,
    }
    dist.destroy_process_group()
    return result


def kill_probe(victim_rank: int = -1, timeout_s: float = 30.0, hold_s: float = 1.0) -> int:
    """One rank SIGKILLs itself after init; the others then block in an AllReduce (gloo timeout
    ``timeout_s``), so the job must end with an error within a bounded time."""
    import torch

    _, dist = _init_gloo(timeout_s)
    rank, world = dist.get_rank(), dist.get_world_size()
    victim = victim_rank % world
    dist.barrier()
    if rank == victim:
        time.sleep(hold_s)
        os.kill(os.getpid(), signal.SIGKILL)
    t = torch.ones(1 << 20)
    dist.all_reduce(t)  # never completes: the victim is gone
    dist.barrier()
    return rank
