"""Fig. 12: sparsity-accuracy trade-off.

Test accuracy against the achieved size of the exported model, H-SADMM vs prune-then-finetune.

    python -m analysis.fig12_pareto --results results --out figures

Reads the `pareto` runs: `config.json`, `steps.parquet` (final accuracy = the last evaluation),
`export.json` (written by `python -m prunex.pruning.export` or a run's `--export`: the achieved
fractions of the dense parameters and FLOPs of the physically compact model) and
`inference.parquet` (CPU latency of the compact model as a fraction of the dense one, batch 1 and
128). The x axes are the *achieved* fractions, not the nominal keep rate: the union of the nodes'
masks (eq. 14) keeps more than the nominal rate, and only exactly removable structure shrinks the
model. Each H-SADMM point is labelled with its nominal channel keep rate; prune-then-finetune
points carry the keep rate of the H-SADMM point whose FLOPs they match; the dense DDP model (the
baseline's starting point) is the star at 100%. A run without `export.json` keeps its nominal
keep rate and accuracy in the csv (the claims use them) but has no place on the axes.

Budgets are stated per run (issue 26): `start_run` (the run it started from, `--init-from`; "" = random
weights), `epochs` per rank from that start and `sgd_steps_per_rank` (epochs x the run's SGD steps per
epoch, meta.json; NaN in logs written before it was recorded). The start runs themselves (`role` start:
the dense model every method of a seed starts from) are rows of the csv, not points of the figure.
H-SADMM's rows say when its mask froze and why (`froze_after`: the last iteration whose mask was
recomputed; `freeze_reason`: settled, T_freeze or retraining, freeze.parquet) and from which iteration
its global mask stopped drifting (`drift_zero_from`, NaN: it still drifted when it froze), so that a
forced freeze is told apart from a settled one. With several seeds per point (runs differing only in
`seed`) the figure draws each seed faintly and the median with its range; the summary gives the median
and the range.
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
    "seed",
    "role",
    "start_run",
    "epochs",
    "sgd_steps_per_rank",
    "froze_after",
    "freeze_reason",
    "drift_zero_from",
    "partial",
]
CAPTION = (
    "Final accuracy: last evaluation (BatchNorm statistics re-estimated, the model in final_model.pt); "
    "x: parameters / FLOPs of the physically compact model (prunex.pruning.export) over the dense model's; "
    "prune-then-finetune: the common start pruned once by filter L1 norms to at most the matched "
    "H-SADMM point's FLOPs, then fine-tuned; every method from the same start for the same SGD steps per rank "
    "(csv: start_run, epochs, sgd_steps_per_rank); faint: each seed; line and bars: median and range over "
    "seeds; hollow markers: partial runs."
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


def drift_zero_from(masks: pd.DataFrame, last_dynamic: int) -> float:
    """The first dynamic iteration from which the global mask no longer drifted, up to the freeze
    (`last_dynamic`); NaN when it drifted in the last dynamic iteration (the freeze was forced on a moving
    mask)."""
    glob = masks[masks["kind"] == "global"]
    drift = glob.groupby("iteration")["drift"].sum().loc[:last_dynamic]
    if drift.empty:
        return math.nan
    moving = drift[drift > 0]
    first = int(moving.index.max()) + 1 if len(moving) else int(drift.index.min())
    return float(first) if first <= last_dynamic else math.nan


def _freeze(run: Run) -> tuple[float, str, float]:
    """(froze_after, freeze_reason, drift_zero_from) of an ADMM run; NaN and "" where it has no freeze row."""
    freeze, masks = run.table("freeze"), run.table("masks")
    if freeze is None or freeze.empty:
        return math.nan, "", math.nan
    row = freeze.iloc[0]
    at = int(row["last_dynamic"])
    zero = drift_zero_from(masks, at) if masks is not None and len(masks) else math.nan
    return float(at), str(row["reason"]), zero


def _steps_per_rank(run: Run, epochs: float) -> float:
    per_epoch = run.meta.get("steps_per_epoch")
    return float(round(epochs * per_epoch)) if isinstance(per_epoch, int) else math.nan


def compute(exp: Experiment) -> tuple[pd.DataFrame, list[str]]:
    rows, notes = [], []
    by_id = {r.run_id: r for r in exp.runs}
    starts = {str(r.config.get("init_from") or "") for r in exp.runs} - {""}
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
        role = "start" if run.run_id in starts else "point"
        masks = run.table("masks")
        density = float("nan")
        if masks is not None and len(masks):
            glob = masks[masks["kind"] == "global"]
            density = float(glob[glob["iteration"] == glob["iteration"].max()]["density"].mean())
        froze_after, reason, zero = _freeze(run) if run.method == "hsadmm" else (math.nan, "", math.nan)
        ex = run.export or {}
        if not ex and role == "point":
            notes.append(
                f"{run.run_id}: no export.json (python -m prunex.pruning.export {run.path}): not placed on the axes"
            )
        epochs = float(steps["epoch"].max())
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
                "seed": math.nan if run.seed is None else run.seed,
                "role": role,
                "start_run": str(run.config.get("init_from") or ""),
                "epochs": epochs,
                "sgd_steps_per_rank": _steps_per_rank(run, epochs),
                "froze_after": froze_after,
                "freeze_reason": reason,
                "drift_zero_from": zero,
                "partial": not run.done,
            }
        )
    df = pd.DataFrame(rows, columns=SPEC.columns)
    if len(df) and (df["filter_keep"] < 1).any():
        notes.append("some runs also prune filters (filter_keep < 1); labels give the channel keep rate")
    if len(df):
        order = {m: i for i, m in enumerate(METHODS)}
        df = df.sort_values(
            ["model", "role", "method", "pruning_ratio_pct", "seed"],
            key=lambda c: c.map(order) if c.name == "method" else c,
        ).reset_index(drop=True)
    return df, notes


def points(df: pd.DataFrame) -> pd.DataFrame:
    """The figure's points: one per model, method and nominal keep rate, the median over its seeds with
    the range of the accuracy (`acc_min`, `acc_max`) and the number of seeds (`seeds`); start runs left out."""
    pts = df[df["role"] == "point"]
    if pts.empty:
        return pd.DataFrame()
    keys = ["model", "method", "channel_keep"]
    g = pts.groupby(keys, dropna=False)
    out = g[["final_test_acc_pct", "params_fraction_pct", "flops_fraction_pct"]].median()
    out["acc_min"] = g["final_test_acc_pct"].min()
    out["acc_max"] = g["final_test_acc_pct"].max()
    out["seeds"] = g["final_test_acc_pct"].size()
    out["partial"] = g["partial"].any()
    return out.reset_index()


def draw(df: pd.DataFrame, exp: Experiment) -> Figure:
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8), sharey=True, layout="constrained")
    pts, each = points(df), df[df["role"] == "point"]
    models = sorted(pts["model"].unique(), key=style.model_sort_key) if len(pts) else []
    for ax, col, what in zip(
        axes, ("params_fraction_pct", "flops_fraction_pct"), ("parameters", "FLOPs per image"), strict=True
    ):
        for mi, model in enumerate(models):
            marker = MARKERS[mi % len(MARKERS)]
            suffix = f", {style.model_label(model)}" if len(models) > 1 else ""
            for method in METHODS:
                g = pts[(pts["model"] == model) & (pts["method"] == method)].dropna(subset=[col]).sort_values(col)
                if g.empty:
                    continue
                color = style.method_color(method)
                seeds = each[(each["model"] == model) & (each["method"] == method)].dropna(subset=[col])
                ax.plot(seeds[col], seeds["final_test_acc_pct"], marker, color=color, ms=4, alpha=0.3)
                label = style.method_label(method) + suffix
                if method == "ddp":
                    marker_, label = "*", "dense DDP (same start and steps)" + suffix
                else:
                    marker_ = marker
                    ax.plot(g[col], g["final_test_acc_pct"], "-", color=color, lw=1.8)
                y = g["final_test_acc_pct"]
                ax.errorbar(
                    g[col],
                    y,
                    yerr=[y - g["acc_min"], g["acc_max"] - y],
                    fmt=marker_,
                    color=color,
                    ms=12 if method == "ddp" else 6,
                    mfc="white" if g["partial"].any() else color,
                    capsize=3,
                    label=label,
                )
                for r in g.itertuples():
                    if method == "ddp":
                        continue
                    ax.annotate(
                        f"keep {r.channel_keep:g}",
                        (getattr(r, col), r.final_test_acc_pct),
                        textcoords="offset points",
                        xytext=(4, 6 if method == "hsadmm" else -12),
                        fontsize=7,
                        color=color,
                    )
        ax.set_xlim(0, 105)
        ax.set_xlabel(f"achieved fraction of the dense model's {what} (%), exported model")
        ax.set_title(f"accuracy vs {what}")
    axes[0].set_ylabel("final test accuracy (%)")
    axes[0].legend(fontsize=8, loc="lower right")
    n = int(pts["seeds"].max()) if len(pts) else 0
    seeds = f"; median and range of {n} seeds" if n > 1 else ""
    fig.suptitle(f"Fig. 12: sparsity-accuracy trade-off of the exported models (labels: nominal channel keep{seeds})")
    return fig


def _spread(values: pd.Series) -> str:
    values = values.dropna()
    if len(values) <= 1:
        return f"{values.median():.1f}%" if len(values) else "n/a"
    return f"{values.median():.1f}% ({values.min():.1f}-{values.max():.1f}, {len(values)} seeds)"


def _below(dense: pd.DataFrame, runs: pd.DataFrame) -> pd.Series:
    """Per seed present in both: dense DDP's accuracy minus the run's (points)."""
    d = dense.dropna(subset=["seed"]).set_index("seed")["final_test_acc_pct"]
    r = runs.dropna(subset=["seed"]).set_index("seed")["final_test_acc_pct"]
    return (d - r).dropna()


def summary(df: pd.DataFrame) -> str:
    parts = []
    pts = df[df["role"] == "point"]
    for model, g in pts.groupby("model"):
        dense = g[g["method"] == "ddp"]
        text = [f"{style.model_label(str(model))}: dense DDP {_spread(dense['final_test_acc_pct'])}"]
        for keep, h in g[g["method"] == "hsadmm"].groupby("channel_keep", sort=False):
            ptf = g[(g["method"] == "prune_finetune") & g["matched_run"].isin(h["run_id"])]
            line = (
                f"keep {keep:g}: H-SADMM {_spread(h['final_test_acc_pct'])} at "
                f"{h['flops_fraction_pct'].median():.0f}% FLOPs"
            )
            if len(ptf):
                line += f", prune-then-finetune {_spread(ptf['final_test_acc_pct'])}"
                cost = _below(dense, ptf)
                if len(cost):  # whether the data discriminates: what one-shot pruning costs against dense
                    each = ", ".join(f"{c:.1f}" for c in cost)
                    line += f" ({cost.median():.1f} points below dense DDP, per seed {each})"
            frozen = h.dropna(subset=["froze_after"])
            if keep < 1 and len(frozen):
                settled = frozen["drift_zero_from"].notna()
                line += (
                    f"; mask froze after iteration {', '.join(str(int(v)) for v in frozen['froze_after'])} "
                    f"({', '.join(frozen['freeze_reason'])}), drift zero before the freeze in {int(settled.sum())} of "
                    f"{len(frozen)} runs"
                )
            text.append(line)
        steps = g["sgd_steps_per_rank"].dropna()
        if len(steps):
            text.append(
                f"{int(steps.min())}-{int(steps.max())} SGD steps per rank from the start"
                if steps.min() != steps.max()
                else f"{int(steps.iloc[0])} SGD steps per rank from the start for every run"
            )
        parts.append("; ".join(text))
    return "; ".join(parts)


SPEC = figure_spec(globals(), "pareto", COLUMNS, CAPTION, ("hsadmm", "prune_finetune"))


if __name__ == "__main__":
    sys.exit(cli(SPEC))
