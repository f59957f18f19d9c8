"""bf16 on the wire (issue 18; not a result of the paper): H-SADMM's time-to-accuracy run with its compact
inter-node buckets in bf16 (`--wire-dtype bf16`, `prunex.comm.wire`) beside the same run in fp32, one pair
per seed of the profile's repeats (`local`: seed 0; `regime`: seeds 0, 1, 2, fixed before any run).

The fp32 run of seed 0 is time_to_accuracy's hsadmm run (the same training, trained once) where the profile
has no accuracy dataset of its own (smoke); the one-machine profiles run this comparison on their `dataset`
(digits: 8 evaluations of Fashion-MNIST's 10,000 test images per run would cost ~80 s each on the 2-core VM). The report
(`analysis.report`, "bf16 on the wire") sets the final test accuracies side by side against the target
of bf16 within 0.5 points of fp32. The paper's exchange is fp32: the paper profile has no such run and
`experiments.all` does not list this module; `./run_all.sh` runs it after the paper's experiments in the
local and regime profiles.

    python -m experiments.wire_dtype --profile local --results results
"""

from __future__ import annotations

from experiments import cli
from experiments.common import Profile, admm, run
from prunex.training.config import ConfigError, RunConfig

NAME = "wire_dtype"
WIRE_DTYPES = ("fp32", "bf16")


def runs(p: Profile) -> list[RunConfig]:
    if p.name == "paper":
        raise ConfigError(
            f"{NAME} is not a result of the paper (its exchange is fp32): run it with --profile local or regime"
        )
    out = []
    for seed in p.repeat_seeds:
        for w in WIRE_DTYPES:
            name = f"hsadmm-{p.model}-{w}" + (f"-s{seed}" if seed else "")
            out.append(run(p, NAME, "hsadmm", name, seed=seed, admm=admm(p, wire_dtype=w)))
    return out


if __name__ == "__main__":
    raise SystemExit(cli.main(NAME, runs, __doc__))
