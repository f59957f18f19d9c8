"""Fig. 10: rank-wise residual convergence.

Rank-wise primal residuals of the fc layer and one convolution, intra- and inter-node.

    python -m analysis.fig10_residuals_ranks --results results --out figures

Reads `residuals/*/residuals.parquet` of one hsadmm run (the largest ResNet-152 run if there is
one, else the run with the most ranks). (a), (b): ||theta_ij - z_i||_F of every rank for fc and
the convolution; (c), (d): ||z_i - z||_F of every node leader (as in the text of sec. 5.5.1). The
convolution is layer2.5.conv2 (the paper's L2.5.C2) when the model has it, otherwise the last
second convolution of stage 2.
"""

from __future__ import annotations

import sys

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from analysis.common import Experiment, cli, figure_spec
from analysis.residuals import decay_decades, pick_conv, pick_fc, residuals_of

COLUMNS = ["run_id", "layer", "level", "rank", "node", "iteration", "primal"]
CAPTION = (
    "Primal residuals after each consensus (log scale). Intra: every rank; inter: node leaders "
    "(the only ranks holding z_i - z)."
)


def compute(exp: Experiment) -> tuple[pd.DataFrame, list[str]]:
    run, res, notes = residuals_of(exp)
    if run is None:
        return pd.DataFrame(columns=SPEC.columns), notes
    layers = list(dict.fromkeys(res["layer"]))
    chosen = [name for name in (pick_fc(layers), pick_conv(layers)) if name is not None]
    if len(chosen) < 2:
        notes.append("no fc layer or no convolution in the residuals table")
    sel = res[res["layer"].isin(chosen) & res["level"].isin(["intra", "inter"])]
    out = sel[["run_id", "layer", "level", "rank", "node", "iteration", "primal"]].sort_values(
        ["layer", "level", "rank", "iteration"], ignore_index=True
    )
    return out, notes


def panel_order(df: pd.DataFrame) -> list[tuple[str, str]]:
    layers = list(dict.fromkeys(df["layer"]))
    fc = pick_fc(layers)
    layers.sort(key=lambda n: n != fc)
    levels = [lv for lv in ("intra", "inter") if lv in set(df["level"])]
    return [(level, layer) for level in levels for layer in layers]


def draw(df: pd.DataFrame, exp: Experiment) -> Figure:
    panels = panel_order(df)
    rows = df["level"].nunique()
    cols = max(1, len(panels) // rows)
    fig, axes = plt.subplots(rows, cols, figsize=(5.5 * cols, 3.6 * rows), squeeze=False, layout="constrained")
    ranks = sorted(df["rank"].unique())
    palette = plt.get_cmap("viridis")(np.linspace(0.0, 0.9, max(len(ranks), 1)))
    colors = {r: palette[i] for i, r in enumerate(ranks)}
    for idx, (ax, (level, layer)) in enumerate(zip(axes.flat, panels, strict=False)):
        sub = df[(df["layer"] == layer) & (df["level"] == level)]
        for rank, g in sub.groupby("rank"):
            node = int(g["node"].iloc[0])
            who = f"rank {rank}" if level == "intra" else f"node {node} (leader rank {rank})"
            ax.plot(
                g["iteration"], g["primal"].clip(lower=1e-12), marker="o", ms=2.5, lw=1.3, color=colors[rank], label=who
            )
        ax.set_yscale("log")
        ax.set_xlabel("H-SADMM outer iteration")
        sym = r"$\|\theta_{ij} - z_i\|_F$" if level == "intra" else r"$\|z_i - z\|_F$"
        ax.set_ylabel(f"{level}-node primal residual {sym}")
        ax.set_title(f"({'abcd'[idx]}) {level}-node, {layer.removesuffix('.weight')}")
        if len(sub["rank"].unique()) <= 16:
            ax.legend(fontsize=7, ncol=2)
    fig.suptitle(f"Fig. 10: rank-wise primal residuals ({df['run_id'].iloc[0]})")
    return fig


def summary(df: pd.DataFrame) -> str:
    parts = []
    for level in ("intra", "inter"):
        d = decay_decades(df, level).dropna()
        if (df["level"] == level).any() and d.empty:
            parts.append(f"{level}-node residuals are zero (nothing to reconcile, e.g. one node)")
        elif len(d):
            parts.append(
                f"{level}-node residuals, log10(first / last) over ranks and layers: {d.min():.2f} to "
                f"{d.max():.2f} decades (positive = decay)"
            )
    return "; ".join(parts)


SPEC = figure_spec(globals(), "residuals", COLUMNS, CAPTION, ("hsadmm",))


if __name__ == "__main__":
    sys.exit(cli(SPEC))
