"""Fig. 12: test accuracy against the achieved size of the exported model, H-SADMM vs prune-then-finetune.

Paper claim (sec. 5.6.1): ResNet-152 85.96% unpruned and 81.39% at 50% channel pruning (the
Fig. 12 caption says 82.8%); the drop exceeds 1 point by 20% and is ~3.8 points at 40%.

    python -m experiments.pareto --profile local --results results

Runs, per model:
- `hsadmm-MODEL-keepK`: H-SADMM at every nominal channel keep rate K of the profile;
- `ddp-MODEL-dense`: the dense model, DDP with the profile's SGD budget;
- `ptf-MODEL-keepK` (K < 1): prune-then-finetune (`prunex.methods.prune_finetune`): the dense
  model pruned once by filter L1 norms to the FLOPs that `hsadmm-MODEL-keepK`'s exported model
  achieved, then fine-tuned with DDP for H-SADMM's retraining budget (`retrain_epochs`): the
  epochs H-SADMM trains with its mask frozen, (iterations - T_freeze) x local epochs + masked
  retraining epochs (at least 1). It starts after the runs it depends on (`experiments.cli`).

Every run is exported and benched after training (`--export`: `export.json`, `model_compact.pt2`,
`inference.parquet` in its directory), in every profile.
"""

from __future__ import annotations

from experiments import cli
from experiments.common import Profile, admm, run
from experiments.volume import models
from prunex.config import PruneFinetuneConfig, RunConfig

NAME = "pareto"


def keep_rates(p: Profile) -> tuple[float, ...]:
    return {
        "paper": (1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1),
        "local": (1.0, 0.75, 0.5, 0.25),
        "regime": (1.0, 0.75, 0.5, 0.25),
        "smoke": (1.0, 0.5),
    }[p.name]


def retrain_epochs(p: Profile) -> int:
    """Epochs H-SADMM trains with its mask frozen: the fine-tuning budget of prune-then-finetune."""
    a = p.admm
    return max(1, max(a.iterations - a.freeze_iteration, 0) * a.local_epochs + a.retrain_epochs)


def runs(p: Profile) -> list[RunConfig]:
    out = []
    for model in models(p):
        dense = f"ddp-{model}-dense"
        out += [
            run(p, NAME, "hsadmm", f"hsadmm-{model}-keep{k:g}", model=model, admm=admm(p, channel_keep=k), export=True)
            for k in keep_rates(p)
        ]
        out.append(run(p, NAME, "ddp", dense, model=model, export=True))
        out += [
            run(
                p,
                NAME,
                "prune_finetune",
                f"ptf-{model}-keep{k:g}",
                model=model,
                epochs=retrain_epochs(p),
                init_from=dense,
                prune_finetune=PruneFinetuneConfig(flops_from=f"hsadmm-{model}-keep{k:g}"),
                export=True,
            )
            for k in keep_rates(p)
            if k < 1
        ]
    return out


if __name__ == "__main__":
    raise SystemExit(cli.main(NAME, runs, __doc__))
