"""Figs. 10 and 11: rank-wise intra/inter-node primal residuals and layer-wise residuals.

Paper claim (sec. 5.5, ResNet-152): intra-node residuals of the fc layer and a conv layer fall
monotonically on every rank from ~1e0 to ~1e-2; inter-node residuals fall as leaders agree; the
layer-wise totals of the top-5 layers decay at different rates. Mask drift reaches zero within
5-15 iterations (sec. 4.5).

    python -m experiments.residuals --profile local --results results
"""

from __future__ import annotations

from experiments import cli
from experiments.common import Profile, admm, run
from prunex.training.config import RunConfig

NAME = "residuals"


def runs(p: Profile) -> list[RunConfig]:
    # no early stop: the residual trajectory over the whole outer loop is the result
    return [run(p, NAME, "hsadmm", f"hsadmm-{p.model}", admm=admm(p, stop_on_convergence=False))]


if __name__ == "__main__":
    raise SystemExit(cli.main(NAME, runs, __doc__))
