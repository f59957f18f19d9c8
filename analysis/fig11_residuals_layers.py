"""Fig. 11: layer-wise primal residuals.

Total primal residual of the five layers with the largest residuals.

    python -m analysis.fig11_residuals_layers --results results --out figures

Reads `residuals/*/residuals.parquet` of one hsadmm run (chosen as in Fig. 10). The total primal
residual of a layer at an iteration is the norm over the whole cluster of its consensus violations,
sqrt(sum over ranks ||theta_ij - z_i||^2 + sum over node leaders ||z_i - z||^2). Layers are the
convolution and fc weights (BatchNorm parameters and biases are left out); the top five are those
with the largest peak total residual.
"""

from __future__ import annotations

import sys

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from analysis import style
from analysis.common import Experiment, cli, figure_spec
from analysis.residuals import is_weight_layer, pick_fc, residuals_of

COLUMNS = ["run_id", "layer", "top_rank", "iteration", "total_primal"]
CAPTION = (
    "Total primal residual = sqrt(sum_ranks ||theta_ij - z_i||^2 + sum_leaders ||z_i - z||^2) per layer; "
    "fc in blue as in the paper."
)

TOP = 5


def compute(exp: Experiment) -> tuple[pd.DataFrame, list[str]]:
    run, res, notes = residuals_of(exp)
    if run is None:
        return pd.DataFrame(columns=SPEC.columns), notes
    res = res[res["level"].isin(["intra", "inter"])]
    weights = res[res["layer"].map(is_weight_layer)]
    if weights.empty:
        notes.append("no convolution or fc weights among the residual layers: all parameters ranked")
        weights = res
    total = (
        weights.assign(sq=weights["primal"] ** 2)
        .groupby(["layer", "iteration"])["sq"]
        .sum()
        .pow(0.5)
        .rename("total_primal")
        .reset_index()
    )
    peak = total.groupby("layer")["total_primal"].max().sort_values(ascending=False)
    top = list(peak.index[:TOP])
    out = total[total["layer"].isin(top)].copy()
    out["top_rank"] = out["layer"].map({n: i + 1 for i, n in enumerate(top)})
    out.insert(0, "run_id", run.run_id)
    out = out.sort_values(["top_rank", "iteration"], ignore_index=True)
    return out, notes


def draw(df: pd.DataFrame, exp: Experiment) -> Figure:
    fig, ax = plt.subplots(figsize=(7.5, 4.5), layout="constrained")
    layers = list(dict.fromkeys(df.sort_values("top_rank")["layer"]))
    fc = pick_fc(layers)
    others = plt.get_cmap("autumn")(np.linspace(0.0, 0.8, max(len(layers), 1)))
    for i, layer in enumerate(layers):
        g = df[df["layer"] == layer].sort_values("iteration")
        color = style.FC_LAYER_COLOR if layer == fc else others[i]
        ax.plot(
            g["iteration"],
            g["total_primal"].clip(lower=1e-12),
            marker="o",
            ms=3,
            lw=1.6,
            color=color,
            label=f"#{int(g['top_rank'].iloc[0])} {layer.removesuffix('.weight')}",
        )
    ax.set_yscale("log")
    ax.set_xlabel("H-SADMM outer iteration")
    ax.set_ylabel("total primal residual (Frobenius norm)")
    ax.legend(fontsize=8, title="layer (rank by peak)", title_fontsize=8)
    ax.set_title(f"Fig. 11: layer-wise total primal residuals, top {TOP} ({df['run_id'].iloc[0]})")
    return fig


def summary(df: pd.DataFrame) -> str:
    parts = []
    for layer, g in df.sort_values("top_rank").groupby("layer", sort=False):
        g = g.sort_values("iteration")
        first, last = float(g["total_primal"].iloc[0]), float(g["total_primal"].iloc[-1])
        ratio = f"{np.log10(first / last):.2f} decades" if first > 0 and last > 0 else "n/a"
        parts.append(f"{str(layer).removesuffix('.weight')} {first:.3g} -> {last:.3g} ({ratio})")
    return "top layers, first -> last total residual: " + "; ".join(parts)


SPEC = figure_spec(globals(), "residuals", COLUMNS, CAPTION, ("hsadmm",))


if __name__ == "__main__":
    sys.exit(cli(SPEC))
