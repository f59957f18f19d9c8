"""A real Slurm cluster of M nodes on one Linux machine.

Layout (all names derived from a short hash ``h`` of the cluster directory's absolute path)::

    root namespace: bridge pxc<h>b  10.213.X.1/24   slurmctld (port P), munged (private socket)
        veth pxc<h>r<i>  (enslaved to the bridge, tbf on egress = traffic INTO node i)
    namespace pxc<h>n<i>: lo, veth pxc<h>n<i> 10.213.X.(10+i)/24 (tbf [+ netem] on egress = traffic OUT of
        node i), slurmd -N pxc<h>n<i> (port P+1), its slurmstepds and the job's tasks

Slurm runs with ``SLURM_CONF=<dir>/etc/slurm.conf`` and munge with its own key and socket in the directory;
nothing under /etc is touched.

This module brings a cluster up (network, configuration, munge, slurmctld, the slurmds) and tears it down
(`MiniCluster.down`, `down_all`). What a cluster made and what of it is still there (``<dir>/cluster.json``,
so that ``down``, or the next ``up``, can remove a cluster whose session was killed; its daemons, namespaces
and links; the ``sacct`` stand-in for its jobs) is `prunex.minicluster.accounting`; the commands, the
prerequisites and the processes of the machine are `prunex.minicluster.host`.
"""

from __future__ import annotations

import contextlib
import getpass
import hashlib
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

from . import host
from .accounting import (
    DAEMON_COMMS,
    STATE_FILE,
    install_sacct,
    leftover_links,
    leftover_netns,
    load_state,
    pid_of,
    pids_with_env,
    running_cluster_dirs,
    write_state,
)
from .host import MiniClusterError, missing_requirements, requirements_message
from .wire import LINK_MODEL

DEFAULT_DIR = ".prunex-cluster"
PARTITION = "gpu"
SUBNET_BASE = "10.213"
NODE_HOST_OFFSET = 10
PORT_BASE = 17000
STEP_DRAIN_TIMEOUT_S = 10.0
# A node link's token bucket holds one frame or this much traffic, whichever is more (`MiniCluster._tbf_args`):
# a message after an idle spell gains at most this over a real link of the rate (tc needs a frame; 100 us of
# traffic keeps the bucket's refills at most 10,000 per second at high rates).
TBF_BURST_S = 100e-6
# Slurm holds a requeued job for cred_expire + 1 s (slurm.conf(5), AuthInfo); its default of 120 s
# suits a real cluster's slow prologs, but on one machine it only delays a requeued job's restart.
CRED_EXPIRE_S = 10


# --------------------------------------------------------------------------------------------- helpers
def _short_hash(path: Path) -> str:
    return hashlib.sha1(str(path).encode()).hexdigest()[:6]


def parse_rate(rate: str) -> float:
    """tc rate string (``1gbit``, ``100mbit``, ``10Gbit``, ``125mbps``) -> bytes per second."""
    m = re.fullmatch(r"\s*([0-9.]+)\s*([kmgt]?)(bit|bps)?\s*", str(rate).lower())
    if not m:
        raise MiniClusterError(f"cannot parse bandwidth {rate!r} (use e.g. 1gbit, 100mbit)")
    num = float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}[m.group(2)]
    return num if m.group(3) == "bps" else num / 8


def parse_time_s(value: str | float | None) -> float:
    """``0.2ms``/``200us``/``1s``/0.0002 -> seconds (None -> 0)."""
    if value in (None, "", 0, "0"):
        return 0.0
    if isinstance(value, (int, float)):
        return float(value)
    m = re.fullmatch(r"\s*([0-9.]+)\s*(s|ms|us|usec|msec|sec)?\s*", value.lower())
    if not m:
        raise MiniClusterError(f"cannot parse latency {value!r} (use e.g. 0.2ms, 200us)")
    scale = {None: 1.0, "s": 1.0, "sec": 1.0, "ms": 1e-3, "msec": 1e-3, "us": 1e-6, "usec": 1e-6}[m.group(2)]
    return float(m.group(1)) * scale


