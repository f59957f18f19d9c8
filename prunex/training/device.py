"""Which device each rank trains on, and one agreement across ranks before any collective.

    --device auto|cuda|cpu     (RunConfig.device; on the slurm executor and in the paper profile: cuda)

- `cpu`: the CPU and gloo. `cuda`: a GPU and NCCL, required: a rank that cannot use a GPU is an
  error, never a silent fall-back to the CPU. `auto`: a GPU where torch sees one, else the CPU.
- **GPU binding** (`cuda_index`). The scheduler may already have bound one GPU to each task
  (`--gpus-per-task=1`, `--gpu-bind`, a site's cgroups): the task then sees exactly one GPU and
  uses it. Otherwise the task sees the node's GPUs and takes the one of its local rank on the
  machine. `CUDA_VISIBLE_DEVICES` is never written: a value the scheduler set is the truth.
- **Checks in every rank at start** (`local_placement`): Python and torch in range
  (`prunex.cluster.compat`), and for a GPU that the torch build has kernels for its compute capability.
- **Agreement** (`place`). Before `init_process_group`, every rank publishes its placement (host,
  device, backend, GPU and its UUID, torch build, or the error it met) in the job's rendezvous
  store, waits for all the others and checks the whole table (`check_placements`). Every rank
  therefore stops at once with the same one-line error that names the rank and host that differ:
  a rank that has no GPU while the others have one would otherwise pick gloo while they pick NCCL
  and the job would hang. The store is the one `init_process_group` then uses (TCPStore at
  MASTER_ADDR:MASTER_PORT, or torchrun's agent store), so no collective and no backend are involved.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import timedelta

import torch
import torch.distributed as dist

from prunex.cluster.compat import UnsupportedEnvironment, check_cuda_arch, check_this_torch
from prunex.training.topology import Topology, backend_for

DEVICE_CHOICES = ("auto", "cuda", "cpu")
_KEY_PREFIX = "prunex/placement/"


class DeviceError(RuntimeError):
    """A rank cannot use the requested device, or the ranks disagree; one line for the user."""


def device_option_error(device: str | None, option: str = "--device") -> str:
    """Why a one-process command's `option` (cpu, cuda or cuda:N; the export's check, a bench) cannot run here:
    "" when it can or was not given, else one line, so that the command refuses it before it loads anything."""
    if device is None:
        return ""
    try:
        dev = torch.device(device)
    except RuntimeError:
        return f"{option} {device!r} is not a device: cpu, cuda or cuda:N"
    if dev.type not in ("cpu", "cuda"):
        return f"{option} {device!r}: this runs on cpu or cuda"
    if dev.type == "cuda" and not torch.cuda.is_available():
        return f"{option} {device}: no CUDA GPU is visible to this process; use {option} cpu"
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        return f"{option} {device}: this process sees {torch.cuda.device_count()} GPU(s)"
    return ""


def machine_rank(topo: Topology, env: Mapping[str, str] | None = None) -> tuple[int, int]:
    """(this process's index among the processes of its machine, their number).

    The launcher's LOCAL_RANK / LOCAL_WORLD_SIZE when it set them (torchrun, submitit's export);
    else every rank of an emulated job shares one machine; else the node's P processes."""
    env = os.environ if env is None else env
    if env.get("LOCAL_RANK", "") != "" and env.get("LOCAL_WORLD_SIZE", "") != "":
        return int(env["LOCAL_RANK"]), int(env["LOCAL_WORLD_SIZE"])
    if topo.emulated:
        return topo.rank, topo.world_size
    return topo.local_rank, topo.procs_per_node


def cuda_index(local_rank: int, local_world: int, visible: int, visible_env: str | None = None) -> int:
    """The index (among the visible GPUs) this process uses.

    One visible GPU: the scheduler bound it to this task (or one process runs per machine): use
    it. As many visible GPUs as processes on the machine, or more: the one of the local rank.
    Anything else cannot give each process its own GPU.
    """
    shown = f" (CUDA_VISIBLE_DEVICES={visible_env!r})" if visible_env is not None else ""
    if visible < 1:
        raise DeviceError(f"no GPU visible to this process{shown}")
    if visible == 1:
        return 0
    if local_rank < visible and visible >= local_world:
        return local_rank
    raise DeviceError(
        f"{local_world} processes on this machine but {visible} GPUs visible to each{shown}: ask for one GPU "
        "per task (e.g. --gres=gpu:<type>:<tasks per node>) or bind one per task (--gpus-per-task=1)"
    )


