"""Wire accounting inside a minicluster node.

Every minicluster node is a network namespace whose only non-loopback interface is the namespace end of
a veth pair named ``pxc<hash>n<i>``.  All traffic between nodes crosses that interface (traffic between
two ranks of the same node stays on the namespace's loopback), so its byte counters are the node's
inter-node traffic.

The counters are read from ``/proc/self/net/dev``, which always describes the network namespace of the
reading process.  ``/sys/class/net/<iface>/statistics`` would not work: the slurmd of a node is started
with ``nsenter --net`` (no fresh sysfs mount), and a sysfs mount shows the interfaces of the namespace
that mounted it, i.e. the root namespace.  ``/sys/class/net`` is only used as a fallback for an explicit
interface that ``/proc/self/net/dev`` does not list.

Nothing here needs root, torch or Slurm: a training process calls :func:`read_counters` on itself.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterable

LINK_MODEL = "netns-tc"

#: name of the namespace end of a node's veth (``pxc`` + 6 hex digits of the cluster dir's hash + ``n`` + i)
NODE_IFACE_RE = re.compile(r"^pxc[0-9a-f]{6}n\d+$")

_PROC_NET_DEV = "/proc/self/net/dev"


def _proc_net_dev() -> dict[str, tuple[int, int]]:
    """{iface: (tx_bytes, rx_bytes)} of the calling process's network namespace."""
    out: dict[str, tuple[int, int]] = {}
    try:
        with open(_PROC_NET_DEV) as fh:
            lines = fh.read().splitlines()[2:]
    except OSError:
        return out
    for line in lines:
        if ":" not in line:
            continue
        name, rest = line.split(":", 1)
        fields = rest.split()
        if len(fields) < 9:
            continue
        out[name.strip()] = (int(fields[8]), int(fields[0]))
    return out


def node_iface() -> str | None:
    """The minicluster veth of the calling process's namespace, or None outside a minicluster node."""
    env = os.environ.get("PRUNEX_WIRE_IFACE")
    names = _proc_net_dev()
    if env and env in names:
        return env
    found = sorted(n for n in names if NODE_IFACE_RE.match(n))
    return found[0] if found else None


def link_model_active() -> bool:
    """True when the calling process runs inside a minicluster node's network namespace."""
    return node_iface() is not None


def observed_link_model(asked: str) -> str:
    """The link model that shapes this process's inter-node links: inside a minicluster node, whose
    links are shaped by tc, ``LINK_MODEL`` where the configuration asked for none; else ``asked``.
    Recorded in ``meta.json`` and every log row; the run's configuration is left as it was asked."""
    return LINK_MODEL if asked == "none" and link_model_active() else asked


# tc prints a token bucket's rate in bit/s with a decimal prefix: "rate 27733Kbit", "rate 1Gbit"
_TC_RATE = re.compile(r"\btbf\b.*?\brate ([0-9.]+)([KMGT]?)bit\b")
_MBIT_PER_UNIT = {"": 1e-6, "K": 1e-3, "M": 1.0, "G": 1e3, "T": 1e6}


def observed_link_mbit(iface: str | None = None) -> float | None:
    """The rate in Mbit/s of the token bucket on this process's node link (``iface``: the node's veth),
    read with ``tc qdisc show`` in the process's own namespace: what the link had when the run started,
    whatever the cluster was brought up with (`MiniCluster.reshape` changes it in place). None outside a
    minicluster node, on an unshaped link, or where ``tc`` cannot be run."""
    iface = iface or node_iface()
    tc = shutil.which("tc", path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"]))
    if iface is None or tc is None:
        return None
    try:
        out = subprocess.run([tc, "qdisc", "show", "dev", iface], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = _TC_RATE.search(out)
    return float(m.group(1)) * _MBIT_PER_UNIT[m.group(2)] if m else None


def read_counters(iface: str | None = None) -> tuple[int, int] | None:
    """(tx_bytes, rx_bytes) of ``iface`` as seen from the calling process's network namespace.

    ``iface=None`` means the node's veth; then None is returned when the process is not inside a
    minicluster namespace.  For an explicit interface that does not exist, None as well.
    """
    if iface is None:
        iface = node_iface()
        if iface is None:
            return None
    counters = _proc_net_dev()
    if iface in counters:
        return counters[iface]
    base = f"/sys/class/net/{iface}/statistics"
    try:
        with open(f"{base}/tx_bytes") as tx, open(f"{base}/rx_bytes") as rx:
            return int(tx.read()), int(rx.read())
    except (OSError, ValueError):
        return None


class WireRecorder:
    """Collects counter samples and turns them into per-iteration deltas.

    >>> rec = WireRecorder("run-1")
    >>> rec.sample(0, "n0", 1000, 500)        # start sample of node n0
    >>> rec.sample(1, "n0", 51000, 900)
    >>> [(r["iteration"], r["tx_bytes"], r["rx_bytes"]) for r in rec.rows()]
    [(0, 0, 0), (1, 50000, 400)]

    The first sample of each node is its start sample; every sample yields one row whose bytes are
    counted from that start sample (cumulative, so the start row is 0/0).  :meth:`sample_now` reads
    the counters itself (None outside a minicluster namespace, in which case nothing is recorded).
    """

    COLUMNS = ("run_id", "iteration", "node", "tx_bytes", "rx_bytes")

    def __init__(self, run_id: str, node: str | None = None, iface: str | None = None) -> None:
        self.run_id = run_id
        self.node = node if node is not None else (os.environ.get("SLURMD_NODENAME") or os.uname().nodename)
        self.iface = iface
        self._start: dict[str, tuple[int, int]] = {}
        self._samples: list[tuple[int, str, int, int]] = []

    def sample(self, iteration: int, node: str, tx: int, rx: int) -> None:
        if node not in self._start:
            self._start[node] = (int(tx), int(rx))
        self._samples.append((int(iteration), str(node), int(tx), int(rx)))

    def sample_now(self, iteration: int) -> tuple[int, int] | None:
        counters = read_counters(self.iface)
        if counters is not None:
            self.sample(iteration, self.node, *counters)
        return counters

    def rows(self) -> list[dict]:
        out = []
        for iteration, node, tx, rx in self._samples:
            tx0, rx0 = self._start[node]
            out.append(
                {
                    "run_id": self.run_id,
                    "iteration": iteration,
                    "node": node,
                    "tx_bytes": tx - tx0,
                    "rx_bytes": rx - rx0,
                }
            )
        return out

    def extend(self, samples: Iterable[tuple[int, str, int, int]]) -> None:
        for s in samples:
            self.sample(*s)

    def to_frame(self):  # pandas is a project dependency, but keep the import lazy
        import pandas as pd

        return pd.DataFrame(self.rows(), columns=list(self.COLUMNS))
