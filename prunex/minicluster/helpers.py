"""Helpers for launchers and jobs that run on a minicluster (importable without root, torch or Slurm)."""

from __future__ import annotations

import os
import zlib

from .wire import link_model_active, node_iface

# submitit / Slurm parameter names that ask for GPUs (with or without the ``slurm_`` prefix)
GPU_KEYS = frozenset(
    {
        "gres",
        "gpus",
        "gpus_per_node",
        "gpus_per_task",
        "gpus_per_socket",
        "gpu_bind",
        "gpu_freq",
        "cpus_per_gpu",
        "mem_per_gpu",
        "tres_per_node",
        "tres_per_task",
    }
)
_NESTED = ("slurm_additional_parameters", "additional_parameters")


def _norm(key: str) -> str:
    k = key.lower().replace("-", "_").lstrip("_")
    return k[len("slurm_") :] if k.startswith("slurm_") else k


def _is_gpu_key(key: str, value) -> bool:
    k = _norm(key)
    if k in ("tres_per_node", "tres_per_task"):
        return "gpu" in str(value).lower()
    return k in GPU_KEYS


def adapt_slurm_params(params: dict) -> tuple[dict, list[str]]:
    """Drop GPU requests (the minicluster has no GPUs) and say so.

    Works on submitit executor parameters (``slurm_gres``, ``gpus_per_node``, ...) as well as plain
    Slurm option names (``gres``, ``gpus-per-node``), including inside ``slurm_additional_parameters``.
    Returns ``(new_params, notes)``; the input dict is not modified.
    """
    out: dict = {}
    notes: list[str] = []
    for key, value in params.items():
        if key in _NESTED and isinstance(value, dict):
            inner, inner_notes = adapt_slurm_params(value)
            notes += [f"{key}: {n}" for n in inner_notes]
            out[key] = inner
        elif _is_gpu_key(key, value):
            if value not in (None, 0, "", False):
                notes.append(f"dropped {key}={value!r}: the minicluster has no GPUs")
        else:
            out[key] = value
    return out, notes


def master_addr(default: str | None = None) -> str | None:
    """Address of the node that runs rank 0, usable as MASTER_ADDR.

    Node names of a minicluster do not resolve, so inside a Slurm step this returns
    ``SLURM_LAUNCH_NODE_IPADDR`` (the address of the node that ran ``srun``, i.e. the batch host, which
    holds rank 0 under the default block distribution).  Outside a step: ``default``, else the current
    ``MASTER_ADDR``.
    """
    return os.environ.get("SLURM_LAUNCH_NODE_IPADDR") or default or os.environ.get("MASTER_ADDR")


def dist_env_overrides() -> dict[str, str]:
    """Environment fixes for torch.distributed on a minicluster node (empty elsewhere).

    ``MASTER_ADDR`` from :func:`master_addr`, and ``GLOO_SOCKET_IFNAME`` = the node's veth: gloo would
    otherwise bind the address the host name resolves to (127.0.0.1 here), which peers on other nodes
    cannot reach.  Ranks on the same node still talk over loopback (the kernel routes local addresses
    through ``lo``), so only inter-node traffic is shaped.
    """
    if not link_model_active():
        return {}
    out = {}
    addr = master_addr()
    if addr:
        out["MASTER_ADDR"] = addr
    iface = node_iface()
    if iface:
        out["GLOO_SOCKET_IFNAME"] = iface
        out["PRUNEX_WIRE_IFACE"] = iface
    return out


# Where a job's rendezvous listens when nobody set MASTER_PORT: below Linux's default ephemeral range (32768-60999,
# net.ipv4.ip_local_port_range), from which the kernel picks the source port of every outgoing connection.
# submitit, given no port, draws one from 20000-60000, mostly inside that range, so on rank 0's node an open connection
# (another job's gloo or NCCL socket, a store client, srun) may hold it already, and the job fails at its start:
# CI on 2026-11-28 (the mini cluster, two 1 x 1 jobs of one array on the same node) failed with EADDRINUSE on
# port 59734.
RENDEZVOUS_PORTS = range(20000, 32768)


def rendezvous_port(job_id: str) -> int:
    """The rendezvous port (MASTER_PORT) of Slurm job ``job_id`` (``123`` or ``123_4`` for an array task): the
    same in every task of the job, since each derives it, and in `RENDEZVOUS_PORTS`."""
    return RENDEZVOUS_PORTS[zlib.crc32(job_id.encode()) % len(RENDEZVOUS_PORTS)]


def export_torch_env(set_cuda_visible_devices: bool = False):
    """``submitit.helpers.TorchDistributedEnvironment().export()`` plus :func:`dist_env_overrides`; without a
    MASTER_PORT in the environment, the port is `rendezvous_port` of the job's id instead of submitit's.

    Returns the submitit environment object (its ``master_addr`` updated).
    """
    import submitit

    if "MASTER_PORT" not in os.environ:  # submitit keeps a port that is set; its own: RENDEZVOUS_PORTS
        os.environ["MASTER_PORT"] = str(rendezvous_port(submitit.JobEnvironment().job_id))
    dist_env = submitit.helpers.TorchDistributedEnvironment().export(
        set_cuda_visible_devices=set_cuda_visible_devices, overwrite=True
    )
    overrides = dist_env_overrides()
    os.environ.update(overrides)
    if "MASTER_ADDR" in overrides:
        dist_env.master_addr = overrides["MASTER_ADDR"]
    return dist_env
