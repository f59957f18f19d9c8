"""Fig. 12: sparsity-accuracy trade-off.

Test accuracy against the achieved size of the exported model, H-SADMM vs prune-then-finetune.

    python -m analysis.fig12_pareto --results results --out figures

Reads the `pareto` runs: `config.json`, `steps.parquet` (final accuracy = the last evaluation),
`export.json` (written by `python -m prunex.export` or a run's `--export`: the achieved
fractions of the dense parameters and FLOPs of the physically compact model) and
`inference.parquet` (CPU latency of the compact model as a fraction of the dense one, batch 1 and
128). The x axes are the *achieved* fractions, not the nominal keep rate: the union of the nodes'
masks (eq. 14) keeps more than the nominal rate, and only exactly removable structure shrinks the
model. Each H-SADMM point is labelled with its nominal channel keep rate; prune-then-finetune
points carry the keep rate of the H-SADMM point whose FLOPs they match; the dense DDP model (the
baseline's starting point) is the star at 100%. A run without `export.json` keeps its nominal
keep rate and accuracy in the csv (the claims use them) but has no place on the axes.
"""

from __future__ import annotations

import math
import sys

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure

from analysis import style
from analysis.common import Experiment, Run, cli, figure_spec, final_accuracy

COLUMNS = [
    "run_id",
    "method",
    "model",
    "dataset",
    "channel_keep",
    "filter_keep",
    "pruning_ratio_pct",
    "final_test_acc_pct",
    "params_fraction_pct",
    "flops_fraction_pct",
    "mask_removed_pct",
    "cpu_latency_ratio_b1",
    "cpu_latency_ratio_b128",
    "matched_run",
    "mean_density",
    "iterations",
    "partial",
]
CAPTION = (
    "Final accuracy: last evaluation (BatchNorm statistics re-estimated, the model in final_model.pt); "
    "x: parameters / FLOPs of the physically compact model (prunex.export) over the dense model's; "
    "prune-then-finetune: the dense DDP model pruned once by filter L1 norms to at most the matched "
    "H-SADMM point's FLOPs, fine-tuned for H-SADMM's retraining budget; hollow markers: partial runs."
)

HYPER_SPARSE_PCT = 70.0  # Fig. 12 caption: "the swift drop-off only occurs in the hyper-sparse regime (> 70%)"
METHODS = ("hsadmm", "prune_finetune", "ddp")
MARKERS = ["o", "s", "^", "D"]


def _latency_ratio(run: Run, batch: int) -> float:
    inf = run.table("inference")
    if inf is None:
        return math.nan
    row = inf[(inf["variant"] == "compact") & (inf["device"] == "cpu") & (inf["batch"] == batch)]
    return float(row["latency_ratio"].iloc[0]) if len(row) else math.nan


def compute(exp: Experiment) -> tuple[pd.DataFrame, list[str]]:
    rows, notes = [], []
    by_id = {r.run_id: r for r in exp.runs}
    for run in exp.runs:
        if run.method not in METHODS:
            notes.append(f"{run.run_id} ({run.method}) left out")
            continue
        steps = run.table("steps")
        acc = final_accuracy(steps) if steps is not None and len(steps) else float("nan")
        if acc != acc:
            notes.append(f"{run.run_id} has no evaluated accuracy yet: left out")
            continue
        admm = run.admm
        matched = ""
        channel_keep, filter_keep = float(admm.get("channel_keep", 1.0)), float(admm.get("filter_keep", 1.0))
        if run.method == "prune_finetune":
            matched = str((run.config.get("prune_finetune") or {}).get("flops_from") or "")
            ref = by_id.get(matched)
            channel_keep = float(ref.admm.get("channel_keep", math.nan)) if ref else math.nan
            filter_keep = float(ref.admm.get("filter_keep", 1.0)) if ref else math.nan
        elif run.method == "ddp":
            channel_keep = filter_keep = 1.0
        masks = run.table("masks")
        density = float("nan")
        if masks is not None and len(masks):
            glob = masks[masks["kind"] == "global"]
            density = float(glob[glob["iteration"] == glob["iteration"].max()]["density"].mean())
        ex = run.export or {}
        if not ex:
            notes.append(f"{run.run_id}: no export.json (python -m prunex.export {run.path}): not placed on the axes")
        rows.append(
            {
                "run_id": run.run_id,
                "method": run.method,
                "model": run.model,
                "dataset": run.dataset,
                "channel_keep": channel_keep,
                "filter_keep": filter_keep,
                "pruning_ratio_pct": 100.0 * (1.0 - channel_keep),
                "final_test_acc_pct": acc,
                "params_fraction_pct": 100.0 * float(ex.get("params_fraction", math.nan)),
                "flops_fraction_pct": 100.0 * float(ex.get("flops_fraction", math.nan)),
                "mask_removed_pct": 100.0 * float(ex.get("mask_removed_fraction", math.nan)),
                "cpu_latency_ratio_b1": _latency_ratio(run, 1),
                "cpu_latency_ratio_b128": _latency_ratio(run, 128),
                "matched_run": matched,
                "mean_density": density,
                "iterations": int(steps["iteration"].max()) + 1,
                "partial": not run.done,
            }
        )
    df = pd.DataFrame(rows, columns=SPEC.columns)
    if len(df) and (df["filter_keep"] < 1).any():
        notes.append("some runs also prune filters (filter_keep < 1); labels give the channel keep rate")
    if len(df):
        order = {m: i for i, m in enumerate(METHODS)}
        df = df.sort_values(
            ["model", "method", "pruning_ratio_pct"], key=lambda c: c.map(order) if c.name == "method" else c
        ).reset_index(drop=True)
    return df, notes


