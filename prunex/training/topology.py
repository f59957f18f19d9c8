"""Topology discovery and the three levels of process groups (paper sec. 4.1.1).

A job of N = M x P processes runs on M nodes with P processes (one accelerator each) per node.
Ranks are placed in contiguous blocks: node i holds ranks i*P .. i*P+P-1, local rank 0 of each
node is its *leader*. Discovery reads, in order:

- explicit `--nodes M --procs-per-node P` (several emulated nodes may then share one machine:
  node = rank // P);
- torchrun (`RANK`, `WORLD_SIZE`, `LOCAL_RANK`, `LOCAL_WORLD_SIZE`, `GROUP_RANK`);
- Slurm / submitit (`SLURM_PROCID`, `SLURM_NTASKS`, `SLURM_LOCALID`, `SLURM_NODEID`,
  `SLURM_JOB_NUM_NODES`, `SLURM_TASKS_PER_NODE`).

A world size that is not M x P, a heterogeneous node, or a rank placement that is not blockwise
is a `TopologyError` before any training starts.

Groups are built in the same order on every rank (torch.distributed requires it): one intra-node
group per node, then the inter-node group of leaders, then the flat group of all ranks.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where groups are made: the launcher reads `Topology` without torch
    import torch
    import torch.distributed as dist


class TopologyError(RuntimeError):
    """The processes do not form M homogeneous nodes of P processes."""


@dataclass(frozen=True)
class Topology:
    rank: int
    world_size: int
    nodes: int  # M
    procs_per_node: int  # P
    emulated: bool = False  # several "nodes" share one machine

    def __post_init__(self) -> None:
        if self.nodes * self.procs_per_node != self.world_size:
            raise TopologyError(
                f"world size {self.world_size} is not nodes {self.nodes} x procs-per-node {self.procs_per_node}"
            )
        if not 0 <= self.rank < self.world_size:
            raise TopologyError(f"rank {self.rank} outside world of {self.world_size}")

    @property
    def node(self) -> int:
        return self.node_of(self.rank)

    @property
    def local_rank(self) -> int:
        return self.rank % self.procs_per_node

    @property
    def is_leader(self) -> bool:
        return self.local_rank == 0

    @property
    def role(self) -> str:
        return "leader" if self.is_leader else "worker"

    def node_of(self, rank: int) -> int:
        return rank // self.procs_per_node

    def node_ranks(self, node: int) -> list[int]:
        return list(range(node * self.procs_per_node, (node + 1) * self.procs_per_node))

    @property
    def leaders(self) -> list[int]:
        return [i * self.procs_per_node for i in range(self.nodes)]

    def as_dict(self) -> dict[str, int | bool | str]:
        return {
            "rank": self.rank,
            "world_size": self.world_size,
            "nodes": self.nodes,
            "procs_per_node": self.procs_per_node,
            "node": self.node,
            "local_rank": self.local_rank,
            "role": self.role,
            "emulated": self.emulated,
        }


def _slurm_tasks_per_node(value: str) -> list[int]:
    """Expand Slurm's compressed list, e.g. '4(x2),3' -> [4, 4, 3]."""
    out: list[int] = []
    for part in value.split(","):
        m = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", part.strip())
        if not m:
            raise TopologyError(f"cannot parse SLURM_TASKS_PER_NODE={value!r}")
        out += [int(m.group(1))] * int(m.group(2) or 1)
    return out


