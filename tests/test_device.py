"""Device choice, GPU binding and the ranks' agreement (`prunex.training.device`), on real processes and a real
store."""

import os
import socket
import time

import pytest
from distributed import free_port, run_distributed

from prunex.training.config import ConfigError, RunConfig
from prunex.training.device import (
    DeviceError,
    Placement,
    check_placements,
    cuda_index,
    machine_rank,
    place,
    select_device,
)
from prunex.training.topology import Topology


# ------------------------------------------------------------------------------------ pure choices
def test_device_defaults_to_cuda_on_slurm_and_auto_elsewhere() -> None:
    assert RunConfig(method="ddp", executor="slurm").device == "cuda"
    assert RunConfig(method="ddp", executor="local").device == "auto"
    assert RunConfig(method="ddp", executor="slurm", device="cpu").device == "cpu"
    with pytest.raises(ConfigError, match="unknown device 'gpu'"):
        RunConfig(method="ddp", device="gpu")


def test_a_gpu_bound_by_the_scheduler_is_used_whatever_the_local_rank() -> None:
    assert cuda_index(local_rank=3, local_world=4, visible=1) == 0
    assert cuda_index(local_rank=3, local_world=4, visible=4) == 3  # the node's GPUs: by local rank


def test_too_few_gpus_for_the_tasks_of_a_node_is_refused() -> None:
    with pytest.raises(DeviceError, match="4 processes on this machine but 2 GPUs"):
        cuda_index(local_rank=3, local_world=4, visible=2, visible_env="0,1")
    with pytest.raises(DeviceError, match="no GPU visible"):
        cuda_index(0, 1, 0, visible_env="")


def test_cuda_requested_without_a_gpu_is_an_error_not_the_cpu() -> None:
    with pytest.raises(DeviceError, match="--device cuda but torch"):
        select_device("cuda", 0, 1, cuda_available=False, visible=0, visible_env=None)
    assert select_device("auto", 0, 1, cuda_available=False, visible=0, visible_env=None).type == "cpu"
    assert select_device("cpu", 0, 1, cuda_available=True, visible=4, visible_env=None).type == "cpu"
    assert str(select_device("auto", 2, 4, cuda_available=True, visible=4, visible_env=None)) == "cuda:2"


def test_machine_rank_prefers_the_launchers_local_rank() -> None:
    emulated = Topology(3, 4, nodes=2, procs_per_node=2, emulated=True)
    assert machine_rank(emulated, {}) == (3, 4)  # 2 emulated nodes share one machine: 4 processes on it
    assert machine_rank(Topology(3, 4, nodes=2, procs_per_node=2), {}) == (1, 2)
    assert machine_rank(emulated, {"LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"}) == (1, 2)


def _p(rank: int, host: str, device: str, **kw) -> Placement:
    backend = "nccl" if device.startswith("cuda") else "gloo"
    return Placement(rank, host, device, backend, kw.pop("torch", "2.14.1+cu130"), **kw)


def test_disagreement_names_the_rank_and_host_that_differ() -> None:
    table = [_p(0, "g1", "cuda:0"), _p(1, "g1", "cuda:1"), _p(2, "g2", "cpu"), _p(3, "g2", "cuda:1")]
    with pytest.raises(DeviceError) as e:
        check_placements(table)
    msg = str(e.value)
    assert "\n" not in msg and "rank 2 on g2 has cpu/gloo" in msg and "rank 0 on g1 has cuda/nccl" in msg


def test_a_ranks_own_error_is_what_every_rank_reports() -> None:
    table = [_p(0, "g1", "cuda:0"), Placement(1, "g1", "", "", "2.14.1", error="no GPU visible")]
    with pytest.raises(DeviceError, match="rank 1 on g1: no GPU visible"):
        check_placements(table)


def test_two_ranks_on_one_gpu_and_mixed_torch_builds_are_refused() -> None:
    with pytest.raises(DeviceError, match="ranks 0 and 1 on g1 share one GPU"):
        check_placements([_p(0, "g1", "cuda:0", gpu_uuid="u0"), _p(1, "g1", "cuda:0", gpu_uuid="u0")])
    check_placements([_p(0, "g1", "cuda:0", gpu_uuid="u0"), _p(1, "g2", "cuda:0", gpu_uuid="u1")])
    with pytest.raises(DeviceError, match="rank 1 on g2 has torch 2.6.0"):
        check_placements([_p(0, "g1", "cpu"), _p(1, "g2", "cpu", torch="2.6.0")])


# ------------------------------------------------------------------------------------ real processes
def _place(rank: int, port: int, requests: list[str], timeout_s: float, silent: int | None) -> str:
    """`place` as `prunex.training.train` calls it, on a fresh store (the pool's own group holds MASTER_PORT)."""
    saved = os.environ["MASTER_PORT"]
    os.environ["MASTER_PORT"] = str(port)
    topo = Topology(rank, 4, nodes=2, procs_per_node=2)
    try:
        if rank == silent:  # joins the store but never reports (a rank that died before choosing a device)
            from prunex.training.device import rendezvous_store

            rendezvous_store(topo, timeout_s)
            time.sleep(timeout_s + 1)
            return "silent"
        device, _ = place(requests[rank], topo, timeout_s)
        return str(device)
    except DeviceError as e:
        return f"DeviceError: {e}"
    finally:
        os.environ["MASTER_PORT"] = saved