def select_device(
    requested: str, local_rank: int, local_world: int, *, cuda_available: bool, visible: int, visible_env: str | None
) -> torch.device:
    """The device for `requested` (auto, cuda or cpu) from what this process sees (pure)."""
    if requested not in DEVICE_CHOICES:
        raise DeviceError(f"unknown device {requested!r}; known: {', '.join(DEVICE_CHOICES)}")
    if requested == "cpu" or (requested == "auto" and not (cuda_available and visible > 0)):
        return torch.device("cpu")
    if not cuda_available:
        raise DeviceError(
            f"--device cuda but torch {torch.__version__} finds no usable GPU"
            + (" (a CPU-only build)" if torch.version.cuda is None else f" (CUDA_VISIBLE_DEVICES={visible_env!r})")
        )
    return torch.device("cuda", cuda_index(local_rank, local_world, visible, visible_env))


def device_for(requested: str, topo: Topology, env: Mapping[str, str] | None = None) -> torch.device:
    """This process's device for `requested`, without the agreement of `place` (benchmarks)."""
    env = os.environ if env is None else env
    local_rank, local_world = machine_rank(topo, env)
    available = torch.cuda.is_available()
    return select_device(
        requested,
        local_rank,
        local_world,
        cuda_available=available,
        visible=torch.cuda.device_count() if available else 0,
        visible_env=env.get("CUDA_VISIBLE_DEVICES"),
    )


@dataclass(frozen=True)
class Placement:
    """What one rank runs on, as every other rank sees it."""

    rank: int
    host: str
    device: str  # "cpu", "cuda:0", or "" when `error` is set
    backend: str
    torch: str
    gpu: str = ""  # name, compute capability
    gpu_uuid: str = ""
    error: str = ""

    def label(self) -> str:
        return f"rank {self.rank} on {self.host}"


def local_placement(requested: str, topo: Topology, env: Mapping[str, str] | None = None) -> Placement:
    """This rank's placement; a problem becomes its `error` (published, so every rank reports it)."""
    env = os.environ if env is None else env
    host = socket.gethostname()
    try:
        check_this_torch()
        device = device_for(requested, topo, env)
        gpu = uuid = ""
        if device.type == "cuda":
            props = torch.cuda.get_device_properties(device)
            capability = (props.major, props.minor)
            check_cuda_arch(
                torch.cuda.get_arch_list(),
                capability,
                torch_version=torch.__version__,
                cuda_version=torch.version.cuda,
                gpu=props.name,
            )
            gpu, uuid = f"{props.name} ({props.major}.{props.minor})", str(getattr(props, "uuid", ""))
        return Placement(topo.rank, host, str(device), backend_for(device), torch.__version__, gpu, uuid)
    except (DeviceError, UnsupportedEnvironment) as e:
        return Placement(topo.rank, host, "", "", torch.__version__, error=str(e))


