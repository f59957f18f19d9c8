"""Fig. 12: test accuracy against channel pruning ratio for the three models.

Paper claim (sec. 5.6.1): ResNet-152 85.96% unpruned and 81.39% at 50% channel pruning (the
Fig. 12 caption says 82.8%); the drop exceeds 1 point by 20% and is ~3.8 points at 40%.

    python -m experiments.pareto --profile local --results results
"""

from __future__ import annotations

from experiments import cli
from experiments.common import Profile, admm, run
from experiments.volume import models
from prunex.config import RunConfig

NAME = "pareto"


def keep_rates(p: Profile) -> tuple[float, ...]:
    return {
        "paper": (1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1),
        "local": (1.0, 0.75, 0.5, 0.25),
        "smoke": (1.0, 0.5),
    }[p.name]


def runs(p: Profile) -> list[RunConfig]:
    return [
        run(p, NAME, "hsadmm", f"hsadmm-{model}-keep{keep:g}", model=model, admm=admm(p, channel_keep=keep))
        for model in models(p)
        for keep in keep_rates(p)
    ]


if __name__ == "__main__":
    raise SystemExit(cli.main(NAME, runs, __doc__))