def discover(
    nodes: int | None = None, procs_per_node: int | None = None, env: Mapping[str, str] | None = None
) -> Topology:
    """This process's place in the job; see the module docstring for the sources read."""
    env = os.environ if env is None else env

    def first(*names: str) -> int | None:
        for n in names:
            if env.get(n, "") != "":
                return int(env[n])
        return None

    rank = first("RANK", "SLURM_PROCID")
    world = first("WORLD_SIZE", "SLURM_NTASKS")
    if rank is None or world is None:
        rank, world = 0, 1  # a single process started by hand
    local_world = first("LOCAL_WORLD_SIZE")
    if "SLURM_TASKS_PER_NODE" in env and "SLURM_JOB_ID" in env:
        per_node = _slurm_tasks_per_node(env["SLURM_TASKS_PER_NODE"])
        if len(set(per_node)) > 1:
            raise TopologyError(
                f"heterogeneous nodes (tasks per node {env['SLURM_TASKS_PER_NODE']}); "
                "PruneX needs the same number of processes on every node"
            )
        local_world = local_world or per_node[0]
    physical_nodes = world // local_world if local_world else None

    if nodes is None and procs_per_node is None:
        if local_world is None:
            return Topology(rank, world, nodes=1, procs_per_node=world)
        nodes, procs_per_node = world // local_world, local_world
    elif nodes is None:
        nodes = world // procs_per_node if procs_per_node and world % procs_per_node == 0 else -1
    elif procs_per_node is None:
        procs_per_node = world // nodes if world % nodes == 0 else -1
    if nodes < 1 or procs_per_node < 1 or nodes * procs_per_node != world:
        raise TopologyError(f"world size {world} is not nodes {nodes} x procs-per-node {procs_per_node}")
    emulated = physical_nodes is not None and physical_nodes != nodes
    if emulated and physical_nodes != 1:
        raise TopologyError(
            f"{physical_nodes} physical nodes cannot emulate {nodes} nodes; emulate on one machine only"
        )
    topo = Topology(rank, world, nodes=nodes, procs_per_node=procs_per_node, emulated=emulated)
    if not emulated:
        # Blockwise placement is what makes node = rank // P true on a real cluster.
        node_id = first("GROUP_RANK", "SLURM_NODEID")
        local = first("LOCAL_RANK", "SLURM_LOCALID")
        if (node_id is not None and node_id != topo.node) or (local is not None and local != topo.local_rank):
            raise TopologyError(
                f"rank {rank} sits on node {node_id} local rank {local}, expected blockwise placement "
                f"(node {topo.node}, local rank {topo.local_rank}); use Slurm's default block distribution"
            )
    return topo


def backend_for(device: torch.device) -> str:
    return "nccl" if device.type == "cuda" else "gloo"


@dataclass
class Groups:
    """The process groups of one rank. `intra`: this node's ranks; `inter`: the leaders (None on
    workers, who are not members); `flat`: every rank."""

    intra: dist.ProcessGroup
    inter: dist.ProcessGroup | None
    flat: dist.ProcessGroup
    intra_all: list[dist.ProcessGroup]
    shard: dist.ProcessGroup | None = None  # this local rank on every node (built on request)

    def get(self, level: str) -> dist.ProcessGroup:
        group = {"intra": self.intra, "inter": self.inter, "flat": self.flat, "shard": self.shard}[level]
        if group is None:
            raise RuntimeError(f"this rank is not a member of the {level} group")
        return group


def init_distributed(topo: Topology, device: torch.device, timeout_s: float, store: dist.Store | None = None) -> None:
    """`init_process_group` on the job's rendezvous `store` (`prunex.training.device.place` made it and checked
    that every rank agrees on the device), or from the env:// variables (MASTER_ADDR/PORT set by the
    launcher) when none is given. The device (`prunex.training.device`) is chosen before: CUDA when it is a GPU."""
    import torch
    import torch.distributed as dist

    if dist.is_initialized():
        return
    if device.type == "cuda":
        torch.cuda.set_device(device)
    kwargs: dict = {"device_id": device} if device.type == "cuda" else {}  # eager NCCL init (torch >= 2.3)
    if store is not None:  # what init_process_group does with the store it makes from env://
        kwargs["store"] = dist.PrefixStore("default_pg", store)
    dist.init_process_group(
        backend=backend_for(device),
        rank=topo.rank,
        world_size=topo.world_size,
        timeout=timedelta(seconds=timeout_s),
        **kwargs,
    )


def build_groups(topo: Topology, timeout_s: float, shards: bool = False) -> Groups:
    """Create the intra, inter and flat groups, and with ``shards`` the P groups of equal local rank
    across nodes (the sharded inter-node exchange); every rank must call this in the same order."""
    import torch.distributed as dist

    timeout = timedelta(seconds=timeout_s)
    intra_all = [dist.new_group(topo.node_ranks(i), timeout=timeout) for i in range(topo.nodes)]
    inter = dist.new_group(topo.leaders, timeout=timeout)
    flat = dist.new_group(list(range(topo.world_size)), timeout=timeout)
    shard = None
    if shards:
        P = topo.procs_per_node
        shard_all = [dist.new_group([m * P + j for m in range(topo.nodes)], timeout=timeout) for j in range(P)]
        shard = shard_all[topo.local_rank]
    return Groups(
        intra=intra_all[topo.node],
        inter=inter if topo.is_leader else None,
        flat=flat,
        intra_all=intra_all,
        shard=shard,
    )
