"""Calibration: link parameters from timings, compute seconds per sample from runs, cluster files.

- :func:`fit_link`: `prunex.comm.cost.fit_alpha_beta` (the one alpha-beta fit, which the collective
  sweep uses too) of ``t(n) = A + b(n) / beta`` over message sizes, with ``b(n)`` the bandwidth term
  `prunex.comm.cost.bandwidth_bytes` and ``A`` the per-call latency, which is ``steps * alpha``
  (Hockney's model on the ring, `commcost.ring_steps`), so ``alpha = A / steps``. Weights ``1/t``
  (relative errors: the small sizes fix alpha, the large ones beta) by default; ``absolute`` and
  ``scaled`` (``1/sqrt(t)``, the collective sweep's default) too.
- :func:`network_from_fit`: a :class:`~prunex.perfmodel.formulas.Network` from the fit table of
  ``prunex.bench.collectives`` (columns level, op, alpha_s (per call), beta_bytes_per_s (bus
  bandwidth, the same b(n) as here), members).
- :func:`measure_loopback`: a small gloo sweep between processes of this machine, for the loopback
  "intra" level of the alpha-beta emulation.
- :func:`compute_per_sample`: compute seconds per training sample of a run (steps.parquet
  ``compute_s`` over the samples one rank trains per iteration).
- :func:`load_cluster`: a cluster description file (schema in `prunex.perfmodel`).
- `prunex.perfmodel.measured`: the cluster file of a measured (mini) cluster (``cluster_from_sweep``), which
  needs the predicted workloads of `prunex.perfmodel.validate` and so lives apart from this module.
"""

from __future__ import annotations

import json
import math
import os
import socket
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prunex.comm.cost import FIT_WEIGHTINGS, bandwidth_bytes, fit_alpha_beta, ring_steps
from prunex.methods.registry import method_info
from prunex.perfmodel.formulas import Link, Network

# training images (docs/running.md, Data: digits 80% of 1,797)
DATASET_SIZES = {"cifar10": 50_000, "digits": 1_438, "fashion-mnist": 60_000}
CLUSTERS_DIR = Path(__file__).resolve().parent.parent.parent / "clusters"


class CalibrationError(RuntimeError):
    """Input that cannot be calibrated from; the message says why."""


@dataclass(frozen=True)
class LinkFit:
    link: Link
    call_latency_s: float  # A = steps * alpha
    r2: float
    max_rel_err: float
    points: int


def fit_link(
    sizes: Sequence[float],
    seconds: Sequence[float],
    op: str = "allreduce",
    members: int = 2,
    broadcast_algo: str = "ring",
    weighting: str = "relative",
) -> LinkFit:
    """Fit ``t(n) = steps(op, p) * alpha + bandwidth_bytes(op, n, p) / beta`` (Hockney 1994 on the
    ring of Thakur et al. 2005) to timings of one op on a group of ``members``, by
    `prunex.comm.cost.fit_alpha_beta` (``alpha >= 0``; a negative intercept is refitted through the
    origin). Returns the :class:`LinkFit` (alpha per ring step).
    """
    if weighting not in FIT_WEIGHTINGS:
        raise CalibrationError(f"unknown weighting {weighting!r}; known: {', '.join(FIT_WEIGHTINGS)}")
    steps = ring_steps(op, members, broadcast_algo)
    if steps == 0:
        raise CalibrationError(f"a group of {members} member(s) does not communicate")
    x = [bandwidth_bytes(op, n, members, broadcast_algo) for n in sizes]
    try:
        fit = fit_alpha_beta(x, seconds, weighting)
    except ValueError as e:
        raise CalibrationError(str(e)) from None
    if math.isinf(fit.beta):
        raise CalibrationError("the timings do not grow with the message size: no bandwidth to fit")
    return LinkFit(Link(fit.call_latency_s / steps, fit.beta), fit.call_latency_s, fit.r2, fit.max_rel_err, fit.points)


