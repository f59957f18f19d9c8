"""Fig. 7: per-iteration communication latency of PruneX, DDP and PruneX (AR).

Paper claim (sec. 5.3.2, 64 V100, ResNet-152): DDP ~0.50 s per iteration, PruneX ~0.10 s (5x);
the flat-consensus ablation PruneX (AR) shows high variance and latency spikes.

    python -m experiments.latency --profile local --results results
"""

from __future__ import annotations

from experiments import cli
from experiments.common import Profile, run
from prunex.config import RunConfig

NAME = "latency"


def runs(p: Profile) -> list[RunConfig]:
    return [run(p, NAME, m, f"{m}-{p.model}") for m in ("hsadmm", "ddp", "flat_admm")]


if __name__ == "__main__":
    raise SystemExit(cli.main(NAME, runs, __doc__))
