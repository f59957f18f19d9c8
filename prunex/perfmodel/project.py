"""Strong-scaling projection of Fig. 9 (paper sec. 5.4) on a described cluster.

Strong scaling: the dataset and the per-GPU batch are fixed, so N GPUs give each rank
``floor(D / N)`` samples in ``ceil(floor(D / N) / b)`` steps per epoch. Time per epoch comes from
`prunex.perfmodel.workload.epoch_cost`; speedup(N) = T(N0) / T(N) and efficiency = speedup / (N / N0)
with N0 the smallest count (8 GPUs = 2 Puhti nodes in the paper). N GPUs are ``N / g`` nodes of ``g``
GPUs (one node of N GPUs below g). The paper's numbers printed beside the projection are
`prunex.paper`'s (the library does not import `analysis.claims`, which reads them from there too).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from prunex.paper import FIG9_BASE_GPUS, FIG9_GPUS, FIG9_SPEEDUP
from prunex.perfmodel.calibrate import CalibrationError, Cluster
from prunex.perfmodel.workload import COMM_COLUMNS, Device, Options, epoch_cost, kept_from_keep, model_spec

# Paper sec. 5.4 / Fig. 9: speedup on 64 GPUs relative to 8 (ResNet-152, CIFAR-10, batch 128 per GPU)
PAPER_SPEEDUP, PAPER_BASE_GPUS, PAPER_GPUS = FIG9_SPEEDUP, FIG9_BASE_GPUS, FIG9_GPUS
PROJECTION_COLUMNS = [
    "cluster",
    "dataset",
    "model",
    "method",
    "gpus",
    "nodes",
    "procs_per_node",
    "shard",
    "steps_per_epoch",
    "epoch_s",
    "compute_s",
    "compress_s",
    "comm_s",
    "hidden_s",
    *COMM_COLUMNS,
    "inter_bytes",
    "intra_bytes",
    "iteration_s",
    "iteration_comm_s",
    "speedup",
    "ideal_speedup",
    "efficiency_pct",
    "paper_speedup",
]


def gpu_series(base: Sequence[int] = (8, 16, 32, 64), extend_to: int | None = 4096) -> list[int]:
    """The base counts, then doubling up to ``extend_to``. ValueError for an empty base or a count below 1 (0 would
    double for ever)."""
    if not base or min(base) < 1:
        raise ValueError(f"GPU counts must be >= 1, got {','.join(map(str, base)) or 'none'}")
    out = sorted(set(base))
    if extend_to:
        n = out[-1]
        while n * 2 <= extend_to:
            n *= 2
            out.append(n)
    return out


def layout(gpus: int, gpus_per_node: int) -> tuple[int, int]:
    """(nodes, procs per node) of ``gpus`` GPUs on nodes of ``gpus_per_node``."""
    if gpus <= gpus_per_node:
        return 1, gpus
    if gpus % gpus_per_node:
        raise ValueError(f"{gpus} GPUs do not fill nodes of {gpus_per_node}")
    return gpus // gpus_per_node, gpus_per_node


def project(
    cluster: Cluster,
    model: str = "resnet152",
    dataset: str = "cifar10",
    methods: Sequence[str] = ("hsadmm", "ddp", "topk"),
    gpus: Sequence[int] = (8, 16, 32, 64, 128),
    opts: Options | None = None,
    compute_s_per_sample: float | None = None,
):
    """The projected strong-scaling table (pandas) of ``methods`` over ``gpus``. Compute per sample:
    ``compute_s_per_sample`` for every method if given, else each method's own from the cluster file
    (`Cluster.compute_for`: measured on its runs where the file has them)."""
    import pandas as pd

    opts = opts or Options()
    if dataset not in cluster.dataset_sizes:
        raise CalibrationError(f"unknown dataset size of {dataset!r}")
    size = cluster.dataset_sizes[dataset]
    spec = model_spec(model)
    kept = kept_from_keep(spec, opts.filter_keep, opts.channel_keep, opts.layers)
    rows = []
    for method in methods:
        c = compute_s_per_sample if compute_s_per_sample is not None else cluster.compute_for(model, method)
        if c is None:
            raise CalibrationError(
                f"{cluster.name}: no compute_s_per_sample for {model!r} "
                f"(have: {', '.join(cluster.compute_s_per_sample) or 'none'}); give one"
            )
        device = Device(c, cluster.mem_bw, cluster.launch_s)
        base_t = None
        base_n = min(gpus)
        for n in sorted(gpus):
            if n > size:
                continue
            m, p = layout(n, cluster.gpus_per_node)
            e = epoch_cost(method, spec, m, p, cluster.network, device, opts, size, kept)
            if base_t is None:
                base_t = e["epoch_s"]
            speedup = base_t / e["epoch_s"]
            rows.append(
                {
                    **e,
                    "cluster": cluster.name,
                    "dataset": dataset,
                    "model": model,
                    "method": method,
                    "speedup": speedup,
                    "ideal_speedup": n / base_n,
                    "efficiency_pct": 100.0 * speedup / (n / base_n),
                    "paper_speedup": PAPER_SPEEDUP.get(method, math.nan)
                    if (base_n, n) == (PAPER_BASE_GPUS, PAPER_GPUS)
                    else math.nan,
                }
            )
    return pd.DataFrame(rows)[PROJECTION_COLUMNS]


def with_overrides(cluster: Cluster, inter_efficiency_scale: float | None = None) -> Cluster:
    """The cluster with its inter-node beta scaled (for sensitivity studies); None: as it is. A scale that is not a
    positive finite number is refused (0 was taken as no scaling, 2026-12-08)."""
    if inter_efficiency_scale is None:
        return cluster
    if not (0.0 < inter_efficiency_scale < math.inf):
        raise ValueError(f"--inter-beta-scale must be positive finite, got {inter_efficiency_scale!r}")
    net = cluster.network
    inter = replace(net.inter, beta=net.inter.beta * inter_efficiency_scale)
    return replace(cluster, network=replace(net, inter=inter))


def format_projection(df, cluster: Cluster) -> str:
    """Speedup table beside the paper's Fig. 9 numbers."""
    lines = [
        f"strong scaling on {cluster.name} ({df['model'].iloc[0]}), relative to {int(df['gpus'].min())} GPUs; "
        "seconds per epoch (comm: all communication, exposed: not hidden behind the backward pass)",
        f"{'method':10} {'GPUs':>5} {'epoch s':>9} {'comm s':>8} {'exposed':>8} {'compress s':>10} "
        f"{'speedup':>8} {'eff %':>6} {'paper':>6}",
    ]
    for r in df.itertuples():
        paper = f"{r.paper_speedup:6.2f}" if math.isfinite(r.paper_speedup) else ""
        lines.append(
            f"{r.method:10} {r.gpus:5d} {r.epoch_s:9.3f} {r.comm_s:8.3f} {r.comm_s - r.hidden_s:8.3f} "
            f"{r.compress_s:10.4f} {r.speedup:8.2f} {r.efficiency_pct:6.1f} {paper:>6}"
        )
    at64 = df[(df["gpus"] == PAPER_GPUS)]
    if len(at64) and int(df["gpus"].min()) == PAPER_BASE_GPUS:
        lines.append(
            "at 64 GPUs, model vs paper: "
            + ", ".join(
                f"{r.method} {r.speedup:.2f}x vs {PAPER_SPEEDUP[r.method]:.2f}x"
                for r in at64.itertuples()
                if r.method in PAPER_SPEEDUP
            )
        )
    return "\n".join(lines)


