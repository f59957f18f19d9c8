"""A real 2-node Slurm cluster in network namespaces: bring-up, submitit jobs, failures, teardown.

Needs root, Linux, slurm-wlm, munge and iproute2 (see conftest.py for the skip rule).  The teardown test
is last on purpose: it takes the session cluster down and checks that nothing is left behind.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from prunex.minicluster import MiniCluster
from prunex.minicluster.cluster import TBF_BURST_S, parse_rate
from prunex.minicluster.host import missing_requirements, requirements_message
from prunex.minicluster.probe import allreduce_probe

pytestmark = pytest.mark.minicluster

REPO = Path(__file__).resolve().parents[2]
NBYTES = 50_000_000
INCOMPLETE = {"READY", "PENDING", "RUNNING", "UNKNOWN", "REQUEUED", "COMPLETING", "PREEMPTED", "CONFIGURING"}
# every cluster dir a test in this module creates, checked by the teardown test
_CLUSTER_DIRS: list[Path] = []


def _cli(*args: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    e = dict(os.environ if env is None else env)
    e["PYTHONPATH"] = os.pathsep.join([str(REPO)] + [p for p in [e.get("PYTHONPATH")] if p])
    return subprocess.run(
        [sys.executable, "-m", "prunex.minicluster", *args],
        capture_output=True,
        text=True,
        env=e,
        timeout=timeout,
        cwd=REPO,
    )


def _executor(folder: Path):
    import submitit

    ex = submitit.AutoExecutor(folder=folder, cluster="slurm")
    ex.update_parameters(nodes=2, tasks_per_node=2, cpus_per_task=1, timeout_min=5)
    return ex


def _wait_job(job, timeout: float) -> tuple[str, float]:
    """Wait (bounded) until every task wrote its result or Slurm calls the job finished."""
    t0 = time.monotonic()
    state = "UNKNOWN"
    while time.monotonic() - t0 < timeout:
        if all(t.paths.result_pickle.exists() for t in job._sub_jobs or [job]):
            return "RESULTS", time.monotonic() - t0
        state = job.watcher.get_state(job.job_id, mode="force")
        if state.split()[0].upper() not in INCOMPLETE:
            return state, time.monotonic() - t0
        time.sleep(1.0)
    return state, time.monotonic() - t0


def _live_pids(names: tuple[str, ...], marker: str) -> list[str]:
    """Non-zombie processes called one of ``names`` whose environment mentions ``marker``."""
    out = []
    for name in names:
        res = subprocess.run(["pgrep", "-x", name], capture_output=True, text=True)
        for pid in res.stdout.split():
            try:
                if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                    continue
                if marker.encode() in Path(f"/proc/{pid}/environ").read_bytes():
                    out.append(f"{name}:{pid}")
            except (OSError, IndexError):
                continue
    return out


def _leftovers(cluster: MiniCluster) -> dict[str, list[str]]:
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    qdiscs = subprocess.run(["tc", "qdisc", "show"], capture_output=True, text=True).stdout
    return {
        "netns": [ln for ln in netns.splitlines() if cluster.prefix in ln],
        "links": [ln for ln in links.splitlines() if cluster.prefix in ln],
        "qdiscs": [ln for ln in qdiscs.splitlines() if cluster.prefix in ln],
        "procs": _live_pids(("slurmctld", "slurmd", "munged", "slurmstepd"), str(cluster.dir)),
    }


@pytest.fixture(autouse=True)
def _needs_minicluster_host():
    missing = missing_requirements()
    if missing:
        pytest.skip(requirements_message(missing))


# --------------------------------------------------------------------------------------------- tests
def test_up_nodes_idle_in_gpu_partition(minicluster):
    _CLUSTER_DIRS.append(minicluster.dir)
    res = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %P %T %c"], capture_output=True, text=True, check=True)
    rows = sorted(line.split() for line in res.stdout.splitlines())
    assert rows == [[minicluster.node_name(i), "gpu*", "idle", "2"] for i in range(2)], res.stdout


def test_status_cli_shows_nodes_and_links(minicluster):
    res = _cli("status", "--dir", str(minicluster.dir))
    assert res.returncode == 0, res.stderr
    for i in range(2):
        assert minicluster.node_name(i) in res.stdout
    assert res.stdout.count("tbf") == 4 and "rate 1Gbit" in res.stdout  # both directions of both links


def test_shape_changes_every_link_in_place_and_a_node_reads_its_rate(minicluster):
    """`shape` (./run_all.sh's regime profile before its link-free Pareto) sets both directions of every node
    link to a new rate while the cluster runs; a process in a node reads it (what a run's meta.json records)."""
    read = [sys.executable, "-c", "from prunex.minicluster.wire import observed_link_mbit; print(observed_link_mbit())"]
    in_node = ["ip", "netns", "exec", minicluster.node_name(1), *read]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    try:
        res = _cli("shape", "--inter-bw", "250mbit", "--dir", str(minicluster.dir))
        assert res.returncode == 0, res.stderr
        status = _cli("status", "--dir", str(minicluster.dir)).stdout
        assert status.count("rate 250Mbit") == 4 and "inter_bw=250mbit" in status, status
        assert subprocess.run(in_node, capture_output=True, text=True, env=env).stdout.split() == ["250.0"]
        assert subprocess.run(read, capture_output=True, text=True, env=env).stdout.split() == ["None"]  # no node
        bad = _cli("shape", "--inter-bw", "fast", "--dir", str(minicluster.dir))
        assert bad.returncode == 1 and bad.stderr.count("\n") == 1 and "cannot parse bandwidth" in bad.stderr
    finally:  # the session cluster's rate for the tests after this one
        assert _cli("shape", "--inter-bw", "1gbit", "--dir", str(minicluster.dir)).returncode == 0
    assert subprocess.run(in_node, capture_output=True, text=True, env=env).stdout.split() == ["1000.0"]


RECEIVER = """
import socket, sys, time
srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind((sys.argv[1], int(sys.argv[2]))); srv.listen(1); print("ready", flush=True)
conn, _ = srv.accept(); want, got, first, first_read = int(sys.argv[3]), 0, None, 0
while got < want:
    chunk = conn.recv(1 << 20)
    if not chunk:
        break
    if first is None:
        first, first_read = time.perf_counter(), len(chunk)
    got += len(chunk)
print(got, time.perf_counter() - first, first_read, flush=True)
"""
SENDER = """
import socket, sys, time
s = socket.create_connection((sys.argv[1], int(sys.argv[2]))); time.sleep(0.3)  # idle: the token bucket fills
s.sendall(b"x" * int(sys.argv[3])); s.close()
"""
TC_SIZE = {"b": 1, "kb": 1024, "mb": 1024**2, "gb": 1024**3}  # tc's byte units


def _tbf_burst_bytes(qdisc_show: str) -> int:
    """The burst of the tbf qdisc in `tc qdisc show` output, in bytes ("burst 12500b", "burst 64Kb")."""
    words = qdisc_show.split()
    value = words[words.index("burst") + 1]
    digits = value.rstrip("bBkKmMgG")
    return round(float(digits) * TC_SIZE[value[len(digits) :].lower()])


def test_every_node_link_holds_a_one_frame_token_bucket(minicluster):
    """Both directions of every node link hold the burst `_tbf_args` gives, read back from the kernel: one frame
    or 100 us of traffic, whichever is larger (review 2026-11-28: it was at least 64 KiB and 1 ms of traffic, and
    the exchange bench measured messages faster than their bytes over the rate). This is the burst's check; the
    timing test below cannot resolve a 1 ms burst on a loaded 2-core machine (its docstring says why)."""
    want = max(minicluster.mtu + 14, parse_rate(minicluster.inter_bw) * TBF_BURST_S)
    for i in range(2):
        ns = minicluster.node_name(i)
        for where in (["-n", ns, "qdisc", "show", "dev", ns], ["qdisc", "show", "dev", minicluster.root_veth(i)]):
            shown = subprocess.run(["tc", *where], capture_output=True, text=True, check=True).stdout
            assert "tbf" in shown, (where, shown)
            # tc stores the burst as a time at the rate and prints it back rounded (12375 B for 12500 at 1 Gbit/s)
            assert abs(_tbf_burst_bytes(shown) - want) <= 0.02 * want, (where, shown, want)


def test_tbf_burst_bytes_reads_tcs_units():
    assert _tbf_burst_bytes("qdisc tbf 1: root refcnt 3 rate 1Gbit burst 12500b lat 100ms") == 12500
    assert _tbf_burst_bytes("qdisc tbf 1: root refcnt 3 rate 27733Kbit burst 64Kb lat 100ms") == 65536


def test_a_message_after_an_idle_spell_does_not_beat_the_links_rate(minicluster):
    """A node link carries no more than its rate after an idle spell, beyond its bucket's burst: 2 MB from node 0
    to node 1, timed on arrival from the receiver's first read to its last.

    Only the bytes after the first read count: the first read holds what arrived before the receiver ran, and on
    a loaded 2-core machine that was up to 116 KB (a probe of 40 transfers beside three spinning processes,
    2026-11-29; 554 KB when the connection had carried 1 MB before), about 0.9 ms of the 16.7 ms the message
    takes. Before the first read was subtracted the test failed once in CI, 2 MB in 0.0158 s against a floor of
    0.97 x 0.0167 s: 0.4 ms short, less than such a first read hides (that run did not record its first read).
    So this bounds the rate, not the burst: a burst that arrives before the first read is not seen here, and the
    burst is checked on the qdisc itself (the test above). A read takes at most 1 MiB, so at least half the
    message is timed."""
    nbytes, port = 2 << 20, minicluster.ctl_port + 7
    rate = parse_rate(minicluster.inter_bw)  # bytes per second
    ip = minicluster.node_ip(1)
    in_node = lambda i: ["ip", "netns", "exec", minicluster.node_name(i), sys.executable, "-c"]  # noqa: E731
    receiver = subprocess.Popen([*in_node(1), RECEIVER, ip, str(port), str(nbytes)], stdout=subprocess.PIPE, text=True)
    try:
        assert receiver.stdout.readline().strip() == "ready"
        subprocess.run([*in_node(0), SENDER, ip, str(port), str(nbytes)], check=True, timeout=60)
        got, seconds, first_read = receiver.communicate(timeout=60)[0].split()
    finally:
        receiver.kill()
    after_first = nbytes - int(first_read)
    floor = (after_first - max(minicluster.mtu + 14, rate * TBF_BURST_S)) / rate  # what the bucket's burst allows
    print(
        f"\n{nbytes} B at {minicluster.inter_bw}, first read {first_read} B: "
        f"the rest in {float(seconds) * 1e3:.2f} ms; "
        f"its bytes over the rate {after_first / rate * 1e3:.2f} ms"
    )
    assert int(got) == nbytes
    assert float(seconds) >= 0.97 * floor, (seconds, floor)


def test_submitit_allreduce_intra_vs_inter(minicluster, tmp_path, record_property):
    ex = _executor(tmp_path / "jobs")
    job = ex.submit(allreduce_probe, NBYTES, 2)
    state, waited = _wait_job(job, timeout=120)
    assert state == "RESULTS", f"job {job.job_id} ended {state} after {waited:.0f}s: {job.stderr(0)}"
    results = job.results()
    leaders = [r for r in results if r["leader"]]
    assert len(results) == 4 and len(leaders) == 2
    assert {r["node"] for r in results} == {minicluster.node_name(0), minicluster.node_name(1)}
    assert all(r["link_model_active"] for r in results)
    assert results[0]["master_addr"] == minicluster.node_ip(0)

    intra = max(min(r["intra_s"]) for r in results)  # slowest rank's best intra-node time
    inter = min(min(r["inter_s"]) for r in leaders)  # best inter-node time
    tx = [t for r in leaders for t in r["tx_bytes"]]
    rx = [t for r in leaders for t in r["rx_bytes"]]
    intra_wire = [b for r in results for b in r["intra_wire_bytes"]]  # the link's bytes during the intra phase
    # ring AllReduce of n bytes over 2 ranks sends n bytes each way: n*8/1e9 s at 1 Gbit/s
    floor_s = NBYTES * 8 / 1e9 * (2 * (2 - 1) / 2)
    report = {
        "intra_s": round(intra, 4),
        "inter_s": round(inter, 4),
        "floor_s": floor_s,
        "tx_bytes": tx,
        "rx_bytes": rx,
        "intra_wire_bytes": intra_wire,
        "nbytes": NBYTES,
        "wait_s": round(waited, 1),
    }
    print(f"\nminicluster 50MB allreduce: {json.dumps(report)}")
    record_property("allreduce", json.dumps(report))
    assert inter >= floor_s * 0.95, report
    # The intra-node path is not shaped: its bytes do not cross the node's link (counted by the kernel, whatever
    # the load), and it takes less than the shaped link's floor. (Timing bounds tighter than that floor failed on
    # a loaded 2-core CI machine: a 50 MB in-memory AllReduce took 0.145 s instead of ~0.07 s under a second
    # pytest worker, and 0.23 s on a slower VM with three.)
    assert len(intra_wire) == 4 * 2 and max(intra_wire) <= 0.01 * NBYTES, report
    assert intra < floor_s, report
    assert tx and all(abs(t - NBYTES) <= 0.05 * NBYTES for t in tx), report
    assert all(abs(r - NBYTES) <= 0.05 * NBYTES for r in rx), report


def test_interrupted_up_tears_down(tmp_path):
    c = MiniCluster(tmp_path / "interrupted", nodes=1)
    _CLUSTER_DIRS.append(c.dir)
    env = dict(os.environ, PRUNEX_MINICLUSTER_PAUSE="network:30")
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + [p for p in [env.get("PYTHONPATH")] if p])
    proc = subprocess.Popen(
        [sys.executable, "-m", "prunex.minicluster", "up", "--nodes", "1", "--dir", str(c.dir)],
        env=env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not _leftovers(c)["qdiscs"] and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _leftovers(c)["netns"], "up never created its namespace"
        proc.send_signal(signal.SIGINT)  # Ctrl-C half-way
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert not any(_leftovers(c).values()), _leftovers(c)
    assert not (c.dir / "cluster.json").exists()


def test_stale_cluster_is_removed_by_next_up(tmp_path):
    d = tmp_path / "stale"
    _CLUSTER_DIRS.append(d.resolve())
    res = _cli("up", "--nodes", "1", "--cpus-per-node", "1", "--dir", str(d), "-q")
    assert res.returncode == 0, res.stderr
    assert "export SLURM_CONF=" in res.stdout
    # the session that made it is gone; now its controller dies too, leaving a half-dead cluster
    ctl = int((d / "run" / "slurmctld.pid").read_text())
    os.kill(ctl, signal.SIGKILL)
    c = MiniCluster(d, nodes=1, cpus_per_node=1)
    c.up()
    try:
        with c.activated():
            res = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %T"], capture_output=True, text=True)
        assert res.stdout.split() == [c.node_name(0), "idle"]
    finally:
        res = _cli("down", "--dir", str(d))
    assert res.returncode == 0 and "removed" in res.stdout
    assert not any(_leftovers(c).values()), _leftovers(c)
    res = _cli("down", "--dir", str(d))  # down on nothing: no-op, exit 0
    assert res.returncode == 0 and "nothing to remove" in res.stdout


def test_inter_latency(tmp_path):
    """netem is optional in a kernel: with it the delay is installed, without it `up` says so and exits."""
    from prunex.minicluster.host import netem_available

    d = tmp_path / "latency"
    _CLUSTER_DIRS.append(d.resolve())
    res = _cli("up", "--nodes", "1", "--inter-latency", "0.2ms", "--dir", str(d), "-q")
    if netem_available():
        try:
            assert res.returncode == 0, res.stderr
            status = _cli("status", "--dir", str(d)).stdout
            assert "netem" in status, status
        finally:
            _cli("down", "--dir", str(d))
    else:
        assert res.returncode == 1 and "sch_netem" in res.stderr, res.stderr
    assert not any(_leftovers(MiniCluster(d)).values())


def test_down_leaves_nothing_behind(minicluster_session):
    c = minicluster_session
    _CLUSTER_DIRS.append(c.dir)
    assert c.down() is True
    for d in _CLUSTER_DIRS:
        left = _leftovers(MiniCluster(d))
        assert not any(left.values()), (d, left)
        empty = [p for p in Path(d).rglob("*") if p.is_dir() and not any(p.iterdir())]
        assert not empty, f"down left empty folders: {empty}"
    assert c.down() is False
