"""Predicted vs measured iteration time of logged runs: compute plus exposed communication.

Issue 16's regime check: calibrated from the collective sweep of the same cluster session and from
compute-only runs, the model predicts each method's iteration time, which is compared with the runs
at one process per node. A run's iteration (one optimizer step of ddp/topk/pactrain, one outer ADMM
iteration of E local epochs of hsadmm/flat_admm; `prunex.methods.base`) is predicted as

    iter_s = compute + overhead + comm - hidden

- ``compute = c x samples``: ``samples`` the training samples one rank processes in the iteration
  (`workload.Workload.samples`: the step's batch, smaller at an epoch's end, or the iteration's local
  epochs x the rank's shard, E or one in masked retraining; `calibrate.samples_per_iteration`), ``c``
  the compute seconds per training sample, `calibrate.compute_per_sample` of a run (steps.parquet ``compute_s``, which
  `prunex.training.train` logs as ``iter_s - comm_s`` per rank; by default the median over iterations, since
  the target is a median too), taken from the first of:

  1. the runs named in ``compute_runs`` of the same method and model (the median of their ``c``);
  2. the run of the same method, model, dataset and batch size on one node with the same processes
     per node (the ``1x1`` run at one process per node) found among the results, one in the same
     directory first;
  3. the runs named in ``compute_runs`` of the same model, any method (the median of their ``c``);
  4. the cluster file's ``compute_s_per_sample`` of the model.

- ``overhead``: compress/decompress (`workload.iteration_cost`'s ``compress_s``: H-SADMM's shrink and
  recovery, Top-K's selection and scatter, PacTrain's pack and unpack, at the device's memory
  bandwidth and launch latency). A run of the same method (1, 2) did that work inside its measured
  compute, since its ``compute_s`` is everything but communication; so is the memory-bound vector
  work of the ADMM methods (updates, proximal term), taken to scale with the samples. Then only the
  change of the overhead from the compute run's layout to the validated one is added (Top-K's
  scatter adds every rank's values: ``(world - 1) k`` more scattered accesses). From another
  method's runs or a cluster file (3, 4), the model's vector work and all of the overhead are added.
  The device (memory bandwidth, launch latency) is the cluster file's, else `workload.Device`'s
  defaults.
- ``comm``: the method's collectives of each measured iteration (`validate.run_workloads`; H-SADMM's
  compact sizes and whether the mask is still dynamic from masks.parquet), priced on the network
  fitted from the sweep (`validate.run_network`: `calibrate.network_from_fit`; a sweep at one process
  per node has no intra level, which such runs never use) or the cluster file's. ``hidden``: DDP's
  buckets that overlap the backward pass, ``min(comm - t(last bucket), overlap x backward fraction x
  compute)`` (`workload.iteration_cost`; Li et al. 2020, "PyTorch Distributed", VLDB, sec. 3.2.3).
  ``comm - hidden`` is the exposed communication.

The prediction is averaged over the same iterations as the measurement: steps.parquet's ``iter_s``
(mean over ranks) of every iteration but the first (DDP's constructor broadcast, lazy allocations)
when there are at least two; the error is against their median, their mean is reported beside it.

Not modelled: ranks waiting in a collective for another rank's compute (load imbalance, scheduling
noise), which a measured iteration contains and the link model does not; compute per sample is
taken to be the same in every layout (true when each process has a core of its own, as at one
process per node on the mini cluster; not where processes share cores).

Importing this module does not import torch; the prediction builds the model's parameter shapes
with torch (`workload.model_spec`, on the meta device), so a torch-free reader (`analysis/`) reads
the CSV that ``python -m prunex.perfmodel validate-iterations`` writes.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prunex.perfmodel.calibrate import CalibrationError, Cluster, compute_per_sample
from prunex.perfmodel.formulas import Network
from prunex.perfmodel.validate import (
    RunData,
    _pct,
    options_of,
    run_columns,
    run_costs,
    run_network,
    run_workloads,
)
from prunex.perfmodel.workload import Device, Workload, model_spec

if TYPE_CHECKING:
    import pandas as pd

CSV_NAME = "iteration_validation.csv"
ITERATION_COLUMNS = [
    "run_id",
    "method",
    "model",
    "nodes",
    "procs_per_node",
    "link_model",
    "network",
    "iterations",
    "compute_source",
    "compute_s_per_sample",
    "samples_per_iteration",
    "predicted_compute_s",
    "predicted_overhead_s",
    "predicted_comm_s",
    "predicted_hidden_s",
    "predicted_exposed_comm_s",
    "predicted_iter_s",
    "predicted_comm_share",
    "measured_iter_s",
    "measured_iter_mean_s",
    "measured_compute_s",
    "measured_comm_s",
    "err_pct",
    "err_mean_pct",
    "within",
]


@dataclass(frozen=True)
class ComputeSource:
    """Compute seconds per training sample for a prediction, and where they come from.

    ``reference``: a run of the same method whose measured compute contains the method's local work
    (compress/decompress, ADMM vector work), so only the change of the overhead is added (module
    docstring); None when the value comes from other methods' runs or a cluster file.
    """

    s_per_sample: float
    source: str
    reference: RunData | None = None


def find_run_dirs(root: str | Path) -> list[Path]:
    """Every directory under ``root`` (itself included) with config.json and steps.parquet."""
    root = Path(root)
    return sorted({p.parent for p in root.rglob("config.json") if (p.parent / "steps.parquet").exists()})


def _same_setup(a: RunData, b: RunData) -> bool:
    keys = ("model", "dataset", "batch_size")
    return a.method == b.method and all(a.config.get(k) == b.config.get(k) for k in keys)


def resolve_compute(
    run: RunData,
    *,
    named: Sequence[RunData] = (),
    candidates: Sequence[RunData] = (),
    cluster: Cluster | None = None,
    stat: str = "median",
) -> ComputeSource:
    """The compute per sample of ``run``'s prediction, by the order of the module docstring: named
    runs of the same method and model, then the one-node run of the same method with the same
    processes per node among ``candidates``, then named runs of the same model, then the cluster."""
    model = run.config["model"]
    same = [r for r in named if r.method == run.method and r.config["model"] == model]
    if same:
        vals = [compute_per_sample(r.path, stat=stat) for r in same]
        names = ", ".join(r.run_id for r in same)
        return ComputeSource(statistics.median(vals), f"named run(s) {names}", same[0])
    local = [
        r for r in candidates if r.nodes == 1 and r.procs == run.procs and r.path != run.path and _same_setup(r, run)
    ]
    if local:
        ref = sorted(local, key=lambda r: (r.path.parent != run.path.parent, str(r.path)))[0]
        return ComputeSource(compute_per_sample(ref.path, stat=stat), f"run {ref.run_id}", ref)
    other = [r for r in named if r.config["model"] == model]
    if other:
        vals = [compute_per_sample(r.path, stat=stat) for r in other]
        names = ", ".join(r.run_id for r in other)
        return ComputeSource(statistics.median(vals), f"named run(s) {names} (other methods)")
    if cluster is not None and (per_sample := cluster.compute_for(model, run.method)) is not None:
        return ComputeSource(per_sample, f"cluster {cluster.name}")
    raise CalibrationError(
        f"{run.run_id}: no compute per sample for {run.method} on {model}: no run of it on 1 node x "
        f"{run.procs} process(es) under the results, none named (--compute-from-run), no cluster file value"
    )


def _overhead_s(w: Workload, device: Device) -> float:
    """`workload.iteration_cost`'s compress_s of one workload."""
    return w.compress_bytes / device.mem_bw + w.compress_launches * device.launch_s