# -------------------------------------------------------------------------------- fit tables (sweep)
FIT_COLUMNS = ("level", "op", "alpha_s", "beta_bytes_per_s", "members")


SWEEP_TIMES = ("last", "slowest")


# -- the collective sweep's fit table (`prunex.bench.collectives` measures, this fits) ----------------
SWEEP_FIT_COLUMNS = [
    "level",
    "op",
    "alpha_s",
    "beta_bytes_per_s",
    "r2",
    "max_rel_err",
    "n_points",
    "members",
    "bytes_factor",
    "fit",
    "link_model",
    "nodes",
    "procs_per_node",
    "link_bytes_per_s",
]


def bytes_factor(op: str, members: int) -> float:
    """b(n)/n of the fitted model: what the busiest member of a ring of ``members`` sends, per payload byte
    (`prunex.comm.cost.bandwidth_bytes` of the chain)."""
    return bandwidth_bytes(op, 1, members, "ring")


def fit_row(x: Sequence[float], t: Sequence[float], weighting: str = "scaled") -> dict[str, float]:
    """`prunex.comm.cost.fit_alpha_beta` of ``t = alpha + x / beta`` as a fit-table row: alpha_s (per call),
    beta_bytes_per_s (inf when the data show no size dependence), r2 (in the fit's weighting), max_rel_err."""
    try:
        fit = fit_alpha_beta(x, t, weighting)
    except ValueError as e:
        raise CalibrationError(str(e)) from None
    return {
        "alpha_s": fit.call_latency_s,
        "beta_bytes_per_s": fit.beta,
        "r2": fit.r2,
        "max_rel_err": fit.max_rel_err,
    }


def fit_table(measurements, weighting: str = "scaled"):
    """One alpha-beta fit per (level, op) of a sweep's measurement table (`prunex.bench.collectives`)."""
    import pandas as pd

    rows = []
    for (level, op), df in measurements.groupby(["level", "op"], sort=False):
        df = df.sort_values("size_bytes")
        fit = fit_row(df["bytes_term"].to_numpy(), df["seconds"].to_numpy(), weighting)
        first = df.iloc[0]
        rows.append(
            {
                "level": level,
                "op": op,
                **fit,
                "n_points": len(df),
                "members": int(first["members"]),
                "bytes_factor": bytes_factor(op, int(first["members"])),
                "fit": weighting,
                "link_model": first["link_model"],
                "nodes": int(first["nodes"]),
                "procs_per_node": int(first["procs_per_node"]),
                "link_bytes_per_s": float(first["link_bytes_per_s"]),
            }
        )
    return pd.DataFrame(rows, columns=SWEEP_FIT_COLUMNS)


def read_fit_table(path: str | Path, time: str = "slowest"):
    """The fit table of a collective sweep: ``path`` itself when it has the fit columns, else its
    ``.fit.parquet`` sibling (`prunex.bench.collectives.fit_path`), else a fit of its measurement
    rows (level, op, size_bytes, seconds, members).

    ``time="last"``: refit the measurement rows on ``seconds_last`` (per call the last-arriving member's
    time, median over calls) with the sweep's own weighting (`fit_table`), the
    statistic that matches validation's wait-free time; falls back to the sweep's fit (slowest member)
    when the table has no ``seconds_last``. The returned table's ``time_stat`` column says which was used.
    """
    import pandas as pd

    if time not in SWEEP_TIMES:
        raise CalibrationError(f"unknown sweep time {time!r}; known: {', '.join(SWEEP_TIMES)}")
    path = Path(path)
    if not path.exists():
        raise CalibrationError(f"{path}: no such file")
    df = pd.read_parquet(path)
    if time == "last" and "seconds_last" in df.columns:
        fit = fit_table(df.assign(seconds=df["seconds_last"]))
        return fit.assign(time_stat="last arriver")
    if all(c in df.columns for c in FIT_COLUMNS):
        return df.assign(time_stat="slowest member")
    sibling = path.with_name(path.name.removesuffix(".parquet") + ".fit.parquet")
    if sibling.exists():
        fit = pd.read_parquet(sibling)
        if all(c in fit.columns for c in FIT_COLUMNS):
            return fit.assign(time_stat="slowest member")
    needed = ("level", "op", "size_bytes", "seconds", "members")
    if not all(c in df.columns for c in needed):
        raise CalibrationError(f"{path}: neither a fit table nor a measurement table of the collective sweep")
    return fit_measurements(df).assign(time_stat="slowest member")


