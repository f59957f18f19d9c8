"""The cluster file of a cluster measured here (`python -m prunex.perfmodel cluster-from-sweep`).

- :func:`cluster_from_sweep`: its links from a collective sweep's fit table, compute seconds per sample per method
  from runs (:func:`model_compute_per_sample`: the logged compute less the method's own work as the model prices it,
  which needs `prunex.perfmodel.validate`'s predicted workloads), memory bandwidth and per-op overhead measured on
  this machine (:func:`measure_device`) or taken from another cluster file (:func:`device_of`).
"""

from __future__ import annotations

import json
import math
import socket
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from prunex.perfmodel.calibrate import CalibrationError, links_from_fit_table
from prunex.perfmodel.validate import RunData, options_of, run_workloads
from prunex.perfmodel.workload import model_spec


def model_compute_per_sample(run_dir: str | Path, mem_bw: float, launch_s: float) -> float:
    """Forward, backward and optimizer step seconds per training sample of a run: what a cluster file's
    ``compute_s_per_sample`` is, since the model adds each method's own work to ``samples x c``
    (`workload.iteration_cost`: the memory-bound vector work of the ADMM methods, compress/decompress).
    The run's logged compute (everything but communication) holds that work, so it is taken off, as the
    model prices it on a device of ``mem_bw`` bytes/s and ``launch_s`` per launch, before dividing by the
    samples (`validate.run_workloads`, iterations as :func:`compute_per_sample`'s mean). Not added back:
    DDP's communication hidden behind the backward pass, which its logged compute leaves out (none with
    one DDP bucket, or one rank)."""

    run = RunData(run_dir)
    works = run_workloads(run, model_spec(run.config["model"]), options_of(run.config))
    own = sum(
        w.vector_bytes / mem_bw + w.compress_bytes / mem_bw + w.compress_launches * launch_s for w in works.values()
    )
    compute = float(run.steps.set_index("iteration").loc[list(works), "compute_s"].sum())
    if compute <= own:
        raise CalibrationError(
            f"{run_dir}: the method's own work as modelled ({own:.4g} s) is not below its logged compute "
            f"({compute:.4g} s)"
        )
    return (compute - own) / sum(w.samples for w in works.values())


