"""Latency and bandwidth of AllReduce and Broadcast on each level (intra, inter, flat), with an alpha-beta fit.

Run (on a mini cluster, ``eval "$(python -m prunex.minicluster env)"`` first, or ``--minicluster DIR``)::

    PYTHONPATH=. python -m prunex.bench.collectives [--sizes 1KB..256MB] [--nodes 2] [--procs-per-node 2]
        [--executor auto|slurm|local] [--repeats 5] [--small-repeats 20] [--warmup 1]
        [--out results/bench/collectives.parquet]

The sweep runs as one job of ``nodes x procs_per_node`` tasks submitted through the launcher's own path
(:func:`prunex.cluster.executor.make_executor`: submitit's SlurmExecutor, or the LocalExecutor with ``--executor local``
where nodes are emulated on one machine and inter-node collectives are delayed by the ``alpha-beta`` link
model of :class:`prunex.comm.collectives.AlphaBetaLink`).  Every task builds the job's intra, inter and flat
groups exactly as training does (:func:`prunex.training.topology.build_groups`) and times every collective with the
:class:`prunex.comm.Comm` layer, i.e. the seconds a training run would log in ``comm.parquet``.

Method, per level, op and message size n (bytes per member, float32 tensors; sizes ``A..B`` are the powers of
4 times A up to B, binary units: 1KB = 1024 bytes):

- ``warmup`` untimed calls, then ``repeats`` timed calls (``small_repeats`` below 1 MB, where a call is
  cheap and scheduling noise is large); every call is preceded by a barrier of all ranks,
  so every member enters together and the intra-node groups of all nodes run at the same time (as in
  phase 2 of H-SADMM).  Ranks outside the level's group (workers, for ``inter``) only join the barriers.
- The time of one call is the slowest member's (a collective is complete when every member has its result);
  ``seconds`` is the median over the repeats (``seconds_min``/``seconds_max`` are kept as well).
  ``seconds_last`` is the median over the repeats of the *fastest* member's time, i.e. the last member to
  enter (for the concurrent intra-node groups: the slowest group's fastest member): where processes share
  cores, members leave the preceding barrier at different times and the slowest member's time includes
  that skew, while the last arriver's is the transfer alone (what ``prunex.perfmodel validate`` compares
  with as the "wait-free" time).

Model fitted, per level and op (Hockney's alpha-beta model on the ring algorithm of
:mod:`prunex.comm.volume`)::

    t(n) = alpha + b(n) / beta,   b(n) = bytes the busiest member sends in the ring model
                                        = 2 (g-1)/g * n   for allreduce
                                        = n               for broadcast (pipelined chain)

with g the group's size.  So ``beta`` is the *bus bandwidth* (NCCL-tests' definition), directly comparable to
the link rate, and ``alpha`` the per-call latency (including the synchronisation of the members).  The fit is
weighted least squares with alpha >= 0 and beta > 0 enforced; ``--fit`` chooses the weights:

- ``scaled`` (default): minimise sum((t - fit)^2 / t), i.e. errors scaled as if their variance grew with t.
- ``relative``: minimise sum(((t - fit) / t)^2).
- ``absolute``: minimise sum((t - fit)^2).

Why ``scaled``: on the mini cluster the messages below tbf's burst (1 ms of traffic, 125 KB at 1 Gbit/s)
cross a link faster than its rate, so a relative fit lets the 64-256 KB points pull beta 15-35% above the
link rate and under-predicts every large transfer, while an absolute fit is decided by the largest sizes
alone and leaves alpha undetermined (it came out negative for the inter-node broadcast).  The scaled fit
kept beta within 1% of the 64 MB bus bandwidth and alpha within the spread of the small-message times.
``r2`` is the coefficient of determination in the fit's own weighting and ``max_rel_err`` the largest
relative error of the fitted line over the sizes.

Output: ``OUT`` (one row per level, op and size: level, op, size_bytes, seconds, seconds_min, seconds_max,
members, bytes_term, busbw_bytes_per_s, plus the run's link_model, nodes, procs_per_node, link_bytes_per_s)
and ``OUT`` with ``.fit.parquet`` in place of ``.parquet`` (one row per level and op: level, op, alpha_s,
beta_bytes_per_s, r2, max_rel_err, n_points, members, bytes_factor, ...; fitted by
`prunex.perfmodel.calibrate.fit_table`).  :func:`read_results` reads both.

Measured facts to keep in mind when using the fit: gloo (the CPU backend) broadcasts with a binomial tree,
not a chain, so on a flat group of several nodes the root's node sends the message more than once and the
fitted broadcast beta of ``flat`` is below the link rate by that factor; its allreduce is the ring of the
model (``gloo/allreduce.cc``; each rank sends to rank - 1).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from prunex.cluster import jobs
from prunex.cluster.executor import make_executor
from prunex.cluster.options import comma_list
from prunex.cluster.preflight import check_outputs
from prunex.cluster.regime import usable_cores
from prunex.cluster.slurm import SlurmOptions
from prunex.comm.cost import FIT_WEIGHTINGS
from prunex.minicluster import MiniCluster
from prunex.minicluster.cluster import parse_rate
from prunex.minicluster.helpers import export_torch_env
from prunex.minicluster.wire import LINK_MODEL, link_model_active
from prunex.perfmodel.calibrate import CalibrationError, bytes_factor, fit_row, fit_table
from prunex.training.config import ConfigError, LinkConfig, RunConfig
from prunex.training.log import write_parquet

LEVELS = ("intra", "inter", "flat")
OPS = ("allreduce", "broadcast")
DEFAULT_SIZES = "1KB..256MB"
_UNITS = {
    "": 1,
    "b": 1,
    "k": 1 << 10,
    "kb": 1 << 10,
    "kib": 1 << 10,
    "m": 1 << 20,
    "mb": 1 << 20,
    "mib": 1 << 20,
    "g": 1 << 30,
    "gb": 1 << 30,
    "gib": 1 << 30,
}
ELEMENT_BYTES = 4  # float32 payloads
SMALL_BYTES = 1 << 20  # below this, small_repeats timed calls per size
MEASUREMENT_COLUMNS = [
    "level",
    "op",
    "size_bytes",
    "seconds",
    "seconds_min",
    "seconds_max",
    "repeats",
    "members",
    "bytes_term",
    "busbw_bytes_per_s",
    "link_model",
    "nodes",
    "procs_per_node",
    "link_bytes_per_s",
    "seconds_last",
]


class BenchError(RuntimeError):
    """A one-line reason why the benchmark could not run."""


# --------------------------------------------------------------------------------------------- sizes
def parse_size(text: str) -> int:
    """``64MB`` -> 67108864 (binary units; a bare number is bytes)."""
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?)\s*([a-zA-Z]*)\s*", str(text))
    if not m or m.group(2).lower() not in _UNITS:
        raise BenchError(f"cannot parse size {text!r} (use e.g. 1KB, 64MB, 4096)")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def parse_sizes(spec: str) -> list[int]:
    """``1KB..256MB`` -> powers of 4 times 1KB up to 256MB; ``1KB,1MB`` -> a list; ``4MB`` -> one size.

    Sizes are rounded down to whole float32 elements (at least one).
    """
    spec = spec.strip()
    if ".." in spec:
        lo_s, hi_s = spec.split("..", 1)
        lo, hi = parse_size(lo_s), parse_size(hi_s)
        if lo < 1 or hi < lo:
            raise BenchError(f"bad size range {spec!r}: need 0 < low <= high")
        sizes, n = [], lo
        while n <= hi:
            sizes.append(n)
            n *= 4
    else:
        sizes = [parse_size(s) for s in spec.split(",") if s.strip()]
    if not sizes:
        raise BenchError(f"no sizes in {spec!r}")
    out = sorted({max(ELEMENT_BYTES, s - s % ELEMENT_BYTES) for s in sizes})
    return out


def human_size(n: float) -> str:
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:g}{unit}"
    return f"{n:g}B"


# --------------------------------------------------------------------------------------------- model
def fit_alpha_beta(x: Sequence[float], t: Sequence[float], weighting: str = "scaled") -> dict[str, float]:
    """`prunex.perfmodel.calibrate.fit_row` (one row of the fit table), with this command's error type."""
    try:
        return fit_row(x, t, weighting)
    except CalibrationError as e:
        raise BenchError(str(e)) from None


