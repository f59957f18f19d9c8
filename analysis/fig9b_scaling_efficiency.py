"""Fig. 9b: strong-scaling parallel efficiency relative to the smallest GPU (process) count.

    python -m analysis.fig9b_scaling_efficiency --results results --out figures

Same data as Fig. 9a (analysis.scaling.scaling_table): efficiency = speedup / (N / N0),
measured points and, where RESULTS/perfmodel has a projection table, the model's curves.
"""

from __future__ import annotations

import sys

import pandas as pd
from matplotlib.figure import Figure

from analysis.common import Experiment, FigureSpec, cli
from analysis.scaling import (
    MODEL_CAPTION,
    SCALING_COLUMNS,
    draw_scaling,
    model_summary,
    scaling_summary,
    scaling_table,
    unit,
)


def _draw(df: pd.DataFrame, exp: Experiment) -> Figure:
    base = int(df["base_gpus"].min())
    fig = draw_scaling(df, exp, "efficiency_pct", f"parallel efficiency vs {base} {unit(exp)} (%)", "efficiency")
    fig.suptitle("Fig. 9b: strong scaling, parallel efficiency")
    return fig


SPEC = FigureSpec(
    name="fig9b_scaling_efficiency",
    experiment="strong_scaling",
    title="Fig. 9b: strong scaling efficiency",
    columns=SCALING_COLUMNS,
    compute=scaling_table,
    draw=_draw,
    summary=lambda df: (
        "efficiency: " + scaling_summary(df, "efficiency_pct", "%") + model_summary(df, "efficiency_pct", "%")
    ),
    caption_extra="Efficiency = speedup / (N / N0), N0 = each method's smallest count; the paper's N0 is 8 GPUs. "
    + MODEL_CAPTION,
    methods=("hsadmm", "ddp", "topk"),
)


if __name__ == "__main__":
    sys.exit(cli(SPEC))