def plot_projection(df, path: str | Path, title: str = "") -> None:
    """Fig. 9 style: (a) speedup, (b) parallel efficiency vs GPUs (log2 axis), paper points at 64 GPUs."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 4.2))
    ax1, ax2 = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    base = int(df["gpus"].min())
    for method, g in df.groupby("method", sort=False):
        line = ax1.plot(g["gpus"], g["speedup"], marker="o", label=f"{method} (model)")[0]
        ax2.plot(g["gpus"], g["efficiency_pct"], marker="o", color=line.get_color(), label=f"{method} (model)")
        if method in PAPER_SPEEDUP and base == PAPER_BASE_GPUS:
            s = PAPER_SPEEDUP[method]
            ax1.scatter(
                [PAPER_GPUS],
                [s],
                marker="*",
                s=140,
                color=line.get_color(),
                edgecolors="k",
                zorder=4,
                label=f"{method} (paper)",
            )
            ax2.scatter(
                [PAPER_GPUS],
                [100 * s / (PAPER_GPUS / base)],
                marker="*",
                s=140,
                color=line.get_color(),
                edgecolors="k",
                zorder=4,
            )
    gp = sorted(df["gpus"].unique())
    ax1.plot(gp, [g / base for g in gp], color="0.5", ls="--", lw=1, label="ideal")
    for ax in (ax1, ax2):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("GPUs")
        ax.grid(True, which="both", alpha=0.3)
    ax1.set_yscale("log", base=2)
    ax1.set_ylabel(f"speedup vs {base} GPUs")
    ax2.set_ylabel("parallel efficiency (%)")
    ax2.set_ylim(0, 105)
    ax1.legend(fontsize=7)
    ax1.set_title("(a) speedup")
    ax2.set_title("(b) efficiency")
    if title:
        fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=150)
