"""Fig. 7: per-iteration communication latency of PruneX, DDP and PruneX (AR).

Paper claim (sec. 5.3.2, 64 V100, ResNet-152): DDP ~0.50 s per iteration, PruneX ~0.10 s (5x);
the flat-consensus ablation PruneX (AR) shows high variance and latency spikes.

A profile with several `repeat_seeds` (`regime`: 0, 1, 2, fixed before any run) trains each method
once per seed; seed 0 keeps the plain name (in the paper and smoke profiles the same training as
time_to_accuracy's, which the one-machine profiles run on Fashion-MNIST instead), the others are named
`-s<seed>`. The report measures the claims per seed and gives the spread.

    python -m experiments.latency --profile local --results results
"""

from __future__ import annotations

from experiments import cli
from experiments.common import Profile, run
from prunex.training.config import RunConfig

NAME = "latency"


def runs(p: Profile) -> list[RunConfig]:
    return [
        run(p, NAME, m, f"{m}-{p.model}" + (f"-s{seed}" if seed else ""), seed=seed)
        for seed in p.repeat_seeds
        for m in ("hsadmm", "ddp", "flat_admm")
    ]


if __name__ == "__main__":
    raise SystemExit(cli.main(NAME, runs, __doc__))