def aggregate(task_rows: list[list[dict]], info: dict[str, Any]):
    """Per-call rows of every task -> one row per (level, op, size): slowest member per call, median over calls
    (``seconds_last``: fastest member, i.e. the last to enter, per call, median over calls)."""
    import pandas as pd

    per_call: dict[tuple, float] = {}
    per_group: dict[tuple, float] = {}  # (level, op, size, rep, group) -> its fastest member's seconds
    members: dict[tuple, int] = {}
    procs = max(1, int(info.get("procs_per_node") or 1))
    for rows in task_rows:
        for r in rows:
            key = (r["level"], r["op"], r["size_bytes"], r["rep"])
            per_call[key] = max(per_call.get(key, 0.0), r["seconds"])
            group = r["rank"] // procs if r["level"] == "intra" else -1  # concurrent intra groups, one per node
            per_group[(*key, group)] = min(per_group.get((*key, group), math.inf), r["seconds"])
            members[key[:3]] = r["members"]
    per_call_last: dict[tuple, float] = {}  # the slowest of the concurrent groups' last arrivers
    for (*key, _), sec in per_group.items():
        per_call_last[tuple(key)] = max(per_call_last.get(tuple(key), 0.0), sec)
    calls: dict[tuple, list[float]] = defaultdict(list)
    last: dict[tuple, list[float]] = defaultdict(list)
    for (level, op, size, rep), sec in per_call.items():
        calls[(level, op, size)].append(sec)
        last[(level, op, size)].append(per_call_last[(level, op, size, rep)])
    out = []
    order = {lv: i for i, lv in enumerate(LEVELS)}
    for (level, op, size), secs in sorted(calls.items(), key=lambda kv: (order[kv[0][0]], kv[0][1], kv[0][2])):
        g = members[(level, op, size)]
        term = bytes_factor(op, g) * size
        med = statistics.median(secs)
        out.append(
            {
                "level": level,
                "op": op,
                "size_bytes": int(size),
                "seconds": med,
                "seconds_min": min(secs),
                "seconds_max": max(secs),
                "repeats": len(secs),
                "members": g,
                "bytes_term": term,
                "busbw_bytes_per_s": term / med if med > 0 else math.nan,
                "link_model": info["link_model"],
                "nodes": info["nodes"],
                "procs_per_node": info["procs_per_node"],
                "link_bytes_per_s": info.get("link_bytes_per_s", math.nan),
                "seconds_last": statistics.median(last[(level, op, size)]),
            }
        )
    return pd.DataFrame(out, columns=MEASUREMENT_COLUMNS)