# 4 processes (the pool test_comm and test_admm_convex use), as 2 nodes x 2
def test_every_rank_stops_with_the_same_line_when_one_cannot_use_its_device() -> None:
    # rank 2 asks for a GPU this machine does not have; the others are fine on the CPU
    out = run_distributed(_place, 4, free_port(), ["cpu", "cpu", "cuda", "cpu"], 30.0, None, timeout_s=90)
    host = socket.gethostname()
    assert len(set(out)) == 1, out
    assert out[0].startswith(f"DeviceError: rank 2 on {host}: --device cuda but torch") and "\n" not in out[0]


def test_ranks_that_agree_get_their_device() -> None:
    out = run_distributed(_place, 4, free_port(), ["cpu", "auto", "cpu", "auto"], 30.0, None, timeout_s=90)
    assert out == ["cpu"] * 4


def test_a_rank_that_never_reports_ends_the_others_in_bounded_time() -> None:
    t0 = time.monotonic()
    out = run_distributed(_place, 4, free_port(), ["cpu"] * 4, 3.0, 3, timeout_s=90)
    assert out[3] == "silent"
    assert out[0].startswith("DeviceError: rank 0") and "ranks [3] did not report their device within 3 s" in out[0]
    for rank in (1, 2):  # rank 0 holds the store and may have stopped: they cannot always name rank 3
        assert out[rank].startswith(f"DeviceError: rank {rank}") and "did not report their device" in out[rank], out
    assert time.monotonic() - t0 < 30


# ------------------------------------------------------------------------------------ in a Slurm task
def _in_slurm_task(monkeypatch: pytest.MonkeyPatch, **slurm: str) -> None:
    """This process's environment as a Slurm task's (submitit's executor, the given SLURM_* variables), with no
    torch.distributed variable left from elsewhere."""
    for k in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.delenv("SLURM_TASKS_PER_NODE", raising=False)
    monkeypatch.delenv("SLURM_LAUNCH_NODE_IPADDR", raising=False)
    monkeypatch.setenv("SUBMITIT_EXECUTOR", "slurm")
    for k, v in slurm.items():
        monkeypatch.setenv(k, v)


def test_a_scheduler_set_cuda_visible_devices_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """Task 5 of 2 nodes x 4, to which Slurm bound GPU 3 (--gpus-per-task=1): submitit's own export
    would overwrite CUDA_VISIBLE_DEVICES with the local rank (1), a GPU this task does not own."""
    from prunex.cluster.task import export_job_env
    from prunex.training.topology import discover

    _in_slurm_task(
        monkeypatch,
        SLURM_JOB_ID="4242",
        SLURM_JOB_NODELIST="g[1101-1102]",
        SLURM_JOB_NUM_NODES="2",
        SLURM_NTASKS="8",
        SLURM_PROCID="5",
        SLURM_LOCALID="1",
        SLURM_NODEID="1",
        CUDA_VISIBLE_DEVICES="3",
    )
    export_job_env()
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "3"
    assert (os.environ["RANK"], os.environ["LOCAL_RANK"], os.environ["LOCAL_WORLD_SIZE"]) == ("5", "1", "4")
    topo = discover(2, 4)
    assert (topo.node, topo.local_rank) == (1, 1) and machine_rank(topo) == (1, 4)
    assert cuda_index(*machine_rank(topo), visible=1, visible_env="3") == 0  # the one GPU it sees


def test_a_slurm_jobs_rendezvous_port_is_below_the_ephemeral_range(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every task of a job derives the same MASTER_PORT from the job id, below Linux's default ephemeral range
    (32768-60999), where submitit's 20000-60000 mostly falls: CI failed with EADDRINUSE on submitit's port 59734 of
    array task 3_0. A MASTER_PORT that is set is kept."""
    from prunex.cluster.task import export_job_env
    from prunex.minicluster.helpers import RENDEZVOUS_PORTS, rendezvous_port

    _in_slurm_task(
        monkeypatch,
        SLURM_JOB_ID="7",
        SLURM_ARRAY_JOB_ID="3",
        SLURM_ARRAY_TASK_ID="0",
        SLURM_JOB_NODELIST="n[0-1]",
        SLURM_JOB_NUM_NODES="2",
        SLURM_NTASKS="4",
        SLURM_NODEID="0",
    )
    ports = set()
    for task in range(4):  # every task of the job, each in a process of its own
        monkeypatch.setenv("SLURM_PROCID", str(task))
        monkeypatch.setenv("SLURM_LOCALID", str(task % 2))
        monkeypatch.delenv("MASTER_PORT", raising=False)
        export_job_env()
        ports.add(int(os.environ["MASTER_PORT"]))
    assert ports == {rendezvous_port("3_0")} and rendezvous_port("3_0") < 32768, ports
    assert {rendezvous_port(f"3_{i}") for i in range(50)} <= set(RENDEZVOUS_PORTS)
    assert len({rendezvous_port(f"3_{i}") for i in range(50)}) == 50  # one array's tasks: 50 ports
    monkeypatch.setenv("MASTER_PORT", "29512")  # a port the site chose (not a Slurm task's, task.py pops those)
    export_job_env()
    assert os.environ["MASTER_PORT"] == "29512"
