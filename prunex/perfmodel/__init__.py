"""An analytic performance model of every method: seconds per iteration and per epoch, bytes per level.

    python -m prunex.perfmodel validate --results DIR [--collectives SWEEP.parquet | --measure-loopback] [--out DIR]
    python -m prunex.perfmodel validate-iterations --results DIR --collectives SWEEP.parquet
        [--compute-from-run RUN_DIR ...] [--procs-per-node 1] [--tolerance 0.15] --out DIR   # iteration times
    python -m prunex.perfmodel project --cluster puhti [--model resnet152] [--out DIR]
    python -m prunex.perfmodel loopback --out loopback.parquet      # measure this machine's loopback level
    python -m prunex.perfmodel cluster-from-sweep --collectives SWEEP.parquet --compute-from-run RUN_DIR
        [--compute-from-run RUN_DIR ...] --out mycluster.json         # a cluster file of a measured cluster

Pieces (each a small set of pure functions and dataclasses):

- `prunex.comm.cost` (not part of this package: the one communication cost model that the
  instrumented collectives log with too): Hockney's alpha-beta model on ring collectives (Thakur,
  Rabenseifner & Gropp 2005; Patarasuk & Yuan 2009): AllReduce ``2(p-1) alpha + 2(p-1)/p n/beta``,
  AllGather ``(p-1) alpha + (p-1) n/beta``, Broadcast ``ceil(log2 p)(alpha + n/beta)`` (tree) or
  ``(p-1) alpha + n/beta`` (pipelined ring); job-wide bytes per level; the bucket plan; keep and top-k
  counts; the alpha-beta fit.
- `prunex.perfmodel.formulas`: a cluster's links per level on top of it: flat groups spanning nodes
  run at the inter-node link's pace; one latency term per bucket; the alpha-beta emulation.
- `prunex.perfmodel.workload`: the collectives, samples and memory-bound work of one iteration of
  hsadmm, flat_admm, ddp, topk and pactrain, from the model's layer shapes and the kept groups (keep
  rates, or a run's masks.parquet); the cost split into compute, intra/inter/flat AllReduce,
  Broadcast, AllGather, mask sync and compress/decompress; time per epoch under strong scaling.
- `prunex.perfmodel.calibrate`: alpha and beta per level from timings (a least-squares fit, the fit
  table of ``prunex.bench.collectives``, or a loopback sweep), compute seconds per sample from a run's
  steps.parquet, and cluster files.
- `prunex.perfmodel.validate`: predicted vs measured comm_s of logged runs (csv + png).
- `prunex.perfmodel.measured`: the cluster file of a measured cluster (``cluster_from_sweep``): links from a
  collective sweep, compute per sample per method from runs less the method's own work (which needs
  `validate`'s workloads of a run), the device measured here or taken from another cluster file.
- `prunex.perfmodel.iterations`: predicted vs measured iteration time (compute + overhead + exposed
  communication) of logged runs, compute per sample from one-node runs of the same method (csv).
- `prunex.perfmodel.project`: Fig. 9 on a described cluster, beside the paper's 6.75x / 5.81x / 3.71x;
  ``--out RESULTS/perfmodel`` puts the table where `analysis.fig9a_scaling_speedup` (model curves) and
  `analysis.report` (projected claims) read it.

Cluster files (``clusters/<name>.json``; ``--cluster NAME`` or ``--cluster PATH``). Every number may be
given plain or as ``{"value": x, "status": "datasheet|measured|estimate|assumption", "source": "..."}``;
the status and source are printed with each projection::

    {
      "name": "mycluster",
      "description": "free text",
      "gpus_per_node": 4,                       # P
      "intra": {                                # intra-node link (e.g. NVLink)
        "alpha_s": 3.4e-6,                      # latency per ring step, seconds
        "beta_bytes_per_s": 1.3e11              # bus bandwidth, or instead:
        # "nominal_bytes_per_s": 1.5e11, "efficiency": 0.87, "rails": 1   (beta = product)
      },
      "inter": {"alpha_s": 1.4e-5, "nominal_bytes_per_s": 1.25e10, "efficiency": 0.8, "rails": 1},
      # optional in "inter": "nics_per_node": N (default 1), the NICs its beta adds up; one process drives
      # one, so the leaders get beta / N and the sharded exchange's P groups beta / max(P, N) each
      "broadcast_algo": "ring",                 # "ring" (NCCL) or "tree" (gloo)
      # optional, same form as intra/inter: "flat" (flat groups spanning nodes), "intra_broadcast",
      # "inter_broadcast" (separate broadcast fits; `cluster-from-sweep` writes all three)
      "device": {"memory_bytes_per_s": 9e11, "memory_efficiency": 0.8, "kernel_launch_s": 5e-6},
      "compute_s_per_sample": {"resnet152": 2.6e-3},   # forward + backward + step, per training sample
      # optional, per model and method (`cluster-from-sweep` writes it from each method's runs; a projection of
      # a method takes its own, else the model's above): {"resnet152": {"ddp": 2.6e-3, "hsadmm": 2.7e-3}}
      "compute_s_per_sample_by_method": {},
      "datasets": {"cifar10": 50000},           # training samples (cifar10 and digits are built in)
      "notes": ["free-text assumptions, printed with the projection"]
    }
"""

from __future__ import annotations

from prunex.comm.cost import collective_time, ring_bytes
from prunex.perfmodel.calibrate import (
    CalibrationError,
    Cluster,
    LinkFit,
    compute_per_sample,
    fit_link,
    load_cluster,
    measure_loopback,
    network_from_fit,
)
from prunex.perfmodel.formulas import (
    Collective,
    Link,
    Network,
    allgather_time,
    allreduce_time,
    broadcast_time,
    time_of,
)
from prunex.perfmodel.iterations import validate_iterations
from prunex.perfmodel.project import PAPER_SPEEDUP, project
from prunex.perfmodel.validate import validate
from prunex.perfmodel.workload import (
    Device,
    IterationCost,
    ModelSpec,
    Options,
    Workload,
    epoch_cost,
    iteration_cost,
    method_workload,
    model_spec,
)

__all__ = [
    "PAPER_SPEEDUP",
    "CalibrationError",
    "Cluster",
    "Collective",
    "Device",
    "IterationCost",
    "Link",
    "LinkFit",
    "ModelSpec",
    "Network",
    "Options",
    "Workload",
    "allgather_time",
    "allreduce_time",
    "broadcast_time",
    "collective_time",
    "compute_per_sample",
    "epoch_cost",
    "fit_link",
    "iteration_cost",
    "load_cluster",
    "measure_loopback",
    "method_workload",
    "model_spec",
    "network_from_fit",
    "project",
    "ring_bytes",
    "time_of",
    "validate",
    "validate_iterations",
]
