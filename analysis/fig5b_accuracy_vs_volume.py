"""Fig. 5b: accuracy vs cumulative inter-node volume.

Test accuracy vs cumulative inter-node communication volume.

    python -m analysis.fig5b_accuracy_vs_volume --results results --out figures

Reads `time_to_accuracy/*/steps.parquet`. The volume is the estimated bytes put on inter-node links,
summed over ranks (prunex/comm/volume.py), accumulated over every iteration up to the evaluation.
"""

from __future__ import annotations

import sys

from analysis.accuracy import accuracy_figure
from analysis.common import cli

CAPTION = (
    "Volume: bytes crossing node boundaries, modelled as rings over each group (prunex/comm/volume.py), "
    "summed over ranks and iterations. 1 GB = 1e9 bytes. Dashed lines: partial runs."
)
SPEC = accuracy_figure(
    globals(),
    "cum_inter_gb",
    "cumulative inter-node volume (GB, estimated, all ranks)",
    "GB",
    CAPTION,
    suptitle="Fig. 5b: accuracy per inter-node byte",
)


if __name__ == "__main__":
    sys.exit(cli(SPEC))
