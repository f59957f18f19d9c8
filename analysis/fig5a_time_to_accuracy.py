"""Fig. 5a: test accuracy vs training wall time, with the paper's 70% target.

    python -m analysis.fig5a_time_to_accuracy --results results --out figures

Reads `time_to_accuracy/*/steps.parquet` (every method present). Wall time is training time only
(evaluation excluded, as logged by prunex.train); accuracy is rank 0's at each evaluation.
"""

from __future__ import annotations

import sys

import pandas as pd
from matplotlib.figure import Figure

from analysis.accuracy import curve_columns, curves_with_target, draw_curves, summary_line
from analysis.common import Experiment, FigureSpec, cli


def _draw(df: pd.DataFrame, exp: Experiment) -> Figure:
    fig = draw_curves(df, exp, "wall_min", "training wall time (min, evaluation excluded)")
    fig.suptitle("Fig. 5a: time to accuracy")
    return fig


SPEC = FigureSpec(
    name="fig5a_time_to_accuracy",
    experiment="time_to_accuracy",
    title="Fig. 5a: time to accuracy",
    columns=curve_columns("wall_min"),
    compute=curves_with_target,
    draw=_draw,
    summary=lambda df: summary_line(df, "wall_min", "min"),
    caption_extra="Accuracy: rank 0's test accuracy at each evaluation; dashed lines: partial runs. "
    "Minutes are not comparable across hardware: compare the ordering of the methods.",
    methods=("hsadmm", "ddp", "topk", "pactrain"),
)


if __name__ == "__main__":
    sys.exit(cli(SPEC))
