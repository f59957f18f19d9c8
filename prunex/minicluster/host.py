"""This machine as a mini cluster sees it: the commands it runs, the prerequisites, the processes.

Nothing here knows a cluster's layout: running a command with one-line failures (`run`,
`MiniClusterError`), whether `up` can run here (`missing_requirements`: Linux, root, the Slurm, munge and
iproute2 tools), processes (`comm`, `read_pid`, `kill_and_wait`, `pids_in_netns`), and what the machine
offers (`port_free`, `used_subnets`, `mem_total_mb`, `netem_available`). Bring-up and teardown are
`prunex.minicluster.cluster`; what a cluster made and what of it is still there, `prunex.minicluster.accounting`.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from prunex.cluster.jobs import pid_alive  # a live, non-zombie process

INSTALL_CMD = "apt-get install -y slurm-wlm munge iproute2"
REQUIRED_TOOLS = (
    "ip",
    "tc",
    "nsenter",
    "slurmctld",
    "slurmd",
    "munged",
    "sinfo",
    "sbatch",
    "srun",
    "scontrol",
    "squeue",
    "scancel",
)


class MiniClusterError(RuntimeError):
    """A one-line, user-facing reason why the cluster could not be brought up or down."""


def run(cmd: list[str], check: bool = True, timeout: float = 30, env: dict | None = None, **kw):
    """`subprocess.run` with text output; with `check`, a failure (non-zero exit, timeout, missing tool) is one
    `MiniClusterError` line, without it a result (rc 124 on timeout, 127 for a missing tool)."""
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, **kw)
    except subprocess.TimeoutExpired as e:
        if check:
            raise MiniClusterError(f"timed out after {timeout}s: {' '.join(cmd)}") from e
        return subprocess.CompletedProcess(cmd, 124, "", "timeout")
    except FileNotFoundError as e:
        if check:
            raise MiniClusterError(f"{cmd[0]} not found; install with: {INSTALL_CMD}") from e
        return subprocess.CompletedProcess(cmd, 127, "", f"{cmd[0]} not found")
    if check and res.returncode != 0:
        msg = (res.stderr or res.stdout).strip().splitlines()
        raise MiniClusterError(f"{' '.join(cmd)} failed (rc={res.returncode}): {msg[-1] if msg else ''}")
    return res


def missing_requirements() -> list[str]:
    """Names of the missing prerequisites (tools, root, Linux); empty when ``up`` can run."""
    missing = []
    if not sys.platform.startswith("linux"):
        missing.append("Linux")
    elif os.geteuid() != 0:
        missing.append("root")
    extra_path = os.pathsep.join(["/usr/sbin", "/sbin", "/usr/bin", "/bin"])
    search = os.environ.get("PATH", "") + os.pathsep + extra_path
    missing += [t for t in REQUIRED_TOOLS if shutil.which(t, path=search) is None]
    return missing


def requirements_message(missing: list[str]) -> str:
    """The single line printed when something is missing."""
    tools = [m for m in missing if m not in ("root", "Linux")]
    parts = []
    if "Linux" in missing:
        parts.append("needs Linux")
    if "root" in missing:
        parts.append("needs root (network namespaces, tc, Slurm daemons)")
    if tools:
        parts.append(f"missing {', '.join(tools)}; install with: {INSTALL_CMD}")
    return "prunex.minicluster: " + "; ".join(parts)


def comm(pid: int) -> str:
    """The process's command name ("" when it is gone)."""
    try:
        with open(f"/proc/{pid}/comm") as fh:
            return fh.read().strip()
    except OSError:
        return ""


def read_pid(path: Path) -> int | None:
    """The pid a pid file holds, None when it is missing or unreadable."""
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def wait_until(pred, timeout: float, interval: float = 0.1) -> bool:
    """Poll `pred` every `interval` seconds until it holds (True) or `timeout` passes (False)."""
    deadline = time.monotonic() + timeout
    while True:
        if pred():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


def kill_and_wait(pids: list[int], timeout: float = 5.0) -> None:
    """SIGTERM, wait up to ``timeout``, then SIGKILL and wait a little more."""
    pids = [p for p in pids if pid_alive(p)]
    for sig, wait_s in ((signal.SIGTERM, timeout), (signal.SIGKILL, 3.0)):
        for p in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, sig)
        alive = list(pids)
        wait_until(lambda alive=alive: not any(pid_alive(p) for p in alive), wait_s)
        pids = [p for p in pids if pid_alive(p)]
        if not pids:
            return


def netns_inode(name: str) -> int | None:
    """The inode of the named network namespace (`ip netns`), None when there is none."""
    try:
        return os.stat(f"/run/netns/{name}").st_ino
    except OSError:
        return None


def pids_in_netns(inodes: set[int]) -> list[int]:
    """All live processes whose network namespace is one of ``inodes``."""
    out = []
    if not inodes:
        return out
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.stat(f"/proc/{entry}/ns/net").st_ino in inodes and pid_alive(int(entry)):
                out.append(int(entry))
        except OSError:
            continue
    return out


def port_free(port: int) -> bool:
    """Whether a TCP port can be bound on every address."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def used_subnets() -> set[str]:
    """/24 prefixes ("a.b.c") already holding an address or a route in the root namespace."""
    text = run(["ip", "-o", "-4", "addr", "show"], check=False).stdout
    text += run(["ip", "-4", "route", "show", "table", "all"], check=False).stdout
    return set(re.findall(r"\b(\d+\.\d+\.\d+)\.\d+(?:/\d+)?\b", text))


def mem_total_mb() -> int:
    """This machine's memory in MiB (4096 when /proc/meminfo cannot be read)."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) // 1024
    except OSError:
        pass
    return 4096


def netem_available() -> bool:
    """Whether the kernel has sch_netem (probed on a throw-away veth pair)."""
    name = f"pxq{os.getpid() % 100000}"
    if run(["ip", "link", "add", name + "a", "type", "veth", "peer", "name", name + "b"], check=False).returncode:
        return False
    try:
        return (
            run(["tc", "qdisc", "add", "dev", name + "a", "root", "netem", "delay", "1ms"], check=False).returncode == 0
        )
    finally:
        run(["ip", "link", "del", name + "a"], check=False)