def check_placements(placements: list[Placement]) -> None:
    """Refuse a job whose ranks cannot train together: one line naming the rank and host that differ.

    Checked in order: a rank's own error; device type and backend against rank 0; the torch build
    against rank 0; two ranks of one host on the same GPU.
    """
    by_rank = sorted(placements, key=lambda p: p.rank)
    errors = [p for p in by_rank if p.error]
    if errors:
        more = f" (and {len(errors) - 1} more rank{'s' if len(errors) > 2 else ''})" if len(errors) > 1 else ""
        raise DeviceError(f"{errors[0].label()}: {errors[0].error}{more}")
    ref = by_rank[0]
    kind = ref.device.split(":")[0]
    differ = [p for p in by_rank if (p.device.split(":")[0], p.backend) != (kind, ref.backend)]
    if differ:
        d = differ[0]
        more = f" (and {len(differ) - 1} more)" if len(differ) > 1 else ""
        raise DeviceError(
            f"ranks disagree on the device: {d.label()} has {d.device.split(':')[0]}/{d.backend}{more}, "
            f"{ref.label()} has {kind}/{ref.backend}; every rank must see a GPU (--device cuda) or use the CPU "
            "(--device cpu)"
        )
    builds = [p for p in by_rank if p.torch != ref.torch]
    if builds:
        d = builds[0]
        raise DeviceError(
            f"ranks run different torch builds: {d.label()} has torch {d.torch}, {ref.label()} has {ref.torch}; "
            "use one environment on every node"
        )
    seen: dict[tuple[str, str], Placement] = {}
    for p in by_rank:
        if not p.gpu_uuid:
            continue
        other = seen.setdefault((p.host, p.gpu_uuid), p)
        if other is not p:
            raise DeviceError(
                f"ranks {other.rank} and {p.rank} on {p.host} share one GPU ({p.gpu}): ask for one GPU per task "
                "(--gres=gpu:<type>:<tasks per node>, or --gpus-per-task=1)"
            )


def exchange(store: dist.Store, mine: Placement, world_size: int, timeout_s: float) -> list[Placement]:
    """Publish this rank's placement in `store` and read every rank's (waits at most `timeout_s`)."""
    store.set(f"{_KEY_PREFIX}{mine.rank}", json.dumps(asdict(mine)))
    keys = [f"{_KEY_PREFIX}{r}" for r in range(world_size)]
    try:
        store.wait(keys, timedelta(seconds=timeout_s))
    except Exception:  # the store raises a bare RuntimeError/DistStoreError on timeout
        try:
            who = f"ranks {[r for r, k in enumerate(keys) if not store.check([k])][:8]}"
        except Exception:  # the store's host (rank 0) has gone too
            who = "some ranks"
        raise DeviceError(
            f"rank {mine.rank} on {mine.host}: {who} did not report their device within {timeout_s:g} s "
            "(they failed before starting; see their logs)"
        ) from None
    table = [Placement(**json.loads(store.get(k))) for k in keys]
    store.set(f"{_KEY_PREFIX}read/{mine.rank}", "1")
    if mine.rank == 0:  # the TCPStore lives in rank 0: keep it up until every rank has read the table
        try:
            store.wait([f"{_KEY_PREFIX}read/{r}" for r in range(world_size)], timedelta(seconds=timeout_s))
        except Exception:
            pass  # a rank that died meanwhile: the others have their answer, and the job fails anyway
    return table


def rendezvous_store(topo: Topology, timeout_s: float) -> dist.Store:
    """The job's store from the env:// variables (MASTER_ADDR/PORT, or torchrun's agent store). A rank that
    never comes (failed or stuck before starting) makes the others time out here: `DeviceError`, one line,
    that points at the logs, where a stuck rank's stack is (`prunex.cluster.task.START_REPORT_FRACTION`)."""
    try:
        store, _, _ = next(dist.rendezvous("env://", topo.rank, topo.world_size, timeout=timedelta(seconds=timeout_s)))
    except dist.DistError as e:  # DistStoreError (the host's wait for clients) or DistNetworkError (a connect)
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        if "timed out" not in first.lower():
            raise  # not a rank that did not come (e.g. EADDRINUSE): torch's own error
        raise DeviceError(
            f"rank {topo.rank} on {socket.gethostname()}: the job's {topo.world_size} ranks did not all join the "
            f"rendezvous within {timeout_s:g} s ({first}); a rank that failed or is stuck before starting says "
            "where in its log"
        ) from None
    store.set_timeout(timedelta(seconds=timeout_s))
    return store


def place(requested: str, topo: Topology, timeout_s: float) -> tuple[torch.device, dist.Store]:
    """This rank's device after every rank has agreed (module docstring); returns it and the store
    for `prunex.training.topology.init_distributed`. Raises `DeviceError` on every rank alike."""
    store = rendezvous_store(topo, timeout_s)
    mine = local_placement(requested, topo)
    check_placements(exchange(store, mine, topo.world_size, timeout_s))
    return torch.device(mine.device), store
