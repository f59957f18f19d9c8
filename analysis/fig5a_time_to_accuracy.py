"""Fig. 5a: time to accuracy.

Test accuracy vs training wall time, with the paper's 70% target.

    python -m analysis.fig5a_time_to_accuracy --results results --out figures

Reads `time_to_accuracy/*/steps.parquet` (every method present). Wall time is training time only
(evaluation excluded, as logged by prunex.training.train); accuracy is rank 0's at each evaluation.
"""

from __future__ import annotations

import sys

from analysis.accuracy import accuracy_figure
from analysis.common import cli

CAPTION = (
    "Accuracy: rank 0's test accuracy at each evaluation; dashed lines: partial runs. "
    "Minutes are not comparable across hardware: compare the ordering of the methods."
)
SPEC = accuracy_figure(globals(), "wall_min", "training wall time (min, evaluation excluded)", "min", CAPTION)


if __name__ == "__main__":
    sys.exit(cli(SPEC))