def measure_device(size_bytes: int = 64 << 20, repeats: int = 5, ops: int = 2000) -> tuple[float, float]:
    """(memory bytes/s, seconds per small tensor op) of this machine's CPU, as torch sees it: the best of
    ``repeats`` copies of a ``size_bytes`` float32 tensor (read + write = 2 x size bytes), and the mean
    time of ``ops`` in-place additions on a 1-element tensor (the per-op overhead that plays the role of
    a GPU's kernel launch)."""
    import torch

    src = torch.ones(size_bytes // 4)
    dst = torch.empty_like(src)
    dst.copy_(src)
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        dst.copy_(src)
        best = min(best, time.perf_counter() - t0)
    tiny = torch.zeros(1)
    t0 = time.perf_counter()
    for _ in range(ops):
        tiny.add_(1.0)
    per_op = (time.perf_counter() - t0) / ops
    return 2.0 * size_bytes / best, per_op


def device_of(path: str | Path) -> tuple[tuple[float, float], tuple[str, str]]:
    """((memory bytes/s, per-op seconds), their two sources) of a cluster file written by `cluster_from_sweep`:
    for a cluster file made again from runs of another machine than this one (`cluster-from-sweep
    --device-from`), whose device figures should be that machine's, not this one's."""
    raw = json.loads(Path(path).read_text())
    try:
        mem, op = raw["device"]["memory_bytes_per_s"], raw["device"]["kernel_launch_s"]
        values = (float(mem["value"]), float(op["value"]))
    except (KeyError, TypeError, ValueError) as e:
        raise CalibrationError(f"{path}: no measured device (memory_bytes_per_s, kernel_launch_s): {e}") from None
    taken = f" (taken from {path})"
    sources = tuple(str(x.get("source", "?")).removesuffix(taken) + taken for x in (mem, op))
    return values, (sources[0], sources[1])


def _measured(value: float, source: str) -> dict[str, Any]:
    return {"value": float(value), "status": "measured", "source": source}


def cluster_from_sweep(
    fit,
    *,
    name: str,
    procs_per_node: int,
    compute_runs: Sequence[str | Path] = (),
    sweep_source: str = "",
    device: tuple[float, float] | None = None,
    broadcast_algo: str = "tree",
    device_source: tuple[str, str] | None = None,
) -> dict[str, Any]:
    """A cluster description (the JSON schema of `prunex.perfmodel`) of the cluster a collective sweep ran on.

    - ``intra``/``inter``/``flat``: the allreduce fits of each level, ``intra_broadcast``/``inter_broadcast``
      the broadcast fits, alpha per ring step (= the fit's per-call alpha / `formulas.ring_steps`), so the
      same numbers price any group size;
    - ``compute_s_per_sample_by_method``: per model and method, the median over that method's
      ``compute_runs`` of :func:`model_compute_per_sample` (forward, backward and step per sample: the
      logged compute less the method's own work that the model adds back); a projection of a method
      takes its own (`Cluster.compute_for`), since the methods' measured compute per sample differ by
      more than the model's own work explains (the local profile's 1 x 2 runs: 5.4 to 11.5 ms);
    - ``compute_s_per_sample``: per model, the median of the same values over all ``compute_runs``, for
      a method without runs of its own and for run-time estimates (`prunex.cluster.estimate`);
    - ``device``: ``device`` = (memory bytes/s, per-op seconds) with ``device_source`` (their two sources:
      :func:`device_of` another cluster file), else :func:`measure_device` now, on this host and CPU.
    """
    links = links_from_fit_table(fit, broadcast_algo)
    src = sweep_source or "collective sweep"

    def entry(level: str, op: str) -> dict[str, Any] | None:
        link = links.get((level, op))
        if link is None:
            return None
        row = fit[(fit["level"] == level) & (fit["op"] == op)].iloc[0]
        stat = f", {row['time_stat']} times" if "time_stat" in fit.columns else ""
        where = f"{src}: {level} {op} fit over {int(row['members'])} members{stat}"
        return {
            "alpha_s": _measured(link.alpha_s, f"{where}, per-call alpha / ring steps"),
            "beta_bytes_per_s": _measured(link.beta, f"{where}, bus bandwidth"),
        }

    intra, inter = entry("intra", "allreduce"), entry("inter", "allreduce")
    if intra is None and inter is not None and procs_per_node == 1:
        # a sweep at one process per node has no intra level (groups of one are skipped); nothing on
        # such a cluster uses the intra link, so the inter link's numbers stand in for it
        intra = {
            k: {**v, "status": "assumption", "source": f"stand-in, no intra level at 1 process per node: {v['source']}"}
            for k, v in inter.items()
        }
    if intra is None or inter is None:
        raise CalibrationError(
            f"{src}: needs intra and inter allreduce fits (have: {', '.join(f'{a}/{b}' for a, b in links) or 'none'})"
        )
    mem, per_op = device if device is not None else measure_device()
    per_model: dict[str, dict[str, list[tuple[float, str]]]] = {}
    for run in compute_runs:
        run = Path(run)
        config = json.loads((run / "config.json").read_text())
        value = model_compute_per_sample(run, mem, per_op)
        per_model.setdefault(str(config["model"]), {}).setdefault(str(config["method"]), []).append((value, str(run)))
    what = (
        "forward, backward and step seconds per training sample (steps.parquet compute_s, iteration 0 left out, "
        "less the method's own work as the model prices it on this device)"
    )

    def median_of(vals: list[tuple[float, str]], of: str) -> dict[str, Any]:
        listed = ", ".join(f"{r} {v * 1e3:.4g} ms" for v, r in vals)
        return _measured(statistics.median(v for v, _ in vals), f"median of the {what} of {len(vals)} {of}: {listed}")

    compute, by_method = {}, {}
    for model, methods in per_model.items():
        every = [v for vals in methods.values() for v in vals]
        compute[model] = median_of(every, "run(s) of any method (for a method without runs of its own)")
        by_method[model] = {m: median_of(vals, f"{m} run(s)") for m, vals in methods.items()}
    if device_source is None:  # measured here, now
        from prunex.training.log import hardware_name  # lazy: pandas, only where the device is measured here

        where = f"{socket.gethostname()} ({hardware_name('cpu')})"
        mem_source, op_source = f"torch copy of a 64 MB tensor on {where}", f"per small torch op on {where}"
    else:  # `device` comes from elsewhere (`device_of`): its sources say where
        mem_source, op_source = device_source
    out: dict[str, Any] = {
        "name": name,
        "description": f"generated by `python -m prunex.perfmodel cluster-from-sweep` from {src}",
        "gpus_per_node": _measured(procs_per_node, "processes per node of the sweep"),
        "intra": intra,
        "inter": inter,
        "broadcast_algo": broadcast_algo,
        "device": {
            "memory_bytes_per_s": _measured(mem, mem_source),
            "memory_efficiency": 1.0,
            "kernel_launch_s": _measured(per_op, op_source),
        },
        "compute_s_per_sample": compute,
        "compute_s_per_sample_by_method": by_method,
        "notes": [
            "gloo broadcasts with a binomial tree (broadcast_algo tree)",
            "flat collectives that span nodes use the flat group's own fit",
        ],
    }
    for key, level, op in (
        ("flat", "flat", "allreduce"),
        ("intra_broadcast", "intra", "broadcast"),
        ("inter_broadcast", "inter", "broadcast"),
    ):
        e = entry(level, op)
        if e is not None:
            out[key] = e
    return out
