"""Fig. 5b: test accuracy vs cumulative inter-node communication volume.

    python -m analysis.fig5b_accuracy_vs_volume --results results --out figures

Reads `time_to_accuracy/*/steps.parquet`. The volume is the estimated bytes put on inter-node links,
summed over ranks (prunex/comm/volume.py), accumulated over every iteration up to the evaluation.
"""

from __future__ import annotations

import sys

import pandas as pd
from matplotlib.figure import Figure

from analysis.accuracy import curve_columns, curves_with_target, draw_curves, summary_line
from analysis.common import Experiment, FigureSpec, cli


def _draw(df: pd.DataFrame, exp: Experiment) -> Figure:
    fig = draw_curves(df, exp, "cum_inter_gb", "cumulative inter-node volume (GB, estimated, all ranks)")
    fig.suptitle("Fig. 5b: accuracy per inter-node byte")
    return fig


SPEC = FigureSpec(
    name="fig5b_accuracy_vs_volume",
    experiment="time_to_accuracy",
    title="Fig. 5b: accuracy vs cumulative inter-node volume",
    columns=curve_columns("cum_inter_gb"),
    compute=curves_with_target,
    draw=_draw,
    summary=lambda df: summary_line(df, "cum_inter_gb", "GB"),
    caption_extra="Volume: bytes crossing node boundaries, modelled as rings over each group (prunex/comm/volume.py), "
    "summed over ranks and iterations. 1 GB = 1e9 bytes. Dashed lines: partial runs.",
    methods=("hsadmm", "ddp", "topk", "pactrain"),
)


if __name__ == "__main__":
    sys.exit(cli(SPEC))
