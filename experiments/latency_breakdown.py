"""Fig. 8: share of PruneX's communication time per collective and level.

Paper claim (sec. 5.3.3, averaged over 64 GPUs): inter-node AllReduce 68.4%, intra-node AllReduce
17.8%, Broadcast 13.8%.

Its runs are the latency experiment's H-SADMM runs, one per `repeat_seeds` seed (the same trainings, shared,
not trained again), so that the report judges the shares per seed and gives their spread.

    python -m experiments.latency_breakdown --profile local --results results
"""

from __future__ import annotations

from experiments import cli
from experiments.common import Profile, run
from prunex.training.config import RunConfig

NAME = "latency_breakdown"


def runs(p: Profile) -> list[RunConfig]:
    # named as experiments.latency names them: seed 0 plain, the others -s<seed>
    return [
        run(p, NAME, "hsadmm", f"hsadmm-{p.model}" + (f"-s{seed}" if seed else ""), seed=seed)
        for seed in p.repeat_seeds
    ]


if __name__ == "__main__":
    raise SystemExit(cli.main(NAME, runs, __doc__))
