"""Fig. 9a: strong scaling speedup.

Strong-scaling speedup relative to the smallest GPU (process) count of each method.

    python -m analysis.fig9a_scaling_speedup --results results --out figures

The table (time per epoch, speedup, efficiency, model curves) is `analysis.scaling.scaling_table`,
shared with Fig. 9b.
"""

from __future__ import annotations

import sys

from analysis.common import cli
from analysis.scaling import scaling_figure

CAPTION = (
    "Time per epoch = training wall time / epochs completed (rank 0). Speedup relative to each "
    "method's smallest count; the paper's baseline is 8 GPUs (2 nodes), its largest count 64."
)
SPEC = scaling_figure(globals(), "speedup", CAPTION, suptitle="Fig. 9a: strong scaling, speedup")


if __name__ == "__main__":
    sys.exit(cli(SPEC))
