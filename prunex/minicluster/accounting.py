"""The mini cluster's accounting: what a cluster has made, and what of it is still there.

- Its record, `<dir>/cluster.json` (`STATE_FILE`): `up` writes its shape and phase there (`write_state`),
  so that `down`, or the next `up` on the same directory, removes a cluster whose session was killed
  (`load_state`); `cluster_owner_alive` reads who brought it up, `prunex.bench.exchange` its link shape.
- What is live: its daemons, by their pid files (`pid_of`) or, where those are gone, by their environment
  (`pids_with_env`, `DAEMON_COMMS`); its namespaces and links, by the names derived from its directory
  (`leftover_netns`, `leftover_links`); every cluster with a live daemon on this machine
  (`running_cluster_dirs`).
- Its jobs: there is no accounting database (slurmdbd); `install_sacct` puts the `sacct` stand-in
  (`prunex.minicluster.sacct_shim`, answering from slurmctld and the jobcomp file) in `<dir>/bin`.

It reads and records; bringing a cluster up and tearing it down is `prunex.minicluster.cluster`.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

from .host import comm, pid_alive, read_pid, run

STATE_FILE = "cluster.json"
DAEMON_COMMS = ("slurmctld", "slurmd", "slurmstepd", "munged")


# --------------------------------------------------------------------------------------------- the record
def load_state(dir: Path) -> dict | None:
    """The cluster's record (`STATE_FILE` in `dir`), None when there is none or it cannot be read."""
    try:
        return json.loads((dir / STATE_FILE).read_text())
    except (OSError, ValueError):
        return None


def write_state(dir: Path, state: dict) -> None:
    """Replace the record in `dir` atomically (made first when missing)."""
    dir.mkdir(parents=True, exist_ok=True)
    path = dir / STATE_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=1))
    tmp.replace(path)


def cluster_owner_alive(dir: str | os.PathLike) -> bool:
    """Whether the process that ran ``up`` for ``dir`` still runs (False when unknown)."""
    try:
        pid = int(json.loads((Path(dir) / STATE_FILE).read_text())["pid_of_up"])
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return pid_alive(pid)


# --------------------------------------------------------------------------------------------- what is live
def pid_of(pidfile: Path, comms: tuple[str, ...]) -> int | None:
    """The live process a pid file names, when it is one of ``comms`` (else None: stale or reused)."""
    pid = read_pid(pidfile)
    if pid and pid_alive(pid) and comm(pid) in comms:
        return pid
    return None


def leftover_netns(prefix: str) -> list[str]:
    """The cluster's node namespaces (``<prefix>n<i>``) that exist."""
    res = run(["ip", "netns", "list"], check=False)
    return [
        line.split()[0]
        for line in res.stdout.splitlines()
        if line.split() and re.fullmatch(rf"{prefix}n\d+", line.split()[0])
    ]


def leftover_links(prefix: str) -> list[str]:
    """The cluster's links in the root namespace (bridge ``<prefix>b``, veth ends ``<prefix>r<i>``) that exist."""
    res = run(["ip", "-o", "link", "show"], check=False)
    out = []
    for m in re.finditer(r"^\d+:\s+([^:@\s]+)", res.stdout, re.M):
        if re.fullmatch(rf"{prefix}(b|r\d+)", m.group(1)):
            out.append(m.group(1))
    return out


def pids_with_env(key: str, value: str, comms: tuple[str, ...]) -> list[int]:
    """Live processes named one of ``comms`` whose environment has ``key=value`` (finds the daemons of a
    cluster whose pid files are gone)."""
    needle = f"{key}={value}".encode()
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or comm(int(entry)) not in comms:
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                if needle in fh.read().split(b"\0") and pid_alive(int(entry)):
                    out.append(int(entry))
        except OSError:
            continue
    return out


def running_cluster_dirs() -> list[Path]:
    """Directories of every minicluster with a live daemon on this machine (from the daemons' environment)."""
    dirs = set()
    key = b"PRUNEX_MINICLUSTER_DIR="
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or comm(int(entry)) not in DAEMON_COMMS:
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                for var in fh.read().split(b"\0"):
                    if var.startswith(key) and pid_alive(int(entry)):
                        dirs.add(Path(var[len(key) :].decode(errors="replace")))
        except OSError:
            continue
    return sorted(dirs)


# --------------------------------------------------------------------------------------------- its jobs
def install_sacct(dir: Path) -> None:
    """``<dir>/bin/sacct``: the stand-in for the accounting database (see sacct_shim.py), with this
    interpreter as its shebang."""
    shim_src = Path(__file__).with_name("sacct_shim.py").read_text()
    sacct = dir / "bin" / "sacct"
    sacct.write_text(f"#!{sys.executable}\n{shim_src}")
    sacct.chmod(0o755)
