"""Helpers for launchers and jobs that run on a minicluster (importable without root, torch or Slurm)."""

from __future__ import annotations

import os

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


def export_torch_env(set_cuda_visible_devices: bool = False):
    """``submitit.helpers.TorchDistributedEnvironment().export()`` plus :func:`dist_env_overrides`.

    Returns the submitit environment object (its ``master_addr`` updated).
    """
    import submitit

    dist_env = submitit.helpers.TorchDistributedEnvironment().export(
        set_cuda_visible_devices=set_cuda_visible_devices, overwrite=True
    )
    overrides = dist_env_overrides()
    os.environ.update(overrides)
    if "MASTER_ADDR" in overrides:
        dist_env.master_addr = overrides["MASTER_ADDR"]
    return dist_env
