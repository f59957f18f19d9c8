"""Accuracy curves of the time-to-accuracy runs, shared by Fig. 5a (against wall time) and Fig. 5b
(against cumulative inter-node volume), and read by the report's time-to-accuracy claims.

Reads `time_to_accuracy/*/steps.parquet` (every method present). Wall time is training time only
(evaluation excluded, as logged by prunex.training.train); accuracy is rank 0's at each evaluation.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from analysis import style
from analysis.common import TARGET_ACC_PCT, Experiment, FigureSpec, facet_axes, figure_spec, fmt, run_label, runs_with

CURVE_COLUMNS = [
    "run_id",
    "method",
    "model",
    "dataset",
    "gpus",
    "iteration",
    "epoch",
    "wall_min",
    "cum_inter_gb",
    "test_acc_pct",
]


def accuracy_curves(exp: Experiment) -> tuple[pd.DataFrame, list[str]]:
    """Evaluated iterations of every run: wall time, cumulative inter-node GB and accuracy."""
    frames, notes = [], []
    for run, steps in runs_with(exp, "steps", notes):
        steps = steps.sort_values("iteration")
        steps["cum_inter_gb"] = steps["inter_bytes"].cumsum() / 1e9
        ev = steps[steps["test_acc"].notna()]
        if ev.empty:
            notes.append(f"{run.run_id} has no evaluated iteration yet: left out")
            continue
        frames.append(
            pd.DataFrame(
                {
                    "run_id": run.run_id,
                    "method": run.method,
                    "model": run.model,
                    "dataset": run.dataset,
                    "gpus": run.world_size,
                    "iteration": ev["iteration"].to_numpy(),
                    "epoch": ev["epoch"].to_numpy(),
                    "wall_min": ev["wall_s"].to_numpy() / 60.0,
                    "cum_inter_gb": ev["cum_inter_gb"].to_numpy(),
                    "test_acc_pct": ev["test_acc"].to_numpy() * 100.0,
                }
            )
        )
    df = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=CURVE_COLUMNS)
    return df, notes


def reach_target(df: pd.DataFrame, x: str, target: float = TARGET_ACC_PCT) -> dict[str, float]:
    """Per run: the first `x` at which accuracy >= target (NaN when never)."""
    out = {}
    for run_id, g in df.groupby("run_id", sort=False):
        hit = g[g["test_acc_pct"] >= target].sort_values(x)
        out[str(run_id)] = float(hit[x].iloc[0]) if len(hit) else float("nan")
    return out


def draw_curves(df: pd.DataFrame, exp: Experiment, x: str, xlabel: str) -> Figure:
    models = sorted(df["model"].unique(), key=style.model_sort_key)
    fig, axes = facet_axes(len(models), width=6.0, height=4.0, sharey=True)
    for ax, model in zip(axes, models, strict=True):
        sub = df[df["model"] == model]
        methods = sub.groupby("run_id", sort=False)["method"].first()
        dup = methods.duplicated(keep=False)
        for run_id in sorted(methods.index, key=lambda r: (style.method_sort_key(methods[r]), r)):
            g = sub[sub["run_id"] == run_id].sort_values(x)
            run = exp.run(run_id)
            ax.plot(
                g[x],
                g["test_acc_pct"],
                marker="o",
                ms=3,
                lw=1.6,
                color=style.method_color(run.method),
                ls="-" if run.done else "--",
                label=run_label(run, bool(dup[run_id])) + ("" if run.done else " (partial)"),
            )
        ax.axhline(TARGET_ACC_PCT, color=style.TARGET_COLOR, ls=":", lw=1.2, label=f"{TARGET_ACC_PCT:g}% target")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("test accuracy (%)")
        ax.set_title(style.model_label(model))
        ax.set_xlim(left=0)
        ax.legend(fontsize=8, loc="lower right")
    return fig


def summary_line(df: pd.DataFrame, x: str, unit: str) -> str:
    hits = reach_target(df, x)
    best = df.groupby("run_id")["test_acc_pct"].max()
    method = df.groupby("run_id")["method"].first()
    parts = []
    for run_id, t in sorted(hits.items(), key=lambda kv: (style.method_sort_key(method[kv[0]]), kv[0])):
        what = f"{fmt(t)} {unit}" if t == t else f"never (best {best[run_id]:.1f}%)"
        parts.append(f"{style.method_label(method[run_id])}: {what}")
    return f"reaches {TARGET_ACC_PCT:g}%: " + "; ".join(parts)


def curves_with_target(exp: Experiment) -> tuple[pd.DataFrame, list[str]]:
    df, notes = accuracy_curves(exp)
    df["target_acc_pct"] = TARGET_ACC_PCT
    return df, notes


def curve_columns(x: str) -> list[str]:
    """The columns a figure of accuracy against `x` (wall_min or cum_inter_gb) plots and saves."""
    return [c for c in CURVE_COLUMNS if c not in ("wall_min", "cum_inter_gb") or c == x] + ["target_acc_pct"]


def accuracy_figure(
    module: dict[str, Any], x: str, xlabel: str, unit: str, caption: str, suptitle: str = ""
) -> FigureSpec:
    """The spec of a figure of accuracy against `x` (Fig. 5a: `wall_min`, Fig. 5b: `cum_inter_gb`), for the
    figure module whose `globals()` are `module` (its name and title: `figure_spec`). `unit` is the
    summary's unit of `x`; `suptitle` (default: the title) heads the figure."""

    def draw(df: pd.DataFrame, exp: Experiment) -> Figure:
        fig = draw_curves(df, exp, x, xlabel)
        fig.suptitle(suptitle or spec.title)
        return fig

    def summary(df: pd.DataFrame) -> str:
        return summary_line(df, x, unit)

    parts = {**module, "compute": curves_with_target, "draw": draw, "summary": summary}
    spec = figure_spec(parts, "time_to_accuracy", curve_columns(x), caption, ("hsadmm", "ddp", "topk", "pactrain"))
    return spec
