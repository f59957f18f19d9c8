"""Fig. 6b: total inter-node communication volume.

Total inter-node communication volume per model and method.

    python -m analysis.fig6b_volume_total --results results --out figures

Reads `volume/*/steps.parquet` (and `wire.parquet` where the mini cluster wrote it). The estimate
is the sum over iterations of steps.inter_bytes (itself the sum over ranks of the bytes each
collective put on inter-node links, prunex/comm/volume.py). Where wire.parquet exists, the
kernel-counted bytes sent by the nodes' interfaces (sum of tx_bytes) are drawn as black diamonds.
"""

from __future__ import annotations

import sys

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from analysis import style
from analysis.common import Experiment, cli, figure_spec, runs_with

COLUMNS = [
    "model",
    "method",
    "source",
    "inter_gb",
    "reduction_vs_ddp_pct",
    "n_runs",
    "run_id",
    "run_ids",
    "partial",
]
CAPTION = (
    "Total = sum over iterations and ranks of the estimated bytes on inter-node links "
    "(1 GB = 1e9 bytes); percentages: reduction vs DDP for the same model."
)

ESTIMATE, WIRE = "estimate", "wire (tx counters)"


def compute(exp: Experiment) -> tuple[pd.DataFrame, list[str]]:
    per_run, notes = [], []
    for run, steps in runs_with(exp, "steps", notes):
        per_run.append(
            {
                "model": run.model,
                "method": run.method,
                "source": ESTIMATE,
                "run_id": run.run_id,
                "inter_gb": float(steps["inter_bytes"].sum()) / 1e9,
                "partial": not run.done,
            }
        )
        wire = run.table("wire")
        if wire is not None and len(wire):
            per_run.append(
                {
                    "model": run.model,
                    "method": run.method,
                    "source": WIRE,
                    "run_id": run.run_id,
                    "inter_gb": float(wire["tx_bytes"].sum()) / 1e9,
                    "partial": not run.done,
                }
            )
        if not run.done:
            notes.append(f"{run.run_id} is partial: its total covers only its finished iterations")
    if not per_run:
        return pd.DataFrame(columns=SPEC.columns), notes
    raw = pd.DataFrame(per_run)
    per_key = {  # output column: (input column, aggregation) over the runs of one (model, method, source)
        "inter_gb": ("inter_gb", "mean"),
        "n_runs": ("run_id", "size"),
        "run_id": ("run_id", "first"),
        "run_ids": ("run_id", " ".join),
        "partial": ("partial", "any"),
    }
    agg = raw.groupby(["model", "method", "source"], sort=False).agg(**per_key).reset_index()
    if (agg["n_runs"] > 1).any():
        notes.append("several runs per model and method: bars show their mean")
    dense = agg[(agg["method"] == "ddp") & (agg["source"] == ESTIMATE)].set_index("model")["inter_gb"]
    agg["reduction_vs_ddp_pct"] = [
        100.0 * (1.0 - gb / dense[m])
        if m in dense.index and dense[m] > 0 and meth != "ddp" and src == ESTIMATE
        else np.nan
        for m, meth, src, gb in zip(agg["model"], agg["method"], agg["source"], agg["inter_gb"], strict=True)
    ]
    if (agg["inter_gb"] == 0).all():
        notes.append("no inter-node traffic at all: every run is on one node")
    for m in sorted(set(agg["model"]) - set(dense.index)):
        notes.append(f"no DDP run for {m}: no reduction computed")
    order = sorted(
        range(len(agg)),
        key=lambda i: (
            style.model_sort_key(agg["model"].iloc[i]),
            style.method_sort_key(agg["method"].iloc[i]),
            agg["source"].iloc[i],
        ),
    )
    return agg.iloc[order][SPEC.columns], notes


def draw(df: pd.DataFrame, exp: Experiment) -> Figure:
    est = df[df["source"] == ESTIMATE]
    models = list(dict.fromkeys(est["model"]))
    methods = sorted(est["method"].unique(), key=style.method_sort_key)
    fig, ax = plt.subplots(figsize=(max(6.0, 2.2 * len(models) + 2), 4.2), layout="constrained")
    width = 0.8 / len(methods)
    for j, method in enumerate(methods):
        xs, hs, reds, ms = [], [], [], []
        for i, model in enumerate(models):
            row = est[(est["model"] == model) & (est["method"] == method)]
            if row.empty:
                continue
            xs.append(i - 0.4 + width * (j + 0.5))
            hs.append(float(row["inter_gb"].iloc[0]))
            reds.append(float(row["reduction_vs_ddp_pct"].iloc[0]))
            ms.append(model)
        bars = ax.bar(xs, hs, width=width * 0.95, color=style.method_color(method), label=style.method_label(method))
        wire = df[(df["source"] == WIRE) & (df["method"] == method)]
        wire_gb = dict(zip(wire["model"], wire["inter_gb"], strict=True))
        for b, h, r, model in zip(bars, hs, reds, ms, strict=True):
            text = f"{h:.3g}" + (f"\n(-{r:.0f}%)" if r == r else "")
            top = max(h, float(wire_gb.get(model, 0.0)))  # above the wire marker, not on it
            ax.annotate(
                text,
                (b.get_x() + b.get_width() / 2, top),
                xytext=(0, 5),
                textcoords="offset points",
                ha="center",
                va="bottom",
                fontsize=8,
            )
        for _, w in wire.iterrows():
            if w["model"] in models:
                x = models.index(w["model"]) - 0.4 + width * (j + 0.5)
                ax.plot(
                    [x],
                    [w["inter_gb"]],
                    marker="D",
                    color="black",
                    ms=5,
                    ls="none",
                    label="kernel-counted (wire tx)"
                    if "kernel-counted (wire tx)" not in ax.get_legend_handles_labels()[1]
                    else None,
                )
    ax.set_xticks(range(len(models)), [style.model_label(m) for m in models])
    ax.set_ylabel("total inter-node volume (GB)")
    ax.set_xlabel("model")
    ax.set_ylim(0, float(df["inter_gb"].max()) * 1.3 or 1.0)
    ax.legend(fontsize=8, loc="upper left")
    ax.set_title("Fig. 6b: total inter-node communication volume")
    return fig


def summary(df: pd.DataFrame) -> str:
    est = df[df["source"] == ESTIMATE]
    parts = []
    for model, sub in est.groupby("model", sort=False):
        vals = ", ".join(
            f"{style.method_label(m)} {gb:.3g} GB" for m, gb in zip(sub["method"], sub["inter_gb"], strict=True)
        )
        red = sub["reduction_vs_ddp_pct"].dropna()
        parts.append(f"{style.model_label(str(model))}: {vals}" + (f" (-{red.iloc[0]:.1f}%)" if len(red) else ""))
    return "; ".join(parts)


SPEC = figure_spec(globals(), "volume", COLUMNS, CAPTION, ("hsadmm", "ddp"))


if __name__ == "__main__":
    sys.exit(cli(SPEC))
