"""Fig. 9b: strong scaling efficiency.

Strong-scaling parallel efficiency relative to the smallest GPU (process) count.

    python -m analysis.fig9b_scaling_efficiency --results results --out figures

Same data as Fig. 9a (analysis.scaling.scaling_table): efficiency = speedup / (N / N0),
measured points and, where RESULTS/perfmodel has a projection table, the model's curves.
"""

from __future__ import annotations

import sys

from analysis.common import cli
from analysis.scaling import scaling_figure

SPEC = scaling_figure(
    globals(),
    "efficiency_pct",
    "Efficiency = speedup / (N / N0), N0 = each method's smallest count; the paper's N0 is 8 GPUs.",
    suptitle="Fig. 9b: strong scaling, parallel efficiency",
)


if __name__ == "__main__":
    sys.exit(cli(SPEC))