# --------------------------------------------------------------------------------------------- the job
def _resolves(host: str | None) -> bool:
    try:
        socket.gethostbyname(host or "")
        return bool(host)
    except OSError:
        return False


class BenchJob:
    """What every task of the benchmark job runs (picklable; submitted like :class:`prunex.cluster.task.TrainJob`)."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = dict(spec)

    def __call__(self) -> dict[str, Any]:
        s = self.spec
        if s["executor"] != "inline":
            env = export_torch_env()
            if not _resolves(env.master_addr) and os.environ.get("SLURM_LAUNCH_NODE_IPADDR"):
                os.environ["MASTER_ADDR"] = os.environ["SLURM_LAUNCH_NODE_IPADDR"]
        import torch
        import torch.distributed as dist

        from prunex.comm import Comm  # lazy: torch (prunex.comm.collectives), in the job's process only
        from prunex.training.device import device_for  # lazy: torch, in the job's process only
        from prunex.training.topology import build_groups, discover, init_distributed  # lazy: torch, as above

        topo = discover(s["nodes"], s["procs_per_node"])
        device = device_for("auto", topo)
        if device.type == "cpu" and "OMP_NUM_THREADS" not in os.environ:
            on_machine = topo.world_size if topo.emulated else topo.procs_per_node
            torch.set_num_threads(max(1, usable_cores() // on_machine))
        init_distributed(topo, device, s["timeout_s"])
        try:
            groups = build_groups(topo, s["timeout_s"])
            link = LinkConfig(**s["link"])
            if link.model == "none" and link_model_active():
                link = LinkConfig(model=LINK_MODEL)
            comm = Comm(topo, groups, device, link)
            reps = {n: s["small_repeats"] if n < SMALL_BYTES else s["repeats"] for n in s["sizes"]}
            rows = sweep(comm, topo, groups, s["levels"], s["ops"], s["sizes"], s["warmup"], reps, device)
            dist.barrier(group=groups.flat)
            return {
                "rank": topo.rank,
                "node": topo.node,
                "host": os.environ.get("SLURMD_NODENAME") or socket.gethostname(),
                "link_model": comm.link_model,
                "emulated": topo.emulated,
                "rows": rows,
            }
        finally:
            if dist.is_initialized():
                dist.destroy_process_group()


def sweep(comm, topo, groups, levels, ops, sizes, warmup, repeats: dict[int, int], device) -> list[dict]:
    """Run the sweep on this rank (``repeats``: timed calls per size, the same on every rank); returns one
    row per timed call this rank took part in."""
    import torch
    import torch.distributed as dist

    from prunex.comm.volume import group_members  # lazy: torch (prunex.training.topology), in the job's process

    buf = torch.zeros(max(sizes) // ELEMENT_BYTES, dtype=torch.float32, device=device)  # zeros: sums stay 0
    rows = []
    for level in levels:
        members = group_members(topo, level)
        if len(members) < 2:
            continue
        member = topo.rank in members
        for op in ops:
            for size in sizes:
                t = buf.narrow(0, 0, size // ELEMENT_BYTES)
                comm.drain()
                for _ in range(warmup + repeats[size]):
                    dist.barrier(group=groups.flat)
                    if not member:
                        continue
                    if op == "allreduce":
                        comm.all_reduce(t, level, "sum")
                    elif op == "broadcast":
                        comm.broadcast(t, level)
                    else:
                        raise BenchError(f"unknown op {op!r}")
                recs = comm.drain()[warmup:]
                rows += [
                    {
                        "level": level,
                        "op": op,
                        "size_bytes": size,
                        "rep": i,
                        "seconds": r["seconds"],
                        "members": len(members),
                        "rank": topo.rank,
                    }
                    for i, r in enumerate(recs)
                ]
    return rows


# --------------------------------------------------------------------------------------------- driver
def _slurm_answers() -> bool:
    if not shutil.which("scontrol"):
        return False
    try:
        res = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return res.returncode == 0 and "UP" in res.stdout


def _minicluster_link_rate() -> float:
    """Shaped link rate (bytes/s) of the active mini cluster, NaN when unknown."""
    d = os.environ.get("PRUNEX_MINICLUSTER_DIR")
    if not d:
        return math.nan
    try:
        rate = json.loads((Path(d) / "cluster.json").read_text()).get("inter_bw")
        return parse_rate(rate) if rate else math.nan
    except (OSError, ValueError, RuntimeError):
        return math.nan


def check_levels_ops(levels: Sequence[str], ops: Sequence[str]) -> None:
    """BenchError naming what `levels` and `ops` hold that the sweep does not measure."""
    bad = [x for x in levels if x not in LEVELS] + [x for x in ops if x not in OPS]
    if bad:
        raise BenchError(f"unknown level/op {bad}; levels: {', '.join(LEVELS)}; ops: {', '.join(OPS)}")


def run(
    sizes: Sequence[int],
    *,
    nodes: int = 2,
    procs_per_node: int = 2,
    executor: str = "auto",
    levels: Sequence[str] = LEVELS,
    ops: Sequence[str] = OPS,
    repeats: int = 5,
    small_repeats: int = 20,
    warmup: int = 1,
    link_model: str | None = None,
    alpha_s: float = 5e-5,
    bandwidth_gbit: float = 1.0,
    folder: str | Path = "results/bench/collectives.submitit",
    time_min: int | None = None,
    timeout_s: float = 300.0,
    echo: bool = True,
):
    """Submit the sweep as one job and return the measurement table (a pandas DataFrame)."""
    if executor == "auto":
        executor = "slurm" if _slurm_answers() else "local"
    if executor not in ("slurm", "local"):
        raise BenchError(f"unknown executor {executor!r} (slurm, local or auto)")
    check_levels_ops(levels, ops)
    if repeats < 1 or small_repeats < 1 or warmup < 0:
        raise BenchError("need --repeats >= 1, --small-repeats >= 1 and --warmup >= 0")
    if link_model is None:
        link_model = "alpha-beta" if executor == "local" else "none"
    try:
        link = LinkConfig(model=link_model, alpha_s=alpha_s, bandwidth_gbit=bandwidth_gbit)
        config = RunConfig(
            method="ddp",
            nodes=nodes,
            procs_per_node=procs_per_node,
            executor=executor,
            device="auto",  # the sweep runs where it lands: GPUs on a GPU cluster, the CPU on the mini cluster
            name="bench-collectives",
            experiment="bench",
            results=str(Path(folder).parent),
            collective_timeout_s=timeout_s,
            link=link,
        )
    except ConfigError as e:
        raise BenchError(str(e)) from None
    spec = {
        "nodes": nodes,
        "procs_per_node": procs_per_node,
        "executor": executor,
        "levels": list(levels),
        "ops": list(ops),
        "sizes": list(sizes),
        "warmup": warmup,
        "repeats": repeats,
        "small_repeats": small_repeats,
        "timeout_s": timeout_s,
        "link": {"model": link.model, "alpha_s": link.alpha_s, "bandwidth_gbit": link.bandwidth_gbit},
    }
    slurm = SlurmOptions(time_min=time_min) if time_min else None
    ex = make_executor(config, folder, slurm)
    t0 = time.monotonic()
    job = ex.submit(BenchJob(spec))
    if echo:
        print(
            f"[bench] submitted job {job.job_id} ({executor}, {nodes}x{procs_per_node}), sizes "
            f"{human_size(sizes[0])}..{human_size(sizes[-1])}, logs in {folder}",
            flush=True,
        )
    try:
        if executor == "slurm" and not jobs.await_end(job, nodes * procs_per_node):  # not for ever (jobs.GONE_GRACE_S)
            raise BenchError(f"benchmark job {job.job_id} left the queue without results (logs in {folder})")
        results = job.results()
    except BenchError:
        raise
    except Exception as e:
        raise BenchError(
            f"benchmark job {job.job_id} failed (logs in {folder}): "
            f"{str(e).strip().splitlines()[-1] if str(e).strip() else e!r}"
        ) from e
    if echo:
        hosts = sorted({r["host"] for r in results})
        print(f"[bench] job {job.job_id} done in {time.monotonic() - t0:.1f}s on {', '.join(hosts)}", flush=True)
    if link.model == "alpha-beta":
        rate = link.bandwidth_gbit * 1e9 / 8
    else:
        rate = _minicluster_link_rate()
    info = {
        "link_model": results[0]["link_model"],
        "nodes": nodes,
        "procs_per_node": procs_per_node,
        "link_bytes_per_s": rate,
    }
    return aggregate([r["rows"] for r in results], info)


def fit_path(out: str | Path) -> Path:
    out = Path(out)
    return out.with_name(
        out.name[: -len(".parquet")] + ".fit.parquet" if out.name.endswith(".parquet") else out.name + ".fit.parquet"
    )


def read_results(out: str | Path):
    """(measurements, fit) tables written by this benchmark."""
    import pandas as pd

    return pd.read_parquet(out), pd.read_parquet(fit_path(out))


def format_report(measurements, fit) -> str:
    weighting = fit["fit"].iloc[0] if len(fit) else "?"
    lines = [f"alpha-beta fit ({weighting}), t = alpha + b(n)/beta, b(n) = 2(g-1)/g n (allreduce), n (broadcast):"]
    lines.append(f"{'level':6} {'op':9} {'g':>2} {'alpha_us':>10} {'beta_Gbit/s':>12} {'r2':>7} {'max_rel_err':>11}")
    for r in fit.itertuples():
        beta = r.beta_bytes_per_s * 8 / 1e9
        lines.append(
            f"{r.level:6} {r.op:9} {r.members:>2} {r.alpha_s * 1e6:>10.1f} {beta:>12.3f} {r.r2:>7.4f} "
            f"{r.max_rel_err:>11.3f}"
        )
    largest = measurements[measurements["size_bytes"] == measurements["size_bytes"].max()]
    rate = float(measurements["link_bytes_per_s"].iloc[0]) if len(measurements) else math.nan
    lines.append(f"at the largest size ({human_size(largest['size_bytes'].max())}): bus bandwidth")
    for r in largest.itertuples():
        frac = (
            f" = {r.busbw_bytes_per_s / rate:.3f} of the link rate"
            if math.isfinite(rate) and r.level != "intra"
            else ""
        )
        lines.append(
            f"  {r.level:6} {r.op:9} {r.seconds * 1e3:9.2f} ms  {r.busbw_bytes_per_s * 8 / 1e9:8.3f} Gbit/s{frac}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m prunex.bench.collectives",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--sizes", default=DEFAULT_SIZES, help="A..B (powers of 4) or a comma list: two sizes or more")
    p.add_argument("--nodes", type=int, default=2)
    p.add_argument("--procs-per-node", type=int, default=2)
    p.add_argument(
        "--executor",
        default="auto",
        choices=("auto", "slurm", "local"),
        help="auto: slurm when a Slurm controller answers, else local",
    )
    p.add_argument("--levels", default=",".join(LEVELS))
    p.add_argument("--ops", default=",".join(OPS))
    p.add_argument("--repeats", type=int, default=5, help="timed calls per size from 1 MB on")
    p.add_argument("--small-repeats", type=int, default=20, help="timed calls per size below 1 MB")
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument(
        "--link-model",
        default=None,
        choices=("none", "alpha-beta"),
        help="default: alpha-beta with --executor local, none (real links) otherwise",
    )
    p.add_argument("--alpha", type=float, default=5e-5, help="alpha-beta link model: latency per hop (s)")
    p.add_argument("--bandwidth-gbit", type=float, default=1.0, help="alpha-beta link model: link rate")
    p.add_argument("--fit", default="scaled", choices=FIT_WEIGHTINGS, help="least-squares weighting (see above)")
    p.add_argument("--out", default="results/bench/collectives.parquet")
    p.add_argument("--time-min", type=int, default=None, help="Slurm time limit (default: PRUNEX_SLURM_TIME_MIN or 60)")
    p.add_argument("--timeout", type=float, default=300.0, help="collective timeout (s)")
    p.add_argument("--minicluster", default=None, metavar="DIR", help="use the client environment of this mini cluster")
    args = p.parse_args(argv)
    try:
        levels, ops = comma_list(args.levels, "--levels"), comma_list(args.ops, "--ops")
        check_levels_ops(levels, ops)  # before anything is made (run() checks again, for the library's callers)
        sizes = parse_sizes(args.sizes)
        if len(sizes) < 2:  # before the sweep: its measurements were lost when the fit then failed
            raise BenchError(
                f"--sizes {args.sizes}: the alpha-beta fit needs two or more distinct sizes (rounded to whole "
                f"float32 elements), got {', '.join(map(human_size, sizes))}"
            )
        if args.minicluster:
            c = MiniCluster(args.minicluster)
            if not c.is_up():
                raise BenchError(f"no mini cluster is up in {c.dir}")
            os.environ.update(c.env())
        check_outputs(out=args.out)  # the measurements are written at the end
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        folder = out.with_name(out.name.removesuffix(".parquet") + ".submitit")
        meas = run(
            sizes,
            nodes=args.nodes,
            procs_per_node=args.procs_per_node,
            executor=args.executor,
            levels=levels,
            ops=ops,
            repeats=args.repeats,
            small_repeats=args.small_repeats,
            warmup=args.warmup,
            link_model=args.link_model,
            alpha_s=args.alpha,
            bandwidth_gbit=args.bandwidth_gbit,
            folder=folder,
            time_min=args.time_min,
            timeout_s=args.timeout,
        )
        fit = fit_table(meas, args.fit)
    except (BenchError, CalibrationError, ConfigError, OSError, ValueError) as e:
        print(f"prunex.bench.collectives: {e}", file=sys.stderr)
        return 2
    write_parquet(out, meas)
    write_parquet(fit_path(out), fit)
    print(format_report(meas, fit))
    print(f"wrote {out} and {fit_path(out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
