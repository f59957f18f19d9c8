"""Fig. 9: strong scaling from 8 to 64 GPUs (2 to 16 nodes of 4): speedup and efficiency.

Paper claim (sec. 5.4): relative to 8 GPUs, PruneX reaches 6.75x on 64 GPUs (84.4% efficiency),
DDP 5.81x (72.7%), Top-K 3.71x. Strong scaling: the same data per epoch and the same per-GPU
batch at every size, so each doubling halves the steps per epoch.

On the `local` profile the series is 1 and 2 emulated nodes of 2 processes on one 2-core machine:
the processes share the same cores, so it measures communication overheads, not speedup.

    python -m experiments.strong_scaling --profile local --results results
"""

from __future__ import annotations

from experiments import cli
from experiments.common import Profile, run
from prunex.training.config import RunConfig

NAME = "strong_scaling"
METHODS = ("hsadmm", "ddp", "topk")


def runs(p: Profile) -> list[RunConfig]:
    ppn = p.scale_procs_per_node or p.procs_per_node
    return [
        run(p, NAME, m, f"{m}-{p.model}-{n}x{ppn}", nodes=n, procs_per_node=ppn) for n in p.scale_nodes for m in METHODS
    ]


if __name__ == "__main__":
    raise SystemExit(cli.main(NAME, runs, __doc__))
