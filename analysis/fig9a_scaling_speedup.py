"""Fig. 9a: strong-scaling speedup relative to the smallest GPU (process) count of each method.

    python -m analysis.fig9a_scaling_speedup --results results --out figures

Reads `strong_scaling/*/steps.parquet`. Time per epoch = training wall time at the last logged
iteration / epochs of the shard completed by then (both from rank 0), so runs of different
lengths and partial runs compare fairly; the global problem is the same at every count (strong
scaling). Speedup(N) = t(N0) / t(N) with N0 the method's smallest count; efficiency = speedup /
(N / N0). Several runs at one count (seeds) are averaged.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from analysis import style
from analysis.common import Experiment, FigureResult, FigureSpec, cli, facet_axes, render

SCALING_COLUMNS = [
    "model", "method", "gpus", "nodes", "procs_per_node", "n_runs", "run_id", "time_per_epoch_s", "base_gpus",
    "speedup", "ideal_speedup", "efficiency_pct",
]  # fmt: skip


def scaling_table(exp: Experiment) -> tuple[pd.DataFrame, list[str]]:
    rows, notes = [], []
    for run in exp.runs:
        steps = run.table("steps")
        if steps is None or steps.empty:
            notes.append(f"{run.run_id} has no steps yet: left out")
            continue
        last = steps.sort_values("iteration").iloc[-1]
        if not last["epoch"] > 0:
            notes.append(f"{run.run_id}: no completed epoch fraction logged, left out")
            continue
        rows.append({"model": run.model, "method": run.method, "gpus": run.world_size, "nodes": run.nodes,
                     "procs_per_node": run.procs_per_node, "run_id": run.run_id,
                     "time_per_epoch_s": float(last["wall_s"]) / float(last["epoch"])})  # fmt: skip
        if not run.done:
            notes.append(f"{run.run_id} is partial: its time per epoch comes from its finished iterations")
    if not rows:
        return pd.DataFrame(columns=SCALING_COLUMNS), notes
    raw = pd.DataFrame(rows)
    agg = (
        raw.groupby(["model", "method", "gpus"], sort=True)
        .agg(
            nodes=("nodes", "first"),
            procs_per_node=("procs_per_node", "first"),
            n_runs=("run_id", "size"),
            run_id=("run_id", lambda s: " ".join(s)),
            time_per_epoch_s=("time_per_epoch_s", "mean"),
        )  # fmt: skip
        .reset_index()
    )
    base = agg.groupby(["model", "method"])["gpus"].transform("min")
    t0 = agg.groupby(["model", "method"])["time_per_epoch_s"].transform("first")  # sorted by gpus: the base
    agg["base_gpus"] = base
    agg["speedup"] = t0 / agg["time_per_epoch_s"]
    agg["ideal_speedup"] = agg["gpus"] / base
    agg["efficiency_pct"] = 100.0 * agg["speedup"] / agg["ideal_speedup"]
    for (model, method), g in agg.groupby(["model", "method"]):
        if len(g) < 2:
            notes.append(f"{method} on {model} has runs at one count only ({int(g['gpus'].iloc[0])}): no speedup")
    bases = agg.groupby("method")["base_gpus"].first()
    if bases.nunique() > 1:
        notes.append("methods have different smallest counts: " + ", ".join(f"{m} {b}" for m, b in bases.items()))
    agg = agg.iloc[sorted(range(len(agg)), key=lambda i: (style.model_sort_key(agg["model"].iloc[i]),
                                                          style.method_sort_key(agg["method"].iloc[i]),
                                                          agg["gpus"].iloc[i]))]  # fmt: skip
    return agg[SCALING_COLUMNS].reset_index(drop=True), notes


def unit(exp: Experiment) -> str:
    return "GPUs" if exp.runs and all(r.device_type == "cuda" for r in exp.runs) else "processes"


def draw_scaling(df: pd.DataFrame, exp: Experiment, y: str, ylabel: str, ideal: str | None) -> Figure:
    models = sorted(df["model"].unique(), key=style.model_sort_key)
    fig, axes = facet_axes(len(models), width=5.5, height=4.0)
    for ax, model in zip(axes, models, strict=True):
        sub = df[df["model"] == model]
        for method, g in sorted(sub.groupby("method"), key=lambda kv: style.method_sort_key(str(kv[0]))):
            ax.plot(g["gpus"], g[y], marker="o", lw=1.8, color=style.method_color(str(method)),
                    label=style.method_label(str(method)))  # fmt: skip
        if ideal == "speedup":
            g = sub.drop_duplicates("gpus").sort_values("gpus")
            ax.plot(g["gpus"], g["ideal_speedup"], color=style.TARGET_COLOR, ls=":", label="ideal (linear)")
        elif ideal == "efficiency":
            ax.axhline(100, color=style.TARGET_COLOR, ls=":", label="ideal (100%)")
        ticks = sorted(sub["gpus"].unique())
        ax.set_xscale("log", base=2)
        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.minorticks_off()
        ax.set_xlabel(f"{unit(exp)} (M x P)")
        ax.set_ylabel(ylabel)
        ax.set_ylim(bottom=0)
        ax.set_title(style.model_label(model))
        ax.legend(fontsize=8)
    return fig


def _draw(df: pd.DataFrame, exp: Experiment) -> Figure:
    base = int(df["base_gpus"].min())
    fig = draw_scaling(df, exp, "speedup", f"speedup over the smallest count ({base} {unit(exp)}) (x)", "speedup")
    fig.suptitle("Fig. 9a: strong scaling, speedup")
    return fig


def scaling_summary(df: pd.DataFrame, col: str, unit_text: str) -> str:
    parts = []
    for (model, method), g in df.groupby(["model", "method"], sort=False):
        g = g.sort_values("gpus")
        last = g.iloc[-1]
        parts.append(f"{style.method_label(str(method))} ({model}) {last[col]:.3g}{unit_text} at "
                     f"{int(last['gpus'])} vs {int(last['base_gpus'])}")  # fmt: skip
    return "; ".join(parts)


SPEC = FigureSpec(
    name="fig9a_scaling_speedup",
    experiment="strong_scaling",
    title="Fig. 9a: strong scaling speedup",
    columns=SCALING_COLUMNS,
    compute=scaling_table,
    draw=_draw,
    summary=lambda df: "speedup: " + scaling_summary(df, "speedup", "x"),
    caption_extra="Time per epoch = training wall time / epochs completed (rank 0). Speedup relative to each "
    "method's smallest count; the paper's baseline is 8 GPUs (2 nodes), its largest count 64.",
    methods=("hsadmm", "ddp", "topk"),
)


def make(results: str | Path, out: str | Path) -> FigureResult:
    return render(SPEC, Path(results), Path(out))


if __name__ == "__main__":
    sys.exit(cli(SPEC))