def fit_measurements(df, weighting: str = "relative", broadcast_algo: str = "ring"):
    """Fit rows (level, op, alpha_s per call, beta_bytes_per_s, r2, members) from measurement rows."""
    import pandas as pd

    rows = []
    for (level, op), g in df.groupby(["level", "op"], sort=False):
        p = int(g["members"].iloc[0])
        f = fit_link(g["size_bytes"].tolist(), g["seconds"].tolist(), op, p, broadcast_algo, weighting)
        rows.append(
            {
                "level": level,
                "op": op,
                "alpha_s": f.call_latency_s,
                "beta_bytes_per_s": f.link.beta,
                "r2": f.r2,
                "max_rel_err": f.max_rel_err,
                "members": p,
                "n_points": f.points,
                "bytes_factor": bandwidth_bytes(op, 1, p, broadcast_algo),  # beta is per byte of this x n
            }
        )
    return pd.DataFrame(rows)


def links_from_fit_table(fit, broadcast_algo: str = "ring") -> dict[tuple[str, str], Link]:
    """(level, op) -> Link with alpha per ring step = per-call alpha / ring_steps(op, members), and beta
    per byte of `bandwidth_bytes` under ``broadcast_algo``. A fit's beta is per byte of its own bandwidth
    term, ``bytes_factor x n`` (the sweep's: the chain's, ``n`` for a broadcast; :func:`bytes_factor`
    where the table has no such column), so it is scaled by ``bandwidth_bytes(op, 1, members, algo) /
    bytes_factor``: 1 except for a tree broadcast of ``members >= 3``, ``ceil(log2 members)``, the rounds
    in which the root sends the whole message (Thakur et al. 2005)."""
    out = {}
    for r in fit.itertuples():
        op, members = str(r.op), int(r.members)
        steps = ring_steps(op, members, broadcast_algo)
        beta = float(r.beta_bytes_per_s)
        if steps == 0 or not (beta > 0 and math.isfinite(beta)):
            continue
        fitted = float(getattr(r, "bytes_factor", bytes_factor(op, members)))
        beta *= bandwidth_bytes(op, 1, members, broadcast_algo) / fitted
        out[(str(r.level), op)] = Link(max(0.0, float(r.alpha_s)) / steps, beta)
    return out


def network_from_fit(
    fit,
    *,
    emulated: bool = False,
    inter: Link | None = None,
    broadcast_algo: str = "tree",
    undelayed: frozenset[tuple[str, str]] = frozenset(),
    intra_unused: bool = False,
) -> Network:
    """A Network from a sweep's fit table.

    Real links: intra/inter/flat from the allreduce fits of each level (broadcast fits where present).
    Emulated (alpha-beta): only the intra (loopback) fits are used; ``inter`` must be the modelled link
    (from the run's config), since the sweep's inter and flat timings contain its own delays.
    ``intra_unused``: the network prices runs of one process per node, whose intra-node groups have one
    member and cost nothing (`formulas.time_of`); a sweep at one process per node has no intra level
    (`prunex.bench.collectives` skips groups of one), so the inter link stands in for it.
    """
    links = links_from_fit_table(fit, broadcast_algo)
    intra = links.get(("intra", "allreduce"))
    if intra is None and intra_unused and not emulated:
        intra = links.get(("inter", "allreduce"))
    if intra is None:
        raise CalibrationError("the fit table has no intra-level allreduce fit")
    if emulated:
        if inter is None:
            raise CalibrationError("an emulated network needs the modelled inter-node link")
        return Network(
            intra,
            inter,
            intra_broadcast=links.get(("intra", "broadcast")),
            broadcast_algo=broadcast_algo,
            emulated=True,
            undelayed=undelayed,
        )
    inter = inter or links.get(("inter", "allreduce"))
    if inter is None:
        raise CalibrationError("the fit table has no inter-level allreduce fit")
    return Network(
        intra,
        inter,
        links.get(("intra", "broadcast")),
        links.get(("inter", "broadcast")),
        links.get(("flat", "allreduce")),
        broadcast_algo,
    )