def predict_iteration(
    run: RunData,
    net: Network,
    compute: ComputeSource,
    device: Device | None = None,
    network_desc: str = "",
    tolerance: float = 0.15,
) -> dict[str, Any]:
    """One row of the iteration-time table (``ITERATION_COLUMNS``): the predicted compute, overhead,
    communication, hidden and exposed seconds of ``run``'s iterations (mean over its measured
    iterations) against its measured ``iter_s`` (module docstring)."""
    base = device or Device(compute_s_per_sample=0.0)
    dev = Device(compute.s_per_sample, base.mem_bw, base.launch_s)
    ref = compute.reference
    costs = run_costs(run, net, dev, local_work=ref is None)
    if ref is not None:
        ref_works = run_workloads(ref, model_spec(ref.config["model"]), options_of(ref.config))
        ref_overhead = sum(_overhead_s(w, dev) for w in ref_works.values()) / len(ref_works)
    else:
        ref_overhead = 0.0
    its = list(costs)
    n = len(its)
    pred_compute = sum(c.compute_s for c in costs.values()) / n
    pred_overhead = sum(c.compress_s for c in costs.values()) / n - ref_overhead
    pred_comm = sum(c.comm_s for c in costs.values()) / n
    pred_hidden = sum(c.hidden_s for c in costs.values()) / n
    exposed = pred_comm - pred_hidden
    predicted = pred_compute + pred_overhead + exposed
    steps = run.steps.set_index("iteration").loc[its]
    measured, measured_mean = float(steps["iter_s"].median()), float(steps["iter_s"].mean())
    err = _pct(predicted, measured)
    return {
        **run_columns(run, network_desc),
        "iterations": n,
        "compute_source": compute.source,
        "compute_s_per_sample": compute.s_per_sample,
        "samples_per_iteration": sum(c.samples for c in costs.values()) / n,
        "predicted_compute_s": pred_compute,
        "predicted_overhead_s": pred_overhead,
        "predicted_comm_s": pred_comm,
        "predicted_hidden_s": pred_hidden,
        "predicted_exposed_comm_s": exposed,
        "predicted_iter_s": predicted,
        "predicted_comm_share": exposed / predicted if predicted > 0 else math.nan,
        "measured_iter_s": measured,
        "measured_iter_mean_s": measured_mean,
        "measured_compute_s": float(steps["compute_s"].median()),
        "measured_comm_s": float(steps["comm_s"].median()),
        "err_pct": err,
        "err_mean_pct": _pct(predicted, measured_mean),
        "within": bool(abs(err) <= 100 * tolerance),
    }


