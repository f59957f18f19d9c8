"""Fig. 5: time to accuracy. (a) test accuracy against wall time, (b) against cumulative inter-node GB.

Paper claim (sec. 5.2, 64 V100, ResNet-152, CIFAR-10): PruneX crosses the 70% target in about
8 minutes; DDP reaches ~65% within the 14-minute window; Top-K ~50%. DDP accumulates over 60 GB
of inter-node traffic to reach its peak accuracy.

    python -m experiments.time_to_accuracy --profile local --results results

The one-machine profiles run it on their accuracy dataset (Fashion-MNIST: `Profile.accuracy_data`).

Budgets: each method runs its profile's length, as the paper's Fig. 5 does (curves over the same wall-clock
window), not an equal number of SGD steps: the SGD methods `Profile.epochs`, H-SADMM its ADMM schedule
(iterations x local epochs + retraining epochs). In local and regime that is 6 epochs against 8 (48 against 64
SGD steps per rank on 2,000 images), in paper 240 against up to 300. The claims compare accuracies at equal
wall-clock time (the common window) or the time to a target; a final accuracy of one method beside another's is
not a comparison between equals (that is the Pareto's job, `experiments.pareto`). PacTrain runs too, beside the
paper's three, and the Fig. 5 claims leave it out.
"""

from __future__ import annotations

from experiments import cli
from experiments.common import Profile, run
from prunex.training.config import RunConfig

NAME = "time_to_accuracy"
METHODS = ("hsadmm", "ddp", "topk", "pactrain")


def runs(p: Profile) -> list[RunConfig]:
    return [run(p, NAME, m, f"{m}-{p.model}", **p.accuracy_data()) for m in METHODS]


if __name__ == "__main__":
    raise SystemExit(cli.main(NAME, runs, __doc__))
