"""Run one training run of any method.

    python -m prunex.run --method ddp --model resnet20 --dataset digits \\
        --nodes 2 --procs-per-node 2 --executor local --results /tmp/r

Every field of the run configuration is an option (`prunex.cluster.options`, generated from
`prunex.training.config`'s dataclasses; `--help` lists them with their defaults): shared ones (--epochs
--batch-size --lr --seed --name --data-root ...), then each method's in a group: --grad-dtype (ddp),
--topk-ratio (topk), --density (pactrain), the ADMM and pruning options of hsadmm/flat_admm
(--iterations --local-epochs --channel-keep --filter-keep --shape-keep --freeze-iteration
--retrain-epochs --bucket-mb --rho-intra --rho-inter --momentum-policy --average-bn-stats ...), of
prune_finetune (--init-from --flops-from --flops-keep), the link model (--link-model
--inter-latency-s --inter-bw-gbit); --export exports and benches the final model after training.
Device and cluster: --device auto|cuda|cpu and the Slurm options of `prunex.cluster.slurm` (--site --account
--partition --time-min --gpus-per-node --gres --cpus-per-task --mem --sbatch KEY=VALUE --detach),
shared with the experiments. The configuration is validated before anything is launched: a bad
value is one line on stderr and exit code 2.

The run belongs to the job that trains it (`prunex.cluster.lock`): running the same command again while
its Slurm job lives reattaches to that job; while another launcher's local job trains it, the
command refuses (exit code 3) and says how to stop that job; a finished run is not run again. Ctrl-C
or SIGTERM cancels the job, waits until it is gone and ends with "interrupted after iteration K;
run the same command again to resume from the checkpoint" (exit code 130 or 143); with `--detach`
a Slurm job is left running instead, and the line says how to reattach or cancel it.
"""

from __future__ import annotations

import argparse
import sys

from prunex.cluster.exits import refuse
from prunex.cluster.interrupt import Interrupted, interruptible, last_signal
from prunex.cluster.launch import launch
from prunex.cluster.lock import LockHeld
from prunex.cluster.options import add_config_options, config_from_args
from prunex.cluster.rundir import experiment_path
from prunex.cluster.slurm import add_cluster_options, check_submission, slurm_options_from_args
from prunex.training.config import ArgumentParser, ConfigError


def build_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(prog="python -m prunex.run", description="Run one PruneX training run.")
    add_config_options(p)  # one option per configuration field (prunex.cluster.options)
    add_cluster_options(p)  # --device, --site, --account, ..., --detach (prunex.cluster.slurm)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        with interruptible():
            try:
                config = config_from_args(args)
                slurm = slurm_options_from_args(args)
                check_submission(config, slurm)  # no account, a torch that cannot run there: one line, nothing made
                run_dir = launch(config, slurm, detach=args.detach)
            except KeyboardInterrupt:  # before anything was submitted
                raise Interrupted("interrupted before anything was submitted", last_signal()) from None
    except (Interrupted, LockHeld, ConfigError, TypeError, RuntimeError) as e:
        return refuse(e, {LockHeld: 3, ConfigError: 2, TypeError: 2, RuntimeError: 1})
    print(f"logs: {experiment_path(config)} -> {run_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