def select_runs(runs: Sequence[RunData], procs_per_node: int | None = 1, min_nodes: int = 2) -> list[RunData]:
    """The runs to validate: on at least ``min_nodes`` nodes, with ``procs_per_node`` processes per
    node (None: any)."""
    return [r for r in runs if r.nodes >= min_nodes and (procs_per_node is None or r.procs == procs_per_node)]


def validate_iterations(
    root: str | Path,
    fit: pd.DataFrame | None = None,
    *,
    cluster: Cluster | None = None,
    compute_runs: Sequence[str | Path] = (),
    procs_per_node: int | None = 1,
    min_nodes: int = 2,
    tolerance: float = 0.15,
    compute_stat: str = "median",
) -> pd.DataFrame:
    """The iteration-time table (pandas, ``ITERATION_COLUMNS``, one row per validated run) of the runs
    under ``root`` on at least ``min_nodes`` nodes with ``procs_per_node`` processes per node.

    ``fit``: the collective sweep's fit table (`calibrate.read_fit_table`); without it the cluster
    file's network. ``compute_runs``/``cluster``: where compute per sample comes from besides the
    one-node runs under ``root`` (:func:`resolve_compute`); the cluster also gives the device.
    """
    import pandas as pd

    if fit is None and cluster is None:
        raise CalibrationError("give a collective sweep (--collectives) or a cluster file (--cluster)")
    runs = [RunData(p) for p in find_run_dirs(root)]
    chosen = select_runs(runs, procs_per_node, min_nodes)
    if not chosen:
        layouts = ", ".join(sorted({f"{r.nodes}x{r.procs}" for r in runs})) or "none"
        per = "any number of" if procs_per_node is None else str(procs_per_node)
        raise CalibrationError(
            f"no runs on >= {min_nodes} nodes with {per} process(es) per node under {root} (layouts found: {layouts})"
        )
    named = [RunData(p) for p in compute_runs]
    device = Device(0.0, cluster.mem_bw, cluster.launch_s) if cluster is not None else None
    rows = []
    for run in chosen:
        if fit is not None:
            net, desc = run_network(run, fit)
        else:
            net, desc = cluster.network, f"cluster {cluster.name}"
        compute = resolve_compute(run, named=named, candidates=runs, cluster=cluster, stat=compute_stat)
        rows.append(predict_iteration(run, net, compute, device, desc, tolerance))
    return pd.DataFrame(rows, columns=ITERATION_COLUMNS)


def format_iteration_table(df: pd.DataFrame, tolerance: float = 0.15) -> str:
    """The table as aligned text (ms per iteration)."""
    head = (
        f"{'run':32} {'M x P':5} {'compute':>9} {'overhead':>9} {'comm':>9} {'hidden':>8} {'exposed':>9} "
        f"{'predicted':>10} | {'median':>9} {'err':>7} | {'mean':>9} {'err':>7} | within"
    )
    lines = [head, "-" * len(head)]
    for r in df.itertuples():
        lines.append(
            f"{r.run_id[:32]:32} {r.nodes}x{r.procs_per_node:<3} {1e3 * r.predicted_compute_s:8.1f}m "
            f"{1e3 * r.predicted_overhead_s:8.2f}m {1e3 * r.predicted_comm_s:8.1f}m "
            f"{1e3 * r.predicted_hidden_s:7.1f}m {1e3 * r.predicted_exposed_comm_s:8.1f}m "
            f"{1e3 * r.predicted_iter_s:9.1f}m | {1e3 * r.measured_iter_s:8.1f}m {r.err_pct:+6.1f}% | "
            f"{1e3 * r.measured_iter_mean_s:8.1f}m {r.err_mean_pct:+6.1f}% | {'yes' if r.within else 'no'}"
        )
    lines.append(
        f"{int(df['within'].sum())} of {len(df)} predicted iteration times within {100 * tolerance:.0f}% of the "
        "measured median"
    )
    sources = sorted({f"{r.method}: {r.compute_source}" for r in df.itertuples()})
    lines.append("compute per sample from " + "; ".join(sources))
    lines.append(
        "(m = ms per iteration, mean over the measured iterations; predicted = compute + overhead + comm - hidden; "
        "measured: steps.parquet iter_s, iteration 0 left out)"
    )
    return "\n".join(lines)
