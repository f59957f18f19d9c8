"""Fig. 9a: strong-scaling speedup relative to the smallest GPU (process) count of each method.

    python -m analysis.fig9a_scaling_speedup --results results --out figures

The table (time per epoch, speedup, efficiency, model curves) is `analysis.scaling.scaling_table`,
shared with Fig. 9b.
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
    fig = draw_scaling(df, exp, "speedup", f"speedup over the smallest count ({base} {unit(exp)}) (x)", "speedup")
    fig.suptitle("Fig. 9a: strong scaling, speedup")
    return fig


SPEC = FigureSpec(
    name="fig9a_scaling_speedup",
    experiment="strong_scaling",
    title="Fig. 9a: strong scaling speedup",
    columns=SCALING_COLUMNS,
    compute=scaling_table,
    draw=_draw,
    summary=lambda df: "speedup: " + scaling_summary(df, "speedup", "x") + model_summary(df, "speedup", "x"),
    caption_extra="Time per epoch = training wall time / epochs completed (rank 0). Speedup relative to each "
    "method's smallest count; the paper's baseline is 8 GPUs (2 nodes), its largest count 64. " + MODEL_CAPTION,
    methods=("hsadmm", "ddp", "topk"),
)


if __name__ == "__main__":
    sys.exit(cli(SPEC))
