"""Parts of prunex.minicluster that need neither root nor Slurm."""

from __future__ import annotations

import pytest

from prunex.minicluster import (
    INSTALL_CMD,
    LINK_MODEL,
    WireRecorder,
    adapt_slurm_params,
    host,
    link_model_active,
    master_addr,
    read_counters,
    sacct_shim,
)
from prunex.minicluster import __main__ as cli
from prunex.minicluster import cluster as cl


def test_adapt_slurm_params_drops_gpu_requests():
    params = {
        "slurm_partition": "gpu",
        "slurm_gres": "gpu:v100:4",
        "gpus_per_node": 4,
        "slurm_cpus_per_gpu": 10,
        "nodes": 2,
        "slurm_additional_parameters": {"gres": "gpu:1,nvme:100", "account": "project_1"},
        "tasks_per_node": 4,
    }
    out, notes = adapt_slurm_params(params)
    assert out == {
        "slurm_partition": "gpu",
        "nodes": 2,
        "slurm_additional_parameters": {"account": "project_1"},
        "tasks_per_node": 4,
    }
    assert len(notes) == 4 and all("no GPUs" in n for n in notes)
    assert "slurm_gres" in params  # input untouched
    assert adapt_slurm_params({"nodes": 1}) == ({"nodes": 1}, [])


def test_wire_recorder_deltas():
    rec = WireRecorder("r1")
    rec.sample(0, "n0", 1000, 10)
    rec.sample(0, "n1", 5000, 50)
    rec.sample(1, "n0", 51000, 20)
    rec.sample(1, "n1", 5500, 50_050)
    rows = rec.rows()
    assert rows[0] == {"run_id": "r1", "iteration": 0, "node": "n0", "tx_bytes": 0, "rx_bytes": 0}
    assert rows[2] == {"run_id": "r1", "iteration": 1, "node": "n0", "tx_bytes": 50000, "rx_bytes": 10}
    assert rows[3]["tx_bytes"] == 500 and rows[3]["rx_bytes"] == 50_000
    assert list(rec.to_frame().columns) == list(WireRecorder.COLUMNS)


def test_outside_a_namespace(monkeypatch):
    # this test process runs in the root namespace: no minicluster veth here
    assert LINK_MODEL == "netns-tc"
    assert link_model_active() is False
    assert read_counters() is None
    assert read_counters("lo") is not None  # an explicit interface is read anyway
    monkeypatch.setenv("SLURM_LAUNCH_NODE_IPADDR", "10.213.7.10")
    assert master_addr() == "10.213.7.10"
    monkeypatch.delenv("SLURM_LAUNCH_NODE_IPADDR")
    monkeypatch.setenv("MASTER_ADDR", "node1")
    assert master_addr() == "node1" and master_addr("x") == "x"


def test_parse_rate_and_time():
    assert cl.parse_rate("1gbit") == 125e6
    assert cl.parse_rate("100mbit") == 12.5e6
    assert cl.parse_rate("125mbps") == 125e6
    assert cl.parse_time_s("0.2ms") == pytest.approx(2e-4)
    assert cl.parse_time_s(None) == 0.0
    with pytest.raises(cl.MiniClusterError):
        cl.parse_rate("fast")


def test_a_cluster_of_no_cpus_or_no_memory_is_refused_before_anything(tmp_path):
    """Review (2026-12-08): `up --cpus-per-node 0` and `up --mem-per-node-mb 0` brought a cluster up, 0 MB read as
    the default (the host's memory over the nodes). Refused in `MiniCluster()`, before anything is made."""
    for kwargs, said in (
        ({"cpus_per_node": 0}, "--cpus-per-node must be >= 1, got 0"),
        ({"mem_per_node_mb": 0}, "--mem-per-node-mb must be >= 1"),
        ({"nodes": 0}, "--nodes must be between 1 and 200"),
    ):
        with pytest.raises(cl.MiniClusterError, match=said):
            cl.MiniCluster(tmp_path / "c", **kwargs)
    assert not (tmp_path / "c").exists()
    assert cl.MiniCluster(tmp_path / "c", cpus_per_node=1, mem_per_node_mb=512).mem_per_node_mb == 512


def test_missing_tools_one_line(monkeypatch, capsys):
    real_which = host.shutil.which
    monkeypatch.setattr(
        host.shutil,
        "which",
        lambda t, path=None: None if t in ("munged", "slurmd") else real_which(t, path=path),
    )
    monkeypatch.setattr(host.os, "geteuid", lambda: 0)
    rc = cli.main(["up", "--dir", "/tmp/prunex-never-created"])
    err = capsys.readouterr().err
    assert rc != 0
    assert err.count("\n") == 1 and "slurmd" in err and "munged" in err and INSTALL_CMD in err


def test_sacct_shim_formats(monkeypatch, capsys, tmp_path):
    conf = tmp_path / "slurm.conf"
    comp = tmp_path / "jobcomp.txt"
    conf.write_text(f"JobCompLoc={comp}\n")
    comp.write_text("JobId=7 UserId=root(0) Name=old job JobState=COMPLETED NodeList=x[0-1] ExitCode=0:0\n")
    monkeypatch.setenv("SLURM_CONF", str(conf))
    live = {
        "12": [{"JobId": "12", "JobState": "FAILED", "NodeList": "pxcn[0-1]"}],
        "13": [
            {"JobId": "14", "ArrayJobId": "13", "ArrayTaskId": "0", "JobState": "RUNNING", "NodeList": "a"},
            {"JobId": "13", "ArrayJobId": "13", "ArrayTaskId": "1", "JobState": "PENDING", "NodeList": ""},
        ],
    }
    monkeypatch.setattr(sacct_shim, "_scontrol", lambda job: live.get(job, []))
    sacct_shim.main(["-o", "JobID,State,NodeList", "--parsable2", "-j", "12", "-j", "13", "-j", "7"])
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "JobID|State|NodeList"
    assert set(out[1:]) == {"12|FAILED|pxcn[0-1]", "13_0|RUNNING|a", "13_1|PENDING|", "7|COMPLETED|x[0-1]"}
