"""Local SGD (periodic model averaging) registered as a method of your own: the example of
docs/methods-of-your-own.md.

Every rank takes `PERIOD` SGD steps on its own shard, then the ranks average their parameters with one flat
AllReduce (Stich 2019, "Local SGD converges fast and communicates little"; Lin et al. 2020, "Don't use large
mini-batches, use local SGD"). A communication-efficient baseline of the kind a researcher compares against
PruneX: it sends DDP's bytes once every `PERIOD` steps instead of every step.

    PRUNEX_METHODS=examples.local_sgd python -m prunex.run --method local_sgd --nodes 2 --procs-per-node 2 \\
        --executor local --results /tmp/r

A second name, ``local_sgd_epoch``, averages at each epoch's end only (the local SGD control of
`benchmarks.pruned`); a third, ``local_sgd_epoch_on_mask``, does so on another run's final mask (`--mask-from
RUN`, a diagnostic of `benchmarks.pruned --localsgd-on-hsadmm-mask`). This module only registers the methods: it
is imported wherever the registry is (launchers, analysis) and stays torch-free; `examples.local_sgd.method` holds
the implementation, imported by the ranks.
"""

from __future__ import annotations

from prunex.methods.registry import MethodInfo, register

PERIOD = 8  # local SGD steps between two averagings; an epoch's last step always averages (see method.py)

register(
    MethodInfo(
        name="local_sgd",
        label="Local SGD (example)",
        color="#17becf",  # cyan: no paper method has it
        implementation="examples.local_sgd.method:LocalSGD",
        outer_iterations=False,  # one logged iteration is one SGD step
        # the performance model prices it as DDP: one AllReduce of every gradient per step, PERIOD x what it
        # sends; an upper bound, which is what the Slurm time limits it feeds need
        workload="ddp",
        summary=f"flat AllReduce (average) of all parameters every {PERIOD} local steps and at each epoch's end",
        reads=(),  # no nested configuration of RunConfig: its one setting is PERIOD above
    )
)
# A second value of the setting is a second name (docs/methods-of-your-own.md, "Limits"): averaging at each
# epoch's end only, one round per epoch as H-SADMM's with one local epoch per outer iteration. It is the control
# of `benchmarks.pruned` that prices periodic averaging alone, without ADMM's proximal pull and duals.
register(
    MethodInfo(
        name="local_sgd_epoch",
        label="Local SGD, once per epoch (example)",
        color="#9edae5",  # light cyan, beside local_sgd's
        implementation="examples.local_sgd.method:LocalSGDPerEpoch",
        outer_iterations=False,
        workload="ddp",
        summary="flat AllReduce (average) of all parameters at each epoch's end",
        reads=(),
    )
)
# A third: the second on another run's final mask (`--mask-from RUN`, prune-then-finetune's option), the pruned
# weights kept at zero after every step; `benchmarks.pruned --localsgd-on-hsadmm-mask` runs it on H-SADMM's mask.
register(
    MethodInfo(
        name="local_sgd_epoch_on_mask",
        label="Local SGD, once per epoch, on a given mask (example)",
        color="#0b7285",  # dark cyan, beside local_sgd's
        implementation="examples.local_sgd.method:LocalSGDPerEpochOnMask",
        outer_iterations=False,
        workload="ddp",
        summary="flat AllReduce (average) of all parameters at each epoch's end, on another run's final mask",
        reads=("prune_finetune",),  # its mask_from
    )
)
