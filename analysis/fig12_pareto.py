"""Fig. 12: final test accuracy vs channel pruning ratio, one line per model.

    python -m analysis.fig12_pareto --results results --out figures

Reads `pareto/*/config.json` and `steps.parquet` of the hsadmm runs. Pruning ratio = 1 - the run's
channel keep rate (admm.channel_keep); final accuracy = the last evaluated test accuracy (the
masked consensus model). The mean kept density of the constrained layers at the last iteration
(masks.parquet, kind global) is in the csv to show that the constraint took effect.
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure

from analysis import style
from analysis.common import Experiment, FigureResult, FigureSpec, cli, final_accuracy, render

HYPER_SPARSE_PCT = 70.0  # Fig. 12 caption: "the swift drop-off only occurs in the hyper-sparse regime (> 70%)"


def compute(exp: Experiment) -> tuple[pd.DataFrame, list[str]]:
    rows, notes = [], []
    for run in exp.runs:
        if run.method != "hsadmm":
            notes.append(f"{run.run_id} ({run.method}) left out: the frontier is of H-SADMM runs")
            continue
        steps = run.table("steps")
        acc = final_accuracy(steps) if steps is not None and len(steps) else float("nan")
        if acc != acc:
            notes.append(f"{run.run_id} has no evaluated accuracy yet: left out")
            continue
        admm = run.admm
        masks = run.table("masks")
        density = float("nan")
        if masks is not None and len(masks):
            glob = masks[masks["kind"] == "global"]
            density = float(glob[glob["iteration"] == glob["iteration"].max()]["density"].mean())
        rows.append(
            {
                "run_id": run.run_id,
                "model": run.model,
                "dataset": run.dataset,
                "channel_keep": float(admm.get("channel_keep", float("nan"))),
                "filter_keep": float(admm.get("filter_keep", 1.0)),
                "pruning_ratio_pct": 100.0 * (1.0 - float(admm.get("channel_keep", float("nan")))),
                "final_test_acc_pct": acc,
                "mean_density": density,
                "iterations": int(steps["iteration"].max()) + 1,
                "partial": not run.done,
            }
        )
    df = pd.DataFrame(rows, columns=SPEC.columns)
    if len(df) and (df["filter_keep"] < 1).any():
        notes.append("some runs also prune filters (filter_keep < 1); the x axis is the channel pruning ratio")
    if len(df):
        df = df.sort_values(["model", "pruning_ratio_pct"], ignore_index=True)
    return df, notes


def draw(df: pd.DataFrame, exp: Experiment) -> Figure:
    fig, ax = plt.subplots(figsize=(7.5, 4.5), layout="constrained")
    for model in sorted(df["model"].unique(), key=style.model_sort_key):
        g = df[df["model"] == model].sort_values("pruning_ratio_pct")
        color = style.model_color(model)
        ax.plot(g["pruning_ratio_pct"], g["final_test_acc_pct"], lw=1.8, color=color, label=style.model_label(model))
        done, part = g[~g["partial"].astype(bool)], g[g["partial"].astype(bool)]
        ax.plot(done["pruning_ratio_pct"], done["final_test_acc_pct"], "o", color=color, ms=6)
        if len(part):
            ax.plot(
                part["pruning_ratio_pct"],
                part["final_test_acc_pct"],
                "o",
                mfc="white",
                color=color,
                ms=6,
                label=f"{style.model_label(model)}: partial run",
            )
    ax.axvspan(HYPER_SPARSE_PCT, 100, color="#f2f2f2", zorder=0, label=f"hyper-sparse (> {HYPER_SPARSE_PCT:g}%)")
    ax.set_xlim(-2, 100)
    ax.set_xlabel("channel pruning ratio = 1 - channel keep rate (%)")
    ax.set_ylabel("final test accuracy (%)")
    ax.legend(fontsize=8)
    ax.set_title("Fig. 12: sparsity-accuracy trade-off (H-SADMM)")
    return fig


def summary(df: pd.DataFrame) -> str:
    parts = []
    for model, g in df.groupby("model"):
        g = g.sort_values("pruning_ratio_pct")
        base = g[g["pruning_ratio_pct"].abs() < 1e-6]["final_test_acc_pct"]
        pts = ", ".join(
            f"{p:.0f}%: {a:.1f}" for p, a in zip(g["pruning_ratio_pct"], g["final_test_acc_pct"], strict=True)
        )
        parts.append(
            f"{style.model_label(str(model))} accuracy by pruning ratio: {pts}"
            + ("" if len(base) else " (no unpruned run)")
        )
    return "; ".join(parts)


SPEC = FigureSpec(
    name="fig12_pareto",
    experiment="pareto",
    title="Fig. 12: sparsity-accuracy trade-off",
    columns=[
        "run_id",
        "model",
        "dataset",
        "channel_keep",
        "filter_keep",
        "pruning_ratio_pct",
        "final_test_acc_pct",
        "mean_density",
        "iterations",
        "partial",
    ],
    compute=compute,
    draw=draw,
    summary=summary,
    caption_extra="Final accuracy: last evaluation of the masked consensus model; hollow markers: partial runs.",
    methods=("hsadmm",),
)


def make(results: str | Path, out: str | Path) -> FigureResult:
    return render(SPEC, Path(results), Path(out))


if __name__ == "__main__":
    sys.exit(cli(SPEC))
