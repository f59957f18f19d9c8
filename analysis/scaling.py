"""Strong-scaling tables shared by Fig. 9a (speedup) and Fig. 9b (efficiency), and read by the report.

Reads `strong_scaling/*/steps.parquet`. Time per epoch = training wall time at the last logged
iteration / epochs of the shard completed by then (both from rank 0), so runs of different
lengths and partial runs compare fairly; the global problem is the same at every count (strong
scaling). Speedup(N) = t(N0) / t(N) with N0 the method's smallest count; efficiency = speedup /
(N / N0). Several runs at one count (seeds) are averaged.

Model curves: when `RESULTS/perfmodel/projection_*.csv` tables exist (written by
`python -m prunex.perfmodel project ... --out RESULTS/perfmodel`), the rows of the measured models
and methods are drawn on the same axes as dashed lines labelled "model", their speedup taken
relative to the measured base count (source column: `measured` or `model (<cluster>)`). Only the
table is read: analysis never runs the model itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from analysis import style
from analysis.common import Experiment, FigureSpec, LogError, facet_axes, figure_spec, runs_with

SCALING_COLUMNS = [
    "model",
    "method",
    "gpus",
    "nodes",
    "procs_per_node",
    "n_runs",
    "run_id",
    "time_per_epoch_s",
    "base_gpus",
    "speedup",
    "ideal_speedup",
    "efficiency_pct",
    "source",
]
MEASURED = "measured"
MODEL_CAPTION = (
    "Model curves, where present, keep the cluster file's compute seconds per sample at every count "
    "(a core or GPU per process); where processes share cores, as on the local profile's mini "
    "cluster, the measured points include that sharing."
)
MODEL_DIR = "perfmodel"
PROJECTION_NEEDS = ("cluster", "model", "method", "gpus", "nodes", "procs_per_node", "epoch_s")
MODEL_HINT = (
    "python -m prunex.perfmodel cluster-from-sweep ... then python -m prunex.perfmodel project "
    "--cluster FILE --model M --dataset D --gpus ... --out RESULTS/perfmodel"
)


def measured_only(df: pd.DataFrame) -> pd.DataFrame:
    """The rows measured from logs (not model curves)."""
    return df[df["source"] == MEASURED] if "source" in df.columns else df


def read_projections(results: Path) -> list[tuple[Path, pd.DataFrame]]:
    """Every projection table under RESULTS/perfmodel (LogError naming a corrupt or foreign one)."""
    found = []
    for path in sorted((Path(results) / MODEL_DIR).glob("projection_*.csv")):
        try:
            df = pd.read_csv(path)
        except (OSError, ValueError) as e:
            raise LogError(f"{path}: not a readable csv file ({type(e).__name__}: {e})") from None
        missing = [c for c in PROJECTION_NEEDS if c not in df.columns]
        if missing:
            raise LogError(f"{path}: not a prunex.perfmodel projection table, missing columns {missing}")
        found.append((path, df))
    return found


def model_rows(exp: Experiment, measured: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """Model curves of the measured (model, method) pairs from the projection tables (module docstring)."""
    tables = read_projections(exp.results)
    pairs = set(zip(measured["model"], measured["method"], strict=True))
    rows, used = [], []
    for path, df in tables:
        for (cluster, model, method), g in df.groupby(["cluster", "model", "method"]):
            if (model, method) not in pairs:
                continue
            g = g.sort_values("gpus")
            meas = measured[(measured["model"] == model) & (measured["method"] == method)]
            base = int(meas["base_gpus"].iloc[0])
            if base not in set(g["gpus"]):
                base = int(g["gpus"].min())
            t0 = float(g[g["gpus"] == base]["epoch_s"].iloc[0])
            for r in g.itertuples():
                speedup = t0 / float(r.epoch_s)
                rows.append(
                    {
                        "model": model,
                        "method": method,
                        "gpus": int(r.gpus),
                        "nodes": int(r.nodes),
                        "procs_per_node": int(r.procs_per_node),
                        "n_runs": 0,
                        "run_id": path.name,
                        "time_per_epoch_s": float(r.epoch_s),
                        "base_gpus": base,
                        "speedup": speedup,
                        "ideal_speedup": r.gpus / base,
                        "efficiency_pct": 100.0 * speedup * base / r.gpus,
                        "source": f"model ({cluster})",
                    }
                )
            used.append(f"{path.name} ({cluster})")
    notes = []
    if used:
        notes.append(
            "model curves (dashed, labelled 'model'): the analytic alpha-beta model of prunex.perfmodel "
            f"read from {', '.join(dict.fromkeys(used))} under {exp.results / MODEL_DIR}; points are "
            "measured"
        )
    else:
        notes.append(
            f"no model curves: no projection table for these models under {exp.results / MODEL_DIR} "
            f"(make one with: {MODEL_HINT})"
        )
    return pd.DataFrame(rows, columns=SCALING_COLUMNS), notes


def scaling_table(exp: Experiment) -> tuple[pd.DataFrame, list[str]]:
    measured, notes = measured_table(exp)
    if measured.empty:
        return measured, notes
    model, model_notes = model_rows(exp, measured)
    frames = [measured] + ([model] if len(model) else [])
    return pd.concat(frames, ignore_index=True)[SCALING_COLUMNS], notes + model_notes


def measured_table(exp: Experiment) -> tuple[pd.DataFrame, list[str]]:
    rows, notes = [], []
    for run, steps in runs_with(exp, "steps", notes):
        last = steps.sort_values("iteration").iloc[-1]
        if not last["epoch"] > 0:
            notes.append(f"{run.run_id}: no completed epoch fraction logged, left out")
            continue
        rows.append(
            {
                "model": run.model,
                "method": run.method,
                "gpus": run.world_size,
                "nodes": run.nodes,
                "procs_per_node": run.procs_per_node,
                "run_id": run.run_id,
                "time_per_epoch_s": float(last["wall_s"]) / float(last["epoch"]),
            }
        )
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
        )
        .reset_index()
    )
    base = agg.groupby(["model", "method"])["gpus"].transform("min")
    t0 = agg.groupby(["model", "method"])["time_per_epoch_s"].transform("first")  # sorted by gpus: the base
    agg["base_gpus"] = base
    agg["speedup"] = t0 / agg["time_per_epoch_s"]
    agg["ideal_speedup"] = agg["gpus"] / base
    agg["efficiency_pct"] = 100.0 * agg["speedup"] / agg["ideal_speedup"]
    agg["source"] = MEASURED
    for (model, method), g in agg.groupby(["model", "method"]):
        if len(g) < 2:
            notes.append(f"{method} on {model} has runs at one count only ({int(g['gpus'].iloc[0])}): no speedup")
    bases = agg.groupby("method")["base_gpus"].first()
    if bases.nunique() > 1:
        notes.append("methods have different smallest counts: " + ", ".join(f"{m} {b}" for m, b in bases.items()))
    agg = agg.iloc[
        sorted(
            range(len(agg)),
            key=lambda i: (
                style.model_sort_key(agg["model"].iloc[i]),
                style.method_sort_key(agg["method"].iloc[i]),
                agg["gpus"].iloc[i],
            ),
        )
    ]
    return agg[SCALING_COLUMNS].reset_index(drop=True), notes


def unit(exp: Experiment) -> str:
    return "GPUs" if exp.runs and all(r.device_type == "cuda" for r in exp.runs) else "processes"


def draw_scaling(df: pd.DataFrame, exp: Experiment, y: str, ylabel: str, ideal: str | None) -> Figure:
    models = sorted(df["model"].unique(), key=style.model_sort_key)
    with_curves = bool((df["source"] != MEASURED).any())
    fig, axes = facet_axes(len(models), width=8.5 if with_curves else 5.5, height=4.0)  # room for the legend
    for ax, model in zip(axes, models, strict=True):
        sub = df[df["model"] == model]
        meas = measured_only(sub)
        for method, g in sorted(meas.groupby("method"), key=lambda kv: style.method_sort_key(str(kv[0]))):
            ax.plot(
                g["gpus"],
                g[y],
                marker="o",
                lw=1.8,
                color=style.method_color(str(method)),
                label=f"{style.method_label(str(method))} (measured)",
            )
        curves = sub[sub["source"] != MEASURED]
        for (method, source), g in sorted(
            curves.groupby(["method", "source"]), key=lambda kv: style.method_sort_key(str(kv[0][0]))
        ):
            ax.plot(
                g["gpus"],
                g[y],
                marker="x",
                ms=6,
                lw=1.4,
                ls="--",
                color=style.method_color(str(method)),
                label=f"{style.method_label(str(method))} {source}",
            )
        if ideal == "speedup":
            g = sub.drop_duplicates("gpus").sort_values("gpus")
            ax.plot(g["gpus"], g["gpus"] / g["base_gpus"], color=style.TARGET_COLOR, ls=":", label="ideal (linear)")
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
        if len(curves):  # measured and model entries: beside the axes, clear of the points
            ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        else:
            ax.legend(fontsize=8)
    return fig


def scaling_summary(df: pd.DataFrame, col: str, unit_text: str) -> str:
    parts = []
    for (model, method), g in measured_only(df).groupby(["model", "method"], sort=False):
        g = g.sort_values("gpus")
        last = g.iloc[-1]
        parts.append(
            f"{style.method_label(str(method))} ({model}) {last[col]:.3g}{unit_text} at "
            f"{int(last['gpus'])} vs {int(last['base_gpus'])}"
        )
    return "; ".join(parts)


def model_summary(df: pd.DataFrame, col: str, unit_text: str) -> str:
    """The model curves' values at each method's largest measured count ('' without curves)."""
    curves = df[df["source"] != MEASURED]
    measured = measured_only(df)
    out = ""
    for source, sub in curves.groupby("source", sort=False):
        parts = []
        for (model, method), g in sub.groupby(["model", "method"], sort=False):
            top = int(measured[(measured["model"] == model) & (measured["method"] == method)]["gpus"].max())
            at = g[g["gpus"] == top]
            if len(at):
                parts.append(f"{style.method_label(str(method))} {at[col].iloc[0]:.3g}{unit_text} at {top}")
        if parts:
            out += f"; {source}: " + ", ".join(parts)
    return out


# what a scaling figure plots: its column -> (summary prefix, unit, y label with {base} and {unit}, ideal line)
SCALING_AXES = {
    "speedup": ("speedup", "x", "speedup over the smallest count ({base} {unit}) (x)", "speedup"),
    "efficiency_pct": ("efficiency", "%", "parallel efficiency vs {base} {unit} (%)", "efficiency"),
}


def scaling_figure(module: dict[str, Any], y: str, caption: str, suptitle: str) -> FigureSpec:
    """The spec of a strong-scaling figure of `y` (a key of `SCALING_AXES`; Fig. 9a: speedup, Fig. 9b:
    efficiency), for the figure module whose `globals()` are `module` (`figure_spec`)."""
    prefix, unit_text, ylabel, ideal = SCALING_AXES[y]

    def draw(df: pd.DataFrame, exp: Experiment) -> Figure:
        base = int(df["base_gpus"].min())
        fig = draw_scaling(df, exp, y, ylabel.format(base=base, unit=unit(exp)), ideal)
        fig.suptitle(suptitle)
        return fig

    def summary(df: pd.DataFrame) -> str:
        return f"{prefix}: " + scaling_summary(df, y, unit_text) + model_summary(df, y, unit_text)

    parts = {**module, "compute": scaling_table, "draw": draw, "summary": summary}
    return figure_spec(
        parts, "strong_scaling", SCALING_COLUMNS, caption + " " + MODEL_CAPTION, ("hsadmm", "ddp", "topk")
    )
