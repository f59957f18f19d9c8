"""Predict the communication seconds per iteration of logged runs and compare with what they measured.

A run is any directory with ``config.json``, ``steps.parquet`` and ``comm.parquet``. For each, the
method's per-iteration collectives are rebuilt from its config and model (H-SADMM: the compact sizes
of each iteration from ``masks.parquet``'s global rows, and whether the mask was still dynamic from
its node rows), priced with the run's network, and averaged over the same iterations as the
measurement (all but the first, which carries DDP's constructor broadcast and lazy allocations,
when there are at least two).

The network: ``--collectives`` (a sweep of ``prunex.bench.collectives``, its fit table, or the fit
of :func:`prunex.perfmodel.calibrate.measure_loopback`) and/or, for runs with link model
``alpha-beta``, the modelled inter-node link of the run's config.json (``link.alpha_s``,
``link.bandwidth_gbit``) on top of a loopback intra level (measured, or the assumed default).
Whether the emulation actually delayed a run's crossing collectives is read off its comm.parquet:
a delayed call lasts at least the modelled delay (`AlphaBetaLink` sleeps it), so a (level, op)
whose calls are mostly shorter was not delayed (DDP's hook traffic bypasses the delay) and is
predicted on the loopback alone.

Measured: ``comm_s`` of steps.parquet (mean over ranks), the target. Also reported, from
comm.parquet: the "wait-free" comm seconds per iteration, the sum over collective calls of the
time of the call's *last-arriving* member (the smallest seconds among the members of a group; for
concurrent intra-node groups the slowest group). A member that arrives early waits for the others
inside the collective, so the mean over ranks adds load imbalance (time spent waiting for slower
ranks' compute) to the transfer time, which a link model does not predict; the last arriver's time
is closest to the transfer itself. (DDP's hook records from just after launch, so its last
arriver can log less than the transfer.) Its median over iterations is reported too: where many
processes share few cores, a member can be descheduled in the middle of a collective, which gives
the per-iteration last-arriver times a heavy tail (single iterations several times the median) that
the mean carries and a link model does not predict.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from functools import cached_property
from pathlib import Path
from typing import Any

from prunex.comm.cost import collective_time, crosses, group_size
from prunex.comm.waitfree import last_arriver_comm
from prunex.methods.registry import method_info
from prunex.perfmodel.calibrate import (
    CalibrationError,
    compute_per_sample,
    local_epochs,
    network_from_fit,
    shard_of,
    step_samples,
)
from prunex.perfmodel.formulas import Link, Network, time_of
from prunex.perfmodel.workload import (
    Device,
    IterationCost,
    ModelSpec,
    Options,
    Workload,
    iteration_cost,
    kept_from_keep,
    method_workload,
    model_spec,
)
from prunex.training.config import RunConfig
from prunex.training.log import COMM_COLUMNS

# Assumed loopback level (gloo over 127.0.0.1 between the processes of one machine) when neither a sweep nor
# --loopback-* is given: what `python -m prunex.perfmodel loopback --procs 4` measured on the 2-core development
# VM at load 4.2 (allreduce: 5.5 ms per call = 0.91 ms per ring step, 0.60 GB/s). Machine- and load-specific:
# measure yours (--measure-loopback, or --collectives with a sweep or a `loopback` fit).
DEFAULT_LOOPBACK = Link(alpha_s=0.91e-3, beta=0.60e9)
TABLE_COLUMNS = [
    "run_id",
    "method",
    "model",
    "nodes",
    "procs_per_node",
    "link_model",
    "network",
    "undelayed",
    "iterations",
    "measured_comm_s",
    "predicted_comm_s",
    "err_pct",
    "measured_barrier_s",
    "measured_transfer_s",
    "predicted_transfer_s",
    "err_transfer_pct",
    "waitfree_comm_s",
    "err_waitfree_pct",
    "waitfree_median_comm_s",
    "err_waitfree_median_pct",
    "wait_s",
    "measured_inter_bytes",
    "predicted_inter_bytes",
    "bytes_err_pct",
    "compute_s_per_sample",
    "within",
    "within_waitfree",
    "within_waitfree_median",
]


def find_runs(root: str | Path) -> list[Path]:
    """Every directory under ``root`` (itself included) with config.json, steps.parquet and comm.parquet."""
    root = Path(root)
    found = {p.parent for p in root.rglob("config.json")}
    return sorted(d for d in found if (d / "steps.parquet").exists() and (d / "comm.parquet").exists())


class RunData:
    """The tables of one run that validation reads."""

    def __init__(self, path: str | Path) -> None:
        import pandas as pd

        self.path = Path(path)
        self.config: dict[str, Any] = json.loads((self.path / "config.json").read_text())
        self.steps = pd.read_parquet(self.path / "steps.parquet")
        masks = self.path / "masks.parquet"
        self.masks = pd.read_parquet(masks) if masks.exists() else None

    @cached_property
    def comm(self):
        """comm.parquet (read on first use: one row per call and rank, the largest table); empty where a
        run without communication has none."""
        import pandas as pd

        comm = self.path / "comm.parquet"
        return pd.read_parquet(comm) if comm.exists() else pd.DataFrame(columns=COMM_COLUMNS)

    @property
    def nodes(self) -> int:
        return int(self.config["nodes"])

    @property
    def procs(self) -> int:
        return int(self.config["procs_per_node"])

    @property
    def method(self) -> str:
        return str(self.config["method"])

    @property
    def run_id(self) -> str:
        return str(self.config.get("name") or self.path.name)

    @property
    def link_model(self) -> str:
        """What shaped the inter-node links, as the logs record it (`prunex.training.log.merge_parts`)."""
        if "link_model" in self.steps and len(self.steps):
            return str(self.steps["link_model"].iloc[0])
        return str(self.config.get("link", {}).get("model", "none"))

    def iterations(self) -> list[int]:
        its = sorted(int(i) for i in self.steps["iteration"].unique())
        return its[1:] if len(its) > 1 else its


def options_of(config: dict[str, Any]) -> Options:
    """The perf-model options of a run's config.json (`Options.from_config`). A config written before
    ``admm.average_bn_stats`` existed is of a run that averaged BatchNorm statistics at every consensus."""
    opts = Options.from_config(RunConfig.from_dict(config))
    if "average_bn_stats" not in config.get("admm", {}):
        opts = replace(opts, average_bn_stats=True)
    return opts


def run_workloads(run: RunData, spec: ModelSpec, opts: Options) -> dict[int, Workload]:
    """The predicted workload of each measured iteration of ``run``: an SGD step of its own samples (an
    epoch's last batch is smaller, `calibrate.step_samples`), an outer ADMM iteration of its own local
    epochs (one in masked retraining, `calibrate.local_epochs`)."""
    cfg = run.config
    world = run.nodes * run.procs
    shard = shard_of(cfg)
    out = {}
    default_kept = kept_from_keep(spec, opts.filter_keep, opts.channel_keep, opts.layers)
    masks = run.masks
    outer = method_info(run.method).outer_iterations
    epochs = local_epochs(cfg, run.steps) if outer else {}
    for k in run.iterations():
        if not outer:
            out[k] = method_workload(run.method, spec, replace(opts, batch_size=step_samples(cfg, k)), world, shard)
            continue
        opts_k = replace(opts, local_epochs=epochs[k])
        if run.method != "hsadmm":
            out[k] = method_workload(run.method, spec, opts_k, world, shard)
            continue
        kept, dynamic = default_kept, float(k < int(cfg["admm"]["freeze_iteration"]))
        if masks is not None and "kind" in masks.columns:
            g = masks[(masks["kind"] == "global") & (masks["iteration"] == k)]
            if len(g):
                kept = {str(r.layer): (int(r.kept_out), int(r.kept_in)) for r in g.itertuples()}
            dynamic = float(((masks["kind"] == "node") & (masks["iteration"] == k)).any())
        out[k] = method_workload("hsadmm", spec, opts_k, world, shard, kept, dynamic)
    return out


def detect_undelayed(run: RunData, inter: Link, tolerance: float = 0.95) -> frozenset[tuple[str, str]]:
    """(level, op) pairs of crossing collectives whose logged seconds are mostly (over 5% of calls)
    shorter than the emulated delay, i.e. which the alpha-beta link model did not delay."""
    out = set()
    comm = run.comm
    for (level, op), g in comm.groupby(["level", "op"]):
        if not crosses(str(level), run.nodes):
            continue
        p = group_size(str(level), run.nodes, run.procs)
        delays = g["bytes"].map(lambda n, op=op, p=p: collective_time(str(op), float(n), p, inter, "ring"))
        if ((g["seconds"] >= tolerance * delays).mean()) < 0.95:
            out.add((str(level), str(op)))
    return frozenset(out)


def run_network(run: RunData, fit=None, loopback: Link | None = None) -> tuple[Network, str]:
    """The network a run communicated on, and a short description of where it comes from."""
    link = run.config.get("link", {})
    if link.get("model") == "alpha-beta":
        inter = Link(float(link["alpha_s"]), float(link["bandwidth_gbit"]) * 1e9 / 8)
        undelayed = detect_undelayed(run, inter)
        if fit is not None and loopback is None:
            net = network_from_fit(fit, emulated=True, inter=inter, undelayed=undelayed)
            return net, "loopback: sweep fit; inter: config alpha-beta"
        lb = loopback or DEFAULT_LOOPBACK
        src = "loopback: given" if loopback is not None else "loopback: assumed default"
        return Network(lb, inter, broadcast_algo="tree", emulated=True, undelayed=undelayed), f"{src}; inter: config"
    if fit is None:
        if run.nodes == 1 and loopback is not None:
            return Network(loopback, loopback, broadcast_algo="tree"), "loopback: given"
        raise CalibrationError(f"{run.run_id}: link model {link.get('model')!r} needs --collectives (a sweep)")
    stat = f" ({fit['time_stat'].iloc[0]})" if "time_stat" in fit.columns and len(fit) else ""
    return network_from_fit(fit, intra_unused=run.procs == 1), f"sweep fit{stat}"


def run_columns(run: RunData, network_desc: str) -> dict[str, Any]:
    """The columns that name a run and its network in every validation table."""
    return {
        "run_id": run.run_id,
        "method": run.method,
        "model": run.config["model"],
        "nodes": run.nodes,
        "procs_per_node": run.procs,
        "link_model": run.link_model,
        "network": network_desc,
    }


def _pct(pred: float, meas: float) -> float:
    return 100.0 * (pred / meas - 1.0) if meas > 0 else math.nan


def run_costs(
    run: RunData, net: Network, device: Device | None = None, *, local_work: bool = True
) -> dict[int, IterationCost]:
    """The predicted :class:`~prunex.perfmodel.workload.IterationCost` of each measured iteration of
    ``run`` (:func:`run_workloads` priced by `workload.iteration_cost` on ``net``). ``device``: compute
    seconds per sample, memory bandwidth and launch latency (default: no compute, so DDP hides nothing).
    ``local_work=False`` leaves the memory-bound vector work (ADMM updates, proximal term) out of the
    compute, for a compute per sample measured on a run of the same method, which contains it."""
    opts = options_of(run.config)
    works = run_workloads(run, model_spec(run.config["model"]), opts)
    device = device or Device(compute_s_per_sample=0.0)
    return {
        k: iteration_cost(w if local_work else replace(w, vector_bytes=0.0), run.nodes, run.procs, net, device, opts)
        for k, w in works.items()
    }


def predict_run(run: RunData, net: Network, network_desc: str = "", tolerance: float = 0.2) -> dict[str, Any]:
    """One table row: predicted vs measured communication seconds (and bytes) per iteration."""
    costs = run_costs(run, net)
    its = list(costs)
    steps = run.steps.set_index("iteration").loc[its]
    measured = float(steps["comm_s"].mean())
    predicted = sum(c.comm_s for c in costs.values()) / len(costs)
    barrier = run.comm[run.comm["op"] == "barrier"]
    barrier_s = (
        float(
            barrier.groupby(["iteration", "rank"])["seconds"]
            .sum()
            .groupby("iteration")
            .mean()
            .reindex(its, fill_value=0.0)
            .mean()
        )
        if len(barrier)
        else 0.0
    )
    pred_transfer = predicted - sum(c.barrier_s for c in costs.values()) / len(costs)
    last = last_arriver_comm(run.comm)
    waitfree = float(last.reindex(its, fill_value=0.0).mean()) if len(run.comm) else math.nan
    waitfree_median = float(last.reindex(its, fill_value=0.0).median()) if len(run.comm) else math.nan
    meas_bytes = float(steps["inter_bytes"].mean())
    pred_bytes = sum(c.inter_bytes for c in costs.values()) / len(costs)
    try:
        per_sample = compute_per_sample(run.path)
    except (CalibrationError, KeyError, ZeroDivisionError):
        per_sample = math.nan
    err = _pct(predicted, measured)
    return {
        **run_columns(run, network_desc),
        "undelayed": ",".join(f"{a}/{b}" for a, b in sorted(net.undelayed)) or "-",
        "iterations": len(its),
        "measured_comm_s": measured,
        "predicted_comm_s": predicted,
        "err_pct": err,
        "measured_barrier_s": barrier_s,
        "measured_transfer_s": measured - barrier_s,
        "predicted_transfer_s": pred_transfer,
        "err_transfer_pct": _pct(pred_transfer, measured - barrier_s),
        "waitfree_comm_s": waitfree,
        "err_waitfree_pct": _pct(predicted, waitfree),
        "waitfree_median_comm_s": waitfree_median,
        "err_waitfree_median_pct": _pct(predicted, waitfree_median),
        "wait_s": measured - waitfree if math.isfinite(waitfree) else math.nan,
        "measured_inter_bytes": meas_bytes,
        "predicted_inter_bytes": pred_bytes,
        "bytes_err_pct": _pct(pred_bytes, meas_bytes) if meas_bytes > 0 else (0.0 if pred_bytes == 0 else math.nan),
        "compute_s_per_sample": per_sample,
        "within": bool(abs(err) <= 100 * tolerance),
        "within_waitfree": bool(abs(_pct(predicted, waitfree)) <= 100 * tolerance),
        "within_waitfree_median": bool(abs(_pct(predicted, waitfree_median)) <= 100 * tolerance),
    }


def op_breakdown(run: RunData, net: Network):
    """Per (level, op) of one run: predicted seconds per iteration (critical path), the measured mean
    over the participating ranks, and the last arrivers' seconds (pandas)."""
    import pandas as pd

    spec = model_spec(run.config["model"])
    works = run_workloads(run, spec, options_of(run.config))
    its = list(works)
    pred: dict[tuple[str, str], float] = {}
    for w in works.values():
        for c in w.collectives:
            key = (c.level, c.op)
            pred[key] = pred.get(key, 0.0) + time_of(c, run.nodes, run.procs, net) / len(its)
    comm = run.comm[run.comm["iteration"].isin(its)]
    c = comm[["iteration", "rank", "node", "level", "op", "seconds"]].copy()
    c["k"] = c.groupby(["iteration", "rank", "level", "op"]).cumcount()
    c["group"] = c["node"].where(c["level"] == "intra", -1)
    last = c.groupby(["iteration", "level", "op", "k", "group"])["seconds"].min().groupby(
        ["iteration", "level", "op", "k"]
    ).max().groupby(["level", "op"]).sum() / len(its)
    member = c.groupby(["level", "op"]).agg(total=("seconds", "sum"), ranks=("rank", "nunique"))
    rows = []
    for key in sorted(set(pred) | set(member.index)):
        meas = float(member.loc[key, "total"] / (member.loc[key, "ranks"] * len(its))) if key in member.index else 0.0
        p = pred.get(key, 0.0)
        rows.append(
            {
                "run_id": run.run_id,
                "level": key[0],
                "op": key[1],
                "predicted_s": p,
                "measured_s": meas,
                "err_pct": _pct(p, meas),
                "last_arriver_s": float(last.get(key, 0.0)),
                "err_last_arriver_pct": _pct(p, float(last.get(key, 0.0))),
            }
        )
    return pd.DataFrame(rows)


def validate_by_op(root: str | Path, fit=None, loopback: Link | None = None):
    """:func:`op_breakdown` of every run under ``root``, concatenated."""
    import pandas as pd

    frames = []
    for path in find_runs(root):
        run = RunData(path)
        frames.append(op_breakdown(run, run_network(run, fit, loopback)[0]))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def validate(root: str | Path, fit=None, loopback: Link | None = None, tolerance: float = 0.2):
    """The validation table (pandas) of every run under ``root``; raises when there is none."""
    import pandas as pd

    runs = find_runs(root)
    if not runs:
        raise CalibrationError(f"no runs (config.json + steps.parquet + comm.parquet) under {root}")
    rows = []
    for path in runs:
        run = RunData(path)
        net, desc = run_network(run, fit, loopback)
        rows.append(predict_run(run, net, desc, tolerance))
    return pd.DataFrame(rows, columns=TABLE_COLUMNS)


def format_table(df) -> str:
    """The table as aligned text (times in ms, bytes in MB per iteration)."""
    head = (
        f"{'run':40} {'M x P':5} {'measured':>9} {'predicted':>9} {'err':>7} | {'excl. barrier':>13} "
        f"{'predicted':>9} {'err':>7} | {'wait-free':>9} {'err':>7} | {'median':>8} {'err':>7} | "
        f"{'inter MB meas/pred':>19}"
    )
    lines = [head, "-" * len(head)]
    for r in df.itertuples():
        lines.append(
            f"{r.run_id[:40]:40} {r.nodes}x{r.procs_per_node:<3} {1e3 * r.measured_comm_s:8.1f}m "
            f"{1e3 * r.predicted_comm_s:8.1f}m {r.err_pct:+6.1f}% | {1e3 * r.measured_transfer_s:12.1f}m "
            f"{1e3 * r.predicted_transfer_s:8.1f}m {r.err_transfer_pct:+6.1f}% | {1e3 * r.waitfree_comm_s:8.1f}m "
            f"{r.err_waitfree_pct:+6.1f}% | {1e3 * r.waitfree_median_comm_s:7.1f}m "
            f"{r.err_waitfree_median_pct:+6.1f}% | "
            f"{r.measured_inter_bytes / 1e6:9.3f}/{r.predicted_inter_bytes / 1e6:<9.3f}"
        )
    undelayed = [f"{r.run_id}: {r.undelayed}" for r in df.itertuples() if r.undelayed != "-"]
    if undelayed:
        lines.append("not delayed by the alpha-beta emulation (predicted on loopback alone): " + "; ".join(undelayed))
    n_ok = int(df["within"].sum())
    lines.append(
        f"{n_ok} of {len(df)} predictions within the tolerance of the measured mean comm_s; "
        f"{int(df['within_waitfree'].sum())} of {len(df)} within it of the wait-free comm (mean over "
        f"iterations), {int(df['within_waitfree_median'].sum())} of {len(df)} of its median"
    )
    lines.append(
        "(m = ms per iteration; excl. barrier: comm_s minus the time ranks wait in the ADMM barrier; "
        "wait-free: the last arrivers' time per collective, from comm.parquet, mean and median over "
        "iterations)"
    )
    return "\n".join(lines)


def format_breakdown(df) -> str:
    """The per-(level, op) table as aligned text (ms per iteration)."""
    lines = [f"{'run':40} {'level':5} {'op':9} {'predicted':>9} {'measured':>9} {'err':>8} {'last arr.':>9} {'err':>8}"]
    for r in df.itertuples():
        lines.append(
            f"{r.run_id[:40]:40} {r.level:5} {r.op:9} {1e3 * r.predicted_s:8.2f}m {1e3 * r.measured_s:8.2f}m "
            f"{r.err_pct:+7.1f}% {1e3 * r.last_arriver_s:8.2f}m {r.err_last_arriver_pct:+7.1f}%"
        )
    lines.append("(per iteration; measured: mean over the ranks taking part; last arr.: the last-arriving members)")
    return "\n".join(lines)


def plot_validation(df, path: str | Path, tolerance: float = 0.2) -> None:
    """Predicted vs measured communication seconds per iteration, with the tolerance band."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 5.2))
    ax = fig.add_subplot(1, 1, 1)
    vals = [
        v
        for v in list(df["measured_comm_s"])
        + list(df["predicted_comm_s"])
        + list(df["waitfree_comm_s"])
        + list(df["waitfree_median_comm_s"])
        if v > 0 and math.isfinite(v)
    ]
    lo, hi = (min(vals) / 2, max(vals) * 2) if vals else (1e-4, 1.0)
    xs = [lo, hi]
    ax.plot(xs, xs, color="0.3", lw=1, label="prediction = measurement")
    ax.fill_between(
        xs,
        [x * (1 - tolerance) for x in xs],
        [x * (1 + tolerance) for x in xs],
        color="0.85",
        label=f"within {100 * tolerance:.0f}%",
    )
    markers = {"ddp": "o", "hsadmm": "s", "topk": "^", "flat_admm": "D", "pactrain": "v"}
    for r in df.itertuples():
        m = markers.get(r.method, "o")
        ax.scatter(
            [r.measured_comm_s], [r.predicted_comm_s], marker=m, s=40, zorder=3, label=f"{r.run_id} (mean over ranks)"
        )
        if math.isfinite(r.waitfree_comm_s) and r.waitfree_comm_s > 0:
            ax.scatter(
                [r.waitfree_comm_s], [r.predicted_comm_s], marker=m, s=40, facecolors="none", edgecolors="k", zorder=3
            )
        if math.isfinite(r.waitfree_median_comm_s) and r.waitfree_median_comm_s > 0:
            ax.scatter([r.waitfree_median_comm_s], [r.predicted_comm_s], marker="x", s=30, color="k", zorder=3)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("measured s / iteration\n(filled: mean over ranks; hollow: last arrivers' mean; x: their median)")
    ax.set_ylabel("predicted s / iteration")
    ax.set_title("prunex.perfmodel validation")
    ax.legend(fontsize=6, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=150)