def draw(df: pd.DataFrame, exp: Experiment) -> Figure:
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8), sharey=True, layout="constrained")
    models = sorted(df["model"].unique(), key=style.model_sort_key)
    for ax, col, what in zip(
        axes, ("params_fraction_pct", "flops_fraction_pct"), ("parameters", "FLOPs per image"), strict=True
    ):
        for mi, model in enumerate(models):
            marker = MARKERS[mi % len(MARKERS)]
            suffix = f", {style.model_label(model)}" if len(models) > 1 else ""
            for method in ("hsadmm", "prune_finetune"):
                g = df[(df["model"] == model) & (df["method"] == method)].dropna(subset=[col]).sort_values(col)
                if g.empty:
                    continue
                color = style.method_color(method)
                ax.plot(
                    g[col], g["final_test_acc_pct"], "-", color=color, lw=1.8, label=style.method_label(method) + suffix
                )
                done, part = g[~g["partial"].astype(bool)], g[g["partial"].astype(bool)]
                ax.plot(done[col], done["final_test_acc_pct"], marker, color=color, ms=6)
                if len(part):
                    ax.plot(part[col], part["final_test_acc_pct"], marker, mfc="white", color=color, ms=6)
                for r in g.itertuples():
                    ax.annotate(
                        f"keep {r.channel_keep:g}",
                        (getattr(r, col), r.final_test_acc_pct),
                        textcoords="offset points",
                        xytext=(4, 6 if method == "hsadmm" else -12),
                        fontsize=7,
                        color=color,
                    )
            dense = df[(df["model"] == model) & (df["method"] == "ddp")].dropna(subset=[col])
            if len(dense):
                ax.plot(
                    dense[col],
                    dense["final_test_acc_pct"],
                    "*",
                    color=style.method_color("ddp"),
                    ms=12,
                    label="dense DDP (the baseline's start)" + suffix,
                )
        ax.set_xlim(0, 105)
        ax.set_xlabel(f"achieved fraction of the dense model's {what} (%), exported model")
        ax.set_title(f"accuracy vs {what}")
    axes[0].set_ylabel("final test accuracy (%)")
    axes[0].legend(fontsize=8, loc="center left")
    fig.suptitle("Fig. 12: sparsity-accuracy trade-off of the exported models (labels: nominal channel keep)")
    return fig


def summary(df: pd.DataFrame) -> str:
    parts = []
    for model, g in df.groupby("model"):
        pts = []
        for r in g[g["method"] == "hsadmm"].sort_values("pruning_ratio_pct").itertuples():
            ptf = g[(g["method"] == "prune_finetune") & (g["matched_run"] == r.run_id)]
            text = (
                f"keep {r.channel_keep:g}: params {r.params_fraction_pct:.0f}%, FLOPs {r.flops_fraction_pct:.0f}%, "
                f"acc {r.final_test_acc_pct:.1f}%"
            )
            if len(ptf):
                p = ptf.iloc[0]
                text += f" (prune-then-finetune {p.final_test_acc_pct:.1f}% at {p.flops_fraction_pct:.0f}% FLOPs)"
            pts.append(text)
        parts.append(f"{style.model_label(str(model))} H-SADMM by nominal keep: " + "; ".join(pts))
    return "; ".join(parts)


SPEC = figure_spec(globals(), "pareto", COLUMNS, CAPTION, ("hsadmm", "prune_finetune"))


if __name__ == "__main__":
    sys.exit(cli(SPEC))