# --------------------------------------------------------------------------------------------- cluster
class MiniCluster:
    """An M-node Slurm cluster made of network namespaces joined by tc-shaped veth links.

    >>> with MiniCluster("/tmp/c", nodes=2, cpus_per_node=2, inter_bw="1gbit") as c:
    ...     os.environ.update(c.env())   # then submitit AutoExecutor(cluster="slurm") works unchanged
    """

    def __init__(
        self,
        dir: str | os.PathLike = DEFAULT_DIR,
        nodes: int = 2,
        cpus_per_node: int = 2,
        inter_bw: str | None = "1gbit",
        inter_latency: str | float | None = None,
        mtu: int = 9000,
        mem_per_node_mb: int | None = None,
        verbose: bool = False,
    ) -> None:
        self.dir = Path(dir).expanduser().resolve()
        if re.search(r"\s", str(self.dir)):
            raise MiniClusterError(f"cluster dir must not contain whitespace: {self.dir}")
        self.nodes = int(nodes)
        self.cpus_per_node = int(cpus_per_node)
        self.inter_bw = inter_bw if inter_bw not in ("", "0", 0, "none") else None
        self.inter_latency = inter_latency
        self.mtu = int(mtu)
        self.mem_per_node_mb = mem_per_node_mb
        self.verbose = verbose
        self.hash = _short_hash(self.dir)
        self.prefix = f"pxc{self.hash}"
        self.bridge = f"{self.prefix}b"
        self.cluster_name = self.prefix
        self.hostname = socket.gethostname().split(".")[0]
        self.subnet: str | None = None  # "10.213.X"
        self.ctl_port: int | None = None
        if self.nodes < 1 or self.nodes > 200:
            raise MiniClusterError("--nodes must be between 1 and 200")
        # 2026-12-08: --cpus-per-node 0 and --mem-per-node-mb 0 brought a cluster up (0 MB read as the default)
        if self.cpus_per_node < 1:
            raise MiniClusterError(f"--cpus-per-node must be >= 1, got {self.cpus_per_node}")
        if mem_per_node_mb is not None and mem_per_node_mb < 1:
            raise MiniClusterError(
                f"--mem-per-node-mb must be >= 1 (or left out: the host's memory over the nodes), got {mem_per_node_mb}"
            )

    # ---------------------------------------------------------------------------------- names/paths
    def node_name(self, i: int) -> str:
        """Slurm node name == namespace name == name of the namespace end of the veth."""
        return f"{self.prefix}n{i}"

    def root_veth(self, i: int) -> str:
        return f"{self.prefix}r{i}"

    def node_ip(self, i: int) -> str:
        return f"{self.subnet}.{NODE_HOST_OFFSET + i}"

    @property
    def ctl_ip(self) -> str:
        return f"{self.subnet}.1"

    @property
    def slurm_conf(self) -> Path:
        return self.dir / "etc" / "slurm.conf"

    @property
    def munge_socket(self) -> Path:
        return self.dir / "munge" / "munge.socket"

    @property
    def state_path(self) -> Path:
        return self.dir / STATE_FILE

    def env(self) -> dict[str, str]:
        """Environment a client (sbatch/srun/submitit) needs: merge into os.environ or pass to subprocess.

        ``PATH`` gets ``<dir>/bin`` in front: it holds a small ``sacct`` that answers from slurmctld
        (there is no accounting database), which submitit uses to poll job states.
        """
        path = os.environ.get("PATH", os.defpath)
        bindir = str(self.dir / "bin")
        if path.split(os.pathsep)[0] != bindir:
            path = bindir + os.pathsep + path
        return {
            "SLURM_CONF": str(self.slurm_conf),
            "PATH": path,
            "PRUNEX_MINICLUSTER_DIR": str(self.dir),
            "PRUNEX_LINK_MODEL": LINK_MODEL,
        }

    @contextlib.contextmanager
    def activated(self):
        """Context manager putting :meth:`env` into ``os.environ`` (restored on exit)."""
        saved = {k: os.environ.get(k) for k in self.env()}
        os.environ.update(self.env())
        try:
            yield self
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

    def _daemon_env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(self.env())
        env["PATH"] = env["PATH"] + os.pathsep + "/usr/sbin:/sbin"
        return env

    def _log(self, msg: str) -> None:
        if self.verbose:
            print(f"[minicluster] {msg}", file=sys.stderr, flush=True)

    # ---------------------------------------------------------------------------------- the record
    def _write_state(self, phase: str) -> None:
        state = {
            "phase": phase,
            "dir": str(self.dir),
            "hash": self.hash,
            "nodes": self.nodes,
            "cpus_per_node": self.cpus_per_node,
            "inter_bw": self.inter_bw,
            "inter_latency": self.inter_latency,
            "mtu": self.mtu,
            "subnet": self.subnet,
            "ctl_port": self.ctl_port,
            "bridge": self.bridge,
            "namespaces": [self.node_name(i) for i in range(self.nodes)],
            "link_model": LINK_MODEL,
            "pid_of_up": os.getpid(),
            "time": time.time(),
        }
        write_state(self.dir, state)

    def _adopt_state(self, state: dict) -> None:
        self.subnet = state.get("subnet") or self.subnet
        self.ctl_port = state.get("ctl_port") or self.ctl_port
        self.nodes = int(state.get("nodes") or self.nodes)

    # ---------------------------------------------------------------------------------- up
    def __enter__(self) -> MiniCluster:
        self.up()
        return self

    def __exit__(self, *exc) -> None:
        self.down()

    def up(self, node_timeout_s: float = 60.0) -> MiniCluster:
        missing = missing_requirements()
        if missing:
            raise MiniClusterError(requirements_message(missing))
        latency_s = parse_time_s(self.inter_latency)
        if latency_s > 0 and not host.netem_available():
            raise MiniClusterError(
                "this kernel has no sch_netem (CONFIG_NET_SCH_NETEM), so --inter-latency cannot be "
                "emulated here; run without it"
            )
        if self.inter_bw:
            parse_rate(self.inter_bw)
        if self.state_path.exists() or leftover_links(self.prefix) or leftover_netns(self.prefix):
            self._log("removing a stale cluster from an earlier session")
            self.down()
        try:
            self._choose_subnet_and_ports()
            for sub in ("etc", "run", "log", "state", "spool", "munge", "bin"):
                (self.dir / sub).mkdir(parents=True, exist_ok=True)
            self._write_state("starting")
            self._setup_network(latency_s)
            self._test_pause("network")
            self._write_configs()
            self._start_munge()
            self._start_slurmctld()
            self._start_slurmds()
            self._wait_nodes_idle(node_timeout_s)
            self._write_state("up")
        except BaseException:
            self._log("bring-up failed; tearing down")
            with contextlib.suppress(Exception):
                self.down()
            raise
        return self

    @staticmethod
    def _test_pause(step: str) -> None:
        """Test hook: ``PRUNEX_MINICLUSTER_PAUSE=<step>:<seconds>`` sleeps after that bring-up step (the
        tests use it to interrupt ``up`` half-way deterministically)."""
        spec = os.environ.get("PRUNEX_MINICLUSTER_PAUSE", "")
        if spec.startswith(step + ":"):
            time.sleep(float(spec.split(":", 1)[1]))

    def _choose_subnet_and_ports(self) -> None:
        used = host.used_subnets()
        x = int(self.hash, 16) % 250 + 1
        for k in range(250):
            cand = f"{SUBNET_BASE}.{(x - 1 + k) % 250 + 1}"
            if cand not in used:
                self.subnet = cand
                break
        else:
            raise MiniClusterError(f"no free /24 in {SUBNET_BASE}.0.0/16")
        base = PORT_BASE + (int(self.hash, 16) % 1000) * 2
        for k in range(500):
            p = PORT_BASE + (base - PORT_BASE + 2 * k) % 2000
            if host.port_free(p):
                self.ctl_port = p
                break
        else:
            raise MiniClusterError("no free TCP port for slurmctld")

    def _tbf_args(self) -> list[str]:
        """The token bucket of a node link at `inter_bw`, its burst one frame or 100 us of traffic, whichever is
        larger (`TBF_BURST_S`).

        A message that finds the bucket full crosses its first `burst` bytes at memory speed: a real link of the
        rate has no such thing. Until 2026-11-28 the burst was at least 64 KiB (and 1 ms of traffic): at the
        regime logs' 27.85 Mbit/s that was 18.8 ms free per message, and the exchange bench measured every
        inter-node exchange *below* its bytes over the rate (DDP's step 0.437 s against 0.473 s; bf16 PruneX
        0.064 against 0.087 s), flattering the smaller messages: bf16 PruneX 6.85x less than DDP's step, 5.57x
        with a one-frame burst, at which each exchange took its bytes over the rate within 3% (docs/results.md)."""
        rate_bps = parse_rate(self.inter_bw)  # bytes per second
        burst = int(max(self.mtu + 14, rate_bps * TBF_BURST_S))
        return ["tbf", "rate", self.inter_bw, "burst", str(burst), "latency", "100ms"]

    def _tbf(self, ns: str | None, dev: str, with_netem_s: float) -> None:
        """The link's qdiscs: a token bucket at `inter_bw` (if set), under it a netem delay (if any)."""
        pre = ["tc"] + (["-n", ns] if ns else [])
        netem = f"netem delay {with_netem_s * 1e6:.0f}us limit 100000".split()
        if not self.inter_bw:
            if with_netem_s > 0:
                host.run(pre + ["qdisc", "add", "dev", dev, "root"] + netem)
            return
        host.run(pre + ["qdisc", "add", "dev", dev, "root", "handle", "1:"] + self._tbf_args())
        if with_netem_s > 0:
            host.run(pre + ["qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:"] + netem)

    def reshape(self, inter_bw: str) -> None:
        """Set every node link of the running cluster to the rate `inter_bw` (both directions), in place:
        jobs and daemons go on, a netem delay under the bucket stays. A cluster brought up unshaped has no
        bucket to change: bring it up again with `--inter-bw`. Traffic in flight meets the new rate at once;
        `prunex.minicluster.wire.observed_link_mbit` reads it from a job, so each run records the rate it had."""
        state = load_state(self.dir)
        if not state or state.get("phase") != "up":
            raise MiniClusterError(f"no running minicluster in {self.dir}")
        self._adopt_state(state)
        if not state.get("inter_bw"):
            raise MiniClusterError(
                f"the minicluster in {self.dir} was brought up unshaped: bring it up with --inter-bw"
            )
        parse_rate(inter_bw)
        self.inter_bw, self.mtu = inter_bw, int(state.get("mtu") or self.mtu)
        for i in range(self.nodes):
            ns = self.node_name(i)
            for pre, dev in ((["tc", "-n", ns], ns), (["tc"], self.root_veth(i))):
                host.run(pre + ["qdisc", "change", "dev", dev, "root", "handle", "1:"] + self._tbf_args())
        write_state(self.dir, {**state, "inter_bw": inter_bw, "time": time.time()})
        self._log(f"node links reshaped to {inter_bw}")

    @staticmethod
    def _no_ipv6(ns: str | None, dev: str) -> None:
        """Best effort: no IPv6 on the cluster's links, so that link-local chatter (router/neighbour
        solicitations) stays off the wire counters.  /proc/sys/net is per network namespace."""
        path = f"/proc/sys/net/ipv6/conf/{dev}/disable_ipv6"
        if ns is None:
            with contextlib.suppress(OSError), open(path, "w") as fh:
                fh.write("1")
        else:
            host.run(["nsenter", f"--net=/run/netns/{ns}", "sh", "-c", f"echo 1 > {path}"], check=False)

    def _setup_network(self, latency_s: float) -> None:
        self._log(f"network {self.subnet}.0/24 bridge {self.bridge}")
        host.run(["ip", "link", "add", self.bridge, "mtu", str(self.mtu), "type", "bridge"])
        self._no_ipv6(None, self.bridge)
        host.run(["ip", "addr", "add", f"{self.ctl_ip}/24", "dev", self.bridge])
        host.run(["ip", "link", "set", self.bridge, "up"])
        for i in range(self.nodes):
            ns, veth_r = self.node_name(i), self.root_veth(i)
            host.run(["ip", "netns", "add", ns])
            self._no_ipv6(ns, "all")
            self._no_ipv6(ns, "default")  # before the veth end is created in the namespace
            host.run(
                [
                    "ip",
                    "link",
                    "add",
                    veth_r,
                    "mtu",
                    str(self.mtu),
                    "type",
                    "veth",
                    "peer",
                    "name",
                    ns,
                    "mtu",
                    str(self.mtu),
                    "netns",
                    ns,
                ]
            )
            self._no_ipv6(None, veth_r)
            host.run(["ip", "link", "set", veth_r, "master", self.bridge])
            host.run(["ip", "link", "set", veth_r, "up"])
            host.run(["ip", "-n", ns, "link", "set", "lo", "up"])
            host.run(["ip", "-n", ns, "addr", "add", f"{self.node_ip(i)}/24", "dev", ns])
            host.run(["ip", "-n", ns, "link", "set", ns, "up"])
            # egress of the namespace end: traffic leaving node i (+ the one-way latency, if any)
            self._tbf(ns, ns, latency_s)
            # egress of the root end: traffic entering node i
            self._tbf(None, veth_r, 0.0)

    def _write_configs(self) -> None:
        d = self.dir
        # munge key: 1 KiB of randomness, private to this cluster
        key = d / "munge" / "munge.key"
        if not key.exists():
            fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(os.urandom(1024))
        os.chmod(d / "munge", 0o755)  # the key itself is 0600; clients need to reach the socket
        (d / "etc" / "plugstack.conf").write_text("# empty: no SPANK plugins in the minicluster\n")
        mem = self.mem_per_node_mb or max(1024, host.mem_total_mb() // self.nodes)
        node_lines = "\n".join(
            f"NodeName={self.node_name(i)} NodeAddr={self.node_ip(i)} NodeHostname={self.hostname} "
            f"CPUs={self.cpus_per_node} Boards=1 SocketsPerBoard=1 CoresPerSocket={self.cpus_per_node} "
            f"ThreadsPerCore=1 RealMemory={mem} State=UNKNOWN"
            for i in range(self.nodes)
        )
        conf = f"""# generated by prunex.minicluster for {d} -- do not edit, `down` + `up` regenerate it
ClusterName={self.cluster_name}
SlurmctldHost={self.hostname}({self.ctl_ip})
SlurmctldPort={self.ctl_port}
SlurmdPort={self.ctl_port + 1}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={self.munge_socket},cred_expire={CRED_EXPIRE_S}
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool/%n
SlurmctldPidFile={d}/run/slurmctld.pid
SlurmdPidFile={d}/run/slurmd-%n.pid
SlurmctldLogFile={d}/log/slurmctld.log
SlurmdLogFile={d}/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig={d}/etc/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
MpiDefault=none
MailProg=/bin/true
SwitchType=switch/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc={d}/state/jobcomp.txt
SlurmdParameters=config_overrides
ReturnToService=2
KillWait=2
MessageTimeout=5
UnkillableStepTimeout=30
SlurmdTimeout=60
SlurmctldTimeout=30
InactiveLimit=0
MinJobAge=3600
Waittime=0
CompleteWait=0
{node_lines}
PartitionName={PARTITION} Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""
        self.slurm_conf.write_text(conf)
        install_sacct(d)  # the sacct stand-in (prunex.minicluster.accounting)

    def _spawn(self, cmd: list[str], logname: str) -> None:
        """Start a self-daemonizing program; its own stdout/stderr go to a log file."""
        with open(self.dir / "log" / logname, "ab") as log:
            res = subprocess.run(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=self._daemon_env(),
                cwd=self.dir,
                timeout=60,
                start_new_session=True,
            )
        if res.returncode != 0:
            tail = (self.dir / "log" / logname).read_text(errors="replace").strip().splitlines()[-3:]
            raise MiniClusterError(f"{cmd[0]} {' '.join(cmd[1:3])} exited {res.returncode}: {' | '.join(tail)}")

    def _start_munge(self) -> None:
        m = self.dir / "munge"
        self._log("starting munged")
        self._spawn(
            [
                "munged",
                "--force",
                f"--socket={self.munge_socket}",
                f"--key-file={m / 'munge.key'}",
                f"--pid-file={m / 'munged.pid'}",
                f"--log-file={self.dir / 'log' / 'munged.log'}",
                f"--seed-file={m / 'munged.seed'}",
                "--num-threads=4",
            ],
            "munged.out",
        )
        if not host.wait_until(self.munge_socket.exists, 10):
            raise MiniClusterError(f"munged did not create {self.munge_socket}; see {self.dir}/log/munged.log")

    def _start_slurmctld(self) -> None:
        self._log(f"starting slurmctld on {self.ctl_ip}:{self.ctl_port}")
        self._spawn(["slurmctld", "-c", "-i"], "slurmctld.out")
        env = self._daemon_env()

        def answers() -> bool:
            res = host.run(["scontrol", "ping"], check=False, env=env, timeout=10)
            return res.returncode == 0 and "UP" in res.stdout

        if not host.wait_until(answers, 20, 0.2):
            raise MiniClusterError(f"slurmctld did not answer; see {self.dir}/log/slurmctld.log")

    def _start_slurmds(self) -> None:
        for i in range(self.nodes):
            ns = self.node_name(i)
            (self.dir / "spool" / ns).mkdir(parents=True, exist_ok=True)
            self._log(f"starting slurmd {ns} in its namespace")
            # nsenter --net only (not `ip netns exec`, which remounts /sys and breaks slurmd's cgroup probe)
            self._spawn(["nsenter", f"--net=/run/netns/{ns}", "slurmd", "-N", ns], f"slurmd-{ns}.out")

    def _node_states(self) -> dict[str, str]:
        res = host.run(["sinfo", "-h", "-N", "-o", "%N %T"], check=False, env=self._daemon_env(), timeout=15)
        out = {}
        for line in res.stdout.splitlines():
            parts = line.split()
            if len(parts) >= 2:
                out[parts[0]] = parts[1]
        return out

    def _wait_nodes_idle(self, timeout: float) -> None:
        names = {self.node_name(i) for i in range(self.nodes)}
        deadline = time.monotonic() + timeout
        resumed = False
        while True:
            states = self._node_states()
            if names <= set(states) and all(states[n].rstrip("*~#").startswith("idle") for n in names):
                return
            if not resumed and any(states.get(n, "").startswith(("drain", "down")) for n in names):
                # ReturnToService=2 handles most cases; a node drained for a config mismatch needs a nudge
                bad = [n for n in names if states.get(n, "").startswith(("drain", "down"))]
                host.run(
                    ["scontrol", "update", f"NodeName={','.join(bad)}", "State=RESUME"],
                    check=False,
                    env=self._daemon_env(),
                )
                resumed = True
            if time.monotonic() > deadline:
                raise MiniClusterError(f"nodes not idle after {timeout:.0f}s: {states}; see {self.dir}/log")
            time.sleep(0.25)

    # ---------------------------------------------------------------------------------- down
    def down(self, drain_timeout_s: float = STEP_DRAIN_TIMEOUT_S) -> bool:
        """Remove everything ``up`` created. Returns False when there was nothing to remove."""
        state = load_state(self.dir)
        if state:
            self._adopt_state(state)
        namespaces = leftover_netns(self.prefix)
        links = leftover_links(self.prefix)
        run = self.dir / "run"
        ctl_pid = pid_of(run / "slurmctld.pid", ("slurmctld",))
        munge_pid = pid_of(self.dir / "munge" / "munged.pid", ("munged",))
        # daemons whose pid files are gone (e.g. the directory was wiped) are found by their environment
        strays = [
            p
            for p in pids_with_env("PRUNEX_MINICLUSTER_DIR", str(self.dir), DAEMON_COMMS)
            if p not in (ctl_pid, munge_pid)
        ]
        if not (state or namespaces or links or ctl_pid or munge_pid or strays):
            return False
        env = self._daemon_env()
        inodes = {ino for ino in (host.netns_inode(ns) for ns in namespaces) if ino is not None}

        # 1. cancel every job and give the step daemons a bounded time to finish
        if ctl_pid and self.slurm_conf.exists():
            self._log("cancelling jobs")
            host.run(["scancel", "--quiet", "--user", getpass.getuser()], check=False, env=env, timeout=15)

            def drained() -> bool:
                q = host.run(["squeue", "-h", "-o", "%i"], check=False, env=env, timeout=10)
                steps = [p for p in host.pids_in_netns(inodes) if host.comm(p) == "slurmstepd"]
                return (q.returncode != 0 or not q.stdout.strip()) and not steps

            host.wait_until(drained, drain_timeout_s, 0.25)

        # 2. stop the slurmds, then anything still running inside the namespaces (left-over slurmstepd
        #    and task processes keep a namespace and its veth alive)
        slurmd_pids = []
        for i in range(max(self.nodes, len(namespaces))):
            pid = pid_of(run / f"slurmd-{self.node_name(i)}.pid", ("slurmd",))
            if pid:
                slurmd_pids.append(pid)
        slurmd_pids += [p for p in host.pids_in_netns(inodes) if host.comm(p) == "slurmd" and p not in slurmd_pids]
        host.kill_and_wait(slurmd_pids, timeout=5.0)
        rest = host.pids_in_netns(inodes)
        if rest:
            self._log(f"killing {len(rest)} process(es) left in the namespaces")
            host.kill_and_wait(rest, timeout=2.0)

        # 3. controller and munge
        if ctl_pid:
            host.kill_and_wait([ctl_pid], timeout=10.0)
        if munge_pid:
            host.kill_and_wait([munge_pid], timeout=5.0)
        strays = pids_with_env("PRUNEX_MINICLUSTER_DIR", str(self.dir), DAEMON_COMMS)
        if strays:
            self._log(f"killing {len(strays)} stray daemon(s): {strays}")
            host.kill_and_wait(strays, timeout=3.0)

        # 4. network: namespaces (their veth ends go with them), root veth ends, bridge
        for ns in namespaces:
            host.run(["ip", "netns", "del", ns], check=False)
        for link in leftover_links(self.prefix):
            if link != self.bridge:
                host.run(["ip", "link", "del", link], check=False)
        if self.bridge in leftover_links(self.prefix):
            host.run(["ip", "link", "del", self.bridge], check=False)
        with contextlib.suppress(OSError):
            self.state_path.unlink()
        with contextlib.suppress(OSError):
            (self.dir / "munge" / "munge.socket").unlink()
        _remove_empty_dirs(self.dir)
        return True

    # ---------------------------------------------------------------------------------- status
    def is_up(self) -> bool:
        state = load_state(self.dir)
        return bool(state and state.get("phase") == "up" and pid_of(self.dir / "run" / "slurmctld.pid", ("slurmctld",)))

    def status(self) -> str:
        """Human-readable status: sinfo plus one line per node/link."""
        state = load_state(self.dir)
        if not state:
            extra = leftover_netns(self.prefix) + leftover_links(self.prefix)
            return f"no minicluster in {self.dir}" + (f" (stale resources: {' '.join(extra)})" if extra else "")
        self._adopt_state(state)
        lines = [
            f"minicluster {self.dir} phase={state.get('phase')} nodes={self.nodes} "
            f"cpus/node={state.get('cpus_per_node')} inter_bw={state.get('inter_bw')} "
            f"inter_latency={state.get('inter_latency')} mtu={state.get('mtu')} link_model={LINK_MODEL}",
            f"controller {self.hostname} {self.ctl_ip}:{self.ctl_port} bridge {self.bridge}  "
            f"SLURM_CONF={self.slurm_conf}",
        ]
        res = host.run(["sinfo", "-N", "-o", "%N %P %T %c %m"], check=False, env=self._daemon_env(), timeout=15)
        lines.append((res.stdout or res.stderr).rstrip())
        ns_present = set(leftover_netns(self.prefix))
        for i in range(self.nodes):
            ns = self.node_name(i)
            q_ns = (
                host.run(["tc", "-n", ns, "qdisc", "show", "dev", ns], check=False).stdout.strip()
                if ns in ns_present
                else "(missing)"
            )
            q_root = host.run(["tc", "qdisc", "show", "dev", self.root_veth(i)], check=False).stdout.strip()
            lines.append(
                f"node {ns}: netns={'yes' if ns in ns_present else 'MISSING'} ip={self.node_ip(i)} "
                f"out[{ns}]: {' / '.join(q_ns.splitlines()) or '-'}; "
                f"in[{self.root_veth(i)}]: {' / '.join(q_root.splitlines()) or '-'}"
            )
        return "\n".join(lines)


def _remove_empty_dirs(root: Path) -> None:
    """Remove the folders ``up`` made that ``down`` left empty (spool, run, state...), bottom-up, and
    ``root`` itself when nothing is left; the configuration (etc/) and daemon logs (log/) stay."""
    if not root.is_dir():
        return
    for d in sorted((p for p in root.rglob("*") if p.is_dir() and not p.is_symlink()), key=lambda p: -len(p.parts)):
        with contextlib.suppress(OSError):
            d.rmdir()  # only succeeds when empty
    with contextlib.suppress(OSError):
        root.rmdir()


# --------------------------------------------------------------------------------------------- machine-wide
def down_all(verbose: bool = False) -> list[str]:
    """Remove every minicluster on the machine, including orphaned namespaces/links of a cluster whose
    directory and daemons are gone.  Returns what was removed."""
    removed = []
    for d in running_cluster_dirs():
        if MiniCluster(d, verbose=verbose).down():
            removed.append(str(d))
    netns = host.run(["ip", "netns", "list"], check=False).stdout.split("\n")
    orphans = [ln.split()[0] for ln in netns if ln.split() and re.fullmatch(r"pxc[0-9a-f]{6}n\d+", ln.split()[0])]
    inodes = {ino for ino in (host.netns_inode(ns) for ns in orphans) if ino is not None}
    host.kill_and_wait(host.pids_in_netns(inodes), timeout=2.0)
    for ns in orphans:
        host.run(["ip", "netns", "del", ns], check=False)
        removed.append(f"netns {ns}")
    links = host.run(["ip", "-o", "link", "show"], check=False).stdout
    names = [m.group(1) for m in re.finditer(r"^\d+:\s+([^:@\s]+)", links, re.M)]
    for name in sorted(names, key=lambda n: n.endswith("b")):  # veths before bridges
        if re.fullmatch(r"pxc[0-9a-f]{6}(b|r\d+)", name):
            host.run(["ip", "link", "del", name], check=False)
            removed.append(f"link {name}")
    return removed