# -------------------------------------------------------------------------------- loopback sweep
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _loopback_worker(rank: int, world: int, port: int, sizes: list[int], repeats: int, queue: Any) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    rows = []
    try:
        for op in ("allreduce", "broadcast"):
            for n in sizes:
                t = torch.zeros(max(1, n // 4))
                for rep in range(repeats + 1):  # the first call is a warm-up
                    dist.barrier()
                    t0 = time.perf_counter()
                    if op == "allreduce":
                        dist.all_reduce(t)
                    else:
                        dist.broadcast(t, 0)
                    if rep:
                        rows.append((op, n, rep, time.perf_counter() - t0))
        queue.put(rows)
    finally:
        dist.destroy_process_group()


def measure_loopback(
    procs: int = 2,
    sizes: Sequence[int] = tuple(4096 * 4**i for i in range(6)),
    repeats: int = 7,
    weighting: str = "relative",
):
    """Time gloo allreduce and broadcast between ``procs`` processes of this machine (loopback TCP) and
    fit them: a fit table (level ``intra``) for :func:`network_from_fit`. A call's time is its
    slowest member's; the median over ``repeats`` calls is fitted."""
    import multiprocessing as mp

    import pandas as pd

    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    port = _free_port()
    env = {k: os.environ.get(k) for k in ("OMP_NUM_THREADS",)}
    os.environ["OMP_NUM_THREADS"] = "1"
    try:
        ps = [
            ctx.Process(target=_loopback_worker, args=(r, procs, port, list(sizes), repeats, queue))
            for r in range(procs)
        ]
        for p in ps:
            p.start()
        results = [queue.get(timeout=600) for _ in ps]
        for p in ps:
            p.join(timeout=60)
    finally:
        for k, v in env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    slowest: dict[tuple[str, int, int], float] = {}
    for rows in results:
        for op, n, rep, sec in rows:
            slowest[(op, n, rep)] = max(slowest.get((op, n, rep), 0.0), sec)
    per: dict[tuple[str, int], list[float]] = {}
    for (op, n, _), sec in slowest.items():
        per.setdefault((op, n), []).append(sec)
    meas = pd.DataFrame(
        [
            {"level": "intra", "op": op, "size_bytes": n, "seconds": statistics.median(v), "members": procs}
            for (op, n), v in sorted(per.items())
        ]
    )
    return meas, fit_measurements(meas, weighting, broadcast_algo="tree")


# -------------------------------------------------------------------------------- compute per sample
def shard_of(config: dict[str, Any]) -> int:
    """Training samples per rank of a run (config.json as a dict): ``floor(D / N)`` (DistributedSampler
    with drop_last), D the dataset's training split or ``train_subset``."""
    world = int(config["nodes"]) * int(config["procs_per_node"])
    size = DATASET_SIZES.get(config["dataset"])
    subset = int(config.get("train_subset") or 0)
    if subset:
        size = min(subset, size) if size else subset
    if size is None:
        raise CalibrationError(f"unknown dataset size of {config['dataset']!r}")
    return size // world


def step_samples(config: dict[str, Any], iteration: int) -> int:
    """Training samples of one rank in SGD step ``iteration`` of a run (config.json as a dict), as
    `prunex.training.data.shard_loader` batches the shard (the sampler drops the dataset's tail, the
    DataLoader keeps the shard's): the batch, except the last of the ``ceil(shard / b)`` steps of each
    epoch, which holds the rest of the shard (`prunex.methods.base.StepwiseMethod.train_iteration`)."""
    shard, batch = shard_of(config), int(config["batch_size"])
    per_epoch = -(-shard // batch)
    return batch if iteration % per_epoch < per_epoch - 1 else shard - (per_epoch - 1) * batch


def local_epochs(config: dict[str, Any], steps) -> dict[int, int]:
    """Local epochs of each logged outer iteration of an ADMM run: the increments of steps.parquet's
    ``epoch`` (the shard's epochs done after the iteration). That is E, but one in masked retraining,
    after the K outer iterations or once the residuals converged
    (`prunex.methods.hsadmm.ADMMMethod.train_iteration`); without a complete ``epoch`` column, E for the
    first K iterations and one after."""
    its = sorted(int(k) for k in steps["iteration"])
    a = config["admm"]
    if "epoch" not in steps.columns or steps["epoch"].isna().any():
        return {k: int(a["local_epochs"]) if k < int(a["iterations"]) else 1 for k in its}
    done = steps.set_index("iteration")["epoch"].astype(float)
    out, before = {}, 0.0
    for k in its:
        out[k], before = round(float(done.loc[k]) - before), float(done.loc[k])
    return out


def samples_per_iteration(config: dict[str, Any], steps):
    """Training samples one rank processes in each logged iteration of a run (config.json as a dict,
    its steps.parquet), aligned with ``steps``: an SGD step's (:func:`step_samples`), or the local
    epochs of an outer ADMM iteration (:func:`local_epochs`) times the shard."""
    if method_info(config["method"]).outer_iterations:
        epochs = local_epochs(config, steps)
        return steps["iteration"].map(lambda k: float(epochs[int(k)] * shard_of(config)))
    return steps["iteration"].map(lambda k: float(step_samples(config, int(k))))


COMPUTE_STATS = ("mean", "median")


def compute_per_sample(run_dir: str | Path, skip_first: bool = True, stat: str = "mean") -> float:
    """``compute_s`` per training sample of a run over its iterations (iteration 0 left out when there
    are more): all their compute over all their samples (``stat="mean"``), or the median of each
    iteration's compute per sample (``stat="median"``), with each iteration's own samples
    (:func:`samples_per_iteration`: an epoch's last, smaller batch; an ADMM iteration's local epochs)."""
    import pandas as pd

    if stat not in COMPUTE_STATS:
        raise CalibrationError(f"unknown statistic {stat!r}; known: {', '.join(COMPUTE_STATS)}")
    run_dir = Path(run_dir)
    config = json.loads((run_dir / "config.json").read_text())
    steps = pd.read_parquet(run_dir / "steps.parquet")
    samples = samples_per_iteration(config, steps)
    if skip_first and len(steps) > 1:
        keep = steps["iteration"] > steps["iteration"].min()
        steps, samples = steps[keep], samples[keep]
    if stat == "median":
        return float((steps["compute_s"] / samples).median())
    return float(steps["compute_s"].sum() / samples.sum())


# -------------------------------------------------------------------------------- cluster files
@dataclass(frozen=True)
class Cluster:
    """A cluster description (schema in `prunex.perfmodel`)."""

    name: str
    gpus_per_node: int
    network: Network
    mem_bw: float
    launch_s: float
    compute_s_per_sample: dict[str, float]
    dataset_sizes: dict[str, int]
    assumptions: list[str] = field(default_factory=list)
    path: str = ""
    # model -> method -> seconds per sample measured on that method's runs (`cluster_from_sweep`)
    method_compute_s_per_sample: dict[str, dict[str, float]] = field(default_factory=dict)

    def compute_for(self, model: str, method: str) -> float | None:
        """Compute seconds per training sample of ``method`` on ``model``: measured on its own runs where the
        file has them (``compute_s_per_sample_by_method``), else the model's ``compute_s_per_sample``."""
        own = self.method_compute_s_per_sample.get(model, {}).get(method)
        return own if own is not None else self.compute_s_per_sample.get(model)


def _value(node: Any, what: str, notes: list[str]) -> float:
    """A number, or ``{"value": x, "source": ..., "status": ...}`` (recorded in ``notes``)."""
    if isinstance(node, dict):
        if "value" not in node:
            raise CalibrationError(f"{what}: an object needs a 'value'")
        status = node.get("status", "given")
        notes.append(f"{what} = {node['value']:g} [{status}] {node.get('source', '')}".rstrip())
        node = node["value"]
    if isinstance(node, bool) or not isinstance(node, (int, float)) or not math.isfinite(node):
        raise CalibrationError(f"{what}: expected a finite number, got {node!r}")
    return float(node)


def _optional_link(raw: dict[str, Any], key: str, notes: list[str]) -> Link | None:
    return _link(raw[key], key, notes) if key in raw else None


def _link(node: dict[str, Any], what: str, notes: list[str]) -> Link:
    alpha = _value(node["alpha_s"], f"{what}.alpha_s", notes)
    if "beta_bytes_per_s" in node:
        beta = _value(node["beta_bytes_per_s"], f"{what}.beta_bytes_per_s", notes)
    else:
        nominal = _value(node["nominal_bytes_per_s"], f"{what}.nominal_bytes_per_s", notes)
        eff = _value(node.get("efficiency", 1.0), f"{what}.efficiency", notes)
        rails = _value(node.get("rails", 1), f"{what}.rails", notes)
        beta = nominal * eff * rails
        notes.append(f"{what}.beta = nominal x efficiency x rails = {beta:.4g} B/s")
    return Link(alpha, beta)


def load_cluster(name_or_path: str | Path) -> Cluster:
    """Read ``clusters/<name>.json`` (or a path) into a :class:`Cluster`."""
    path = Path(name_or_path)
    if not path.suffix and not path.exists():
        path = CLUSTERS_DIR / f"{name_or_path}.json"
    if not path.exists():
        known = sorted(p.stem for p in CLUSTERS_DIR.glob("*.json"))
        raise CalibrationError(f"no cluster file {path} (known: {', '.join(known) or 'none'})")
    try:
        raw = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise CalibrationError(f"{path}: not valid JSON ({e})") from None
    notes: list[str] = []
    try:
        intra, inter = _link(raw["intra"], "intra", notes), _link(raw["inter"], "inter", notes)
        dev = raw.get("device", {})
        mem = _value(dev.get("memory_bytes_per_s", 900e9), "device.memory_bytes_per_s", notes)
        mem *= _value(dev.get("memory_efficiency", 1.0), "device.memory_efficiency", notes)
        launch = _value(dev.get("kernel_launch_s", 5e-6), "device.kernel_launch_s", notes)
        compute = {
            m: _value(v, f"compute_s_per_sample.{m}", notes) for m, v in raw.get("compute_s_per_sample", {}).items()
        }
        by_method = {
            m: {k: _value(v, f"compute_s_per_sample_by_method.{m}.{k}", notes) for k, v in methods.items()}
            for m, methods in raw.get("compute_s_per_sample_by_method", {}).items()
        }
        datasets = {**DATASET_SIZES, **{k: int(v) for k, v in raw.get("datasets", {}).items()}}
        net = Network(
            intra,
            inter,
            _optional_link(raw, "intra_broadcast", notes),
            _optional_link(raw, "inter_broadcast", notes),
            _optional_link(raw, "flat", notes),
            broadcast_algo=raw.get("broadcast_algo", "ring"),
            inter_nics=int(_value(raw["inter"].get("nics_per_node", 1), "inter.nics_per_node", notes)),
        )
        gpn = int(_value(raw["gpus_per_node"], "gpus_per_node", notes))
    except KeyError as e:
        raise CalibrationError(f"{path}: missing key {e}") from None
    except ValueError as e:
        raise CalibrationError(f"{path}: {e}") from None
    notes += [str(a) for a in raw.get("notes", [])]
    name = raw.get("name", path.stem)
    return Cluster(
        name, gpn, net, mem, launch, compute, datasets, notes, str(path), method_compute_s_per_sample=by_method
    )
