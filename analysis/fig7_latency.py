"""Fig. 7: per-iteration communication latency.

Per-iteration communication latency of PruneX, DDP and flat PruneX (AR).

    python -m analysis.fig7_latency --results results --out figures

Reads `latency/*/steps.parquet`: comm_s is, per iteration, the time a rank spent in collectives
(every level: intra, inter and flat), averaged over ranks. An iteration is one optimizer step for
DDP (and Top-K, PacTrain) and one outer iteration for H-SADMM and flat ADMM, as in the paper.
The ADMM methods wait for every rank at a recorded `barrier` before their consensus; that wait
(stragglers still in local training) is not communication, so it is taken out of comm_s here and
kept in the csv as wait_s.
"""

from __future__ import annotations

import sys

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure

from analysis import style
from analysis.common import Experiment, cli, figure_spec, runs_with

COLUMNS = ["run_id", "method", "model", "iteration", "comm_s", "wait_s"]
CAPTION = (
    "Communication time: seconds spent in collectives per iteration (intra- and inter-node paths, "
    "all levels), mean over ranks. Box: median, quartiles, 1.5 IQR whiskers, outliers. Dashed: partial runs."
)


def compute(exp: Experiment) -> tuple[pd.DataFrame, list[str]]:
    frames, notes = [], []
    for run, steps in runs_with(exp, "steps", notes):
        wait = pd.Series(0.0, index=steps["iteration"].to_numpy())
        comm = run.table("comm")
        if comm is not None and not comm.empty and (comm["op"] == "barrier").any():
            barrier = comm[comm["op"] == "barrier"].groupby(["iteration", "rank"])["seconds"].sum()
            ranks = comm["rank"].nunique()
            wait = (barrier.groupby("iteration").sum() / ranks).reindex(wait.index, fill_value=0.0)
        frames.append(
            pd.DataFrame(
                {
                    "run_id": run.run_id,
                    "method": run.method,
                    "model": run.model,
                    "iteration": steps["iteration"].to_numpy(),
                    "comm_s": steps["comm_s"].to_numpy() - wait.to_numpy(),
                    "wait_s": wait.to_numpy(),
                }
            )
        )
    df = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=SPEC.columns)
    return df, notes


def medians(df: pd.DataFrame) -> pd.Series:
    return df.groupby("method")["comm_s"].median()


def draw(df: pd.DataFrame, exp: Experiment) -> Figure:
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.2), width_ratios=[2.2, 1], layout="constrained")
    methods = sorted(df["method"].unique(), key=style.method_sort_key)
    med = medians(df)
    for run_id, g in df.groupby("run_id", sort=False):
        m = g["method"].iloc[0]
        run = exp.run(str(run_id))
        ax.plot(
            g["iteration"],
            g["comm_s"],
            lw=1.2,
            color=style.method_color(m),
            ls="-" if run.done else "--",
            label=f"{style.method_label(m)} (median {med[m]:.3g} s)",
        )
    data = [df[df["method"] == m]["comm_s"].to_numpy() for m in methods]
    box = bx.boxplot(data, patch_artist=True, showfliers=True, widths=0.6)
    for patch, m in zip(box["boxes"], methods, strict=True):
        patch.set_facecolor(style.method_color(m))
        patch.set_alpha(0.7)
    bx.set_xticks(range(1, len(methods) + 1), [style.method_label(m) for m in methods], rotation=20, ha="right")
    positive = df["comm_s"][df["comm_s"] > 0]
    log = len(positive) > 0 and positive.max() / max(positive.min(), 1e-12) > 100
    for a in (ax, bx):
        a.set_ylabel("communication time per iteration (s)")
        if log:
            a.set_yscale("log")
    ax.set_xlabel("iteration (DDP: optimizer step; ADMM: outer iteration)")
    handles, labels = ax.get_legend_handles_labels()
    uniq = dict(zip(labels, handles, strict=True))
    ax.legend(uniq.values(), uniq.keys(), fontsize=8)
    ax.set_title("per iteration")
    bx.set_title("distribution")
    fig.suptitle("Fig. 7: per-iteration communication latency")
    return fig


def summary(df: pd.DataFrame) -> str:
    med = medians(df)
    text = "median per iteration: " + ", ".join(
        f"{style.method_label(m)} {med[m]:.3g} s" for m in sorted(med.index, key=style.method_sort_key)
    )
    if "ddp" in med and "hsadmm" in med and med["hsadmm"] > 0:
        text += f"; DDP / PruneX = {med['ddp'] / med['hsadmm']:.2f}x"
    return text


SPEC = figure_spec(globals(), "latency", COLUMNS, CAPTION, ("hsadmm", "ddp", "flat_admm"))


if __name__ == "__main__":
    sys.exit(cli(SPEC))
