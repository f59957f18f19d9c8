"""Fig. 13: learned channel + filter masks of four convolution layers at 75% sparsity.

Paper claim (sec. 5.6.2): the masks show vertical (pruned input channel) and horizontal (pruned
filter) stripes, i.e. structured blocks that can be sliced physically. 75% sparsity = filter keep
0.5 x channel keep 0.5. The final global masks are logged to `final_masks.parquet`; the run is
exported (`export.json`: which of the masked filters and channels the compact model removes).

    python -m experiments.sparsity_patterns --profile local --results results
"""

from __future__ import annotations

from experiments import cli
from experiments.common import Profile, admm, run
from prunex.training.config import RunConfig

NAME = "sparsity_patterns"


def runs(p: Profile) -> list[RunConfig]:
    return [
        run(
            p,
            NAME,
            "hsadmm",
            f"hsadmm-{p.model}-filter0.5-channel0.5",
            admm=admm(p, filter_keep=0.5, channel_keep=0.5),
            export=True,
        )
    ]


if __name__ == "__main__":
    raise SystemExit(cli.main(NAME, runs, __doc__))
