"""Fig. 6: inter-node volume. (a) message size per H-SADMM iteration, (b) total volume per model.

Paper claim (sec. 5.3.1, 64 V100, channel keep 0.5): ~60% less inter-node volume than dense DDP:
ResNet-18 2.53 -> 1.01 GB, WRN-50-2 14.88 -> 5.97 GB, ResNet-152 13.00 -> 5.21 GB; the ResNet-152
message starts at the dense ~220 MB and settles at ~40% of it.

    python -m experiments.volume --profile local --results results

Each method runs its profile's length (as `experiments.time_to_accuracy` says): a total volume is messages x
synchronisations, and H-SADMM's schedule (local and regime: 8 epochs, 96 SGD steps per rank on digits; DDP 6
epochs, 72 steps) is not DDP's. The claims' tolerances say so (`analysis.claims.table`).
"""

from __future__ import annotations

from experiments import cli
from experiments.common import Profile, run
from prunex.training.config import RunConfig

NAME = "volume"


def models(p: Profile) -> tuple[str, ...]:
    return ("resnet18", "resnet152", "wide_resnet50_2") if p.name == "paper" else (p.model,)


def runs(p: Profile) -> list[RunConfig]:
    return [run(p, NAME, m, f"{m}-{model}", model=model) for model in models(p) for m in ("hsadmm", "ddp")]


if __name__ == "__main__":
    raise SystemExit(cli.main(NAME, runs, __doc__))
