"""Run one training run of any method.

    python -m prunex.run --method ddp --model resnet20 --dataset digits \\
        --nodes 2 --procs-per-node 2 --executor local --results /tmp/r

Options shared by every method: --epochs --batch-size --lr --seed --name --data-root. Method
options: --grad-dtype (ddp), --topk-ratio (topk), --density (pactrain), and the ADMM and pruning
options of hsadmm/flat_admm (--iterations --local-epochs --channel-keep --filter-keep
--shape-keep --freeze-iteration --retrain-epochs --bucket-mb --rho-intra --rho-inter
--momentum-policy --average-bn-stats), of prune_finetune (--init-from --flops-from --flops-keep);
--export exports and benches the final model after training. Device and cluster: --device
auto|cuda|cpu and the Slurm options of `prunex.slurm` (--site --account --partition --time-min
--gpus-per-node --gres --cpus-per-task --mem --sbatch KEY=VALUE). The
configuration is validated before anything is launched: a bad value is one line on stderr and
exit code 2.

The run belongs to the job that trains it (`prunex.lock`): running the same command again while
its Slurm job lives reattaches to that job; while another launcher's local job trains it, the
command refuses (exit code 3) and says how to stop that job; a finished run is not run again. Ctrl-C
or SIGTERM cancels the job, waits until it is gone and ends with "interrupted after iteration K;
run the same command again to resume from the checkpoint" (exit code 130 or 143); with `--detach`
a Slurm job is left running instead, and the line says how to reattach or cancel it.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

from prunex.config import (
    ADMMConfig,
    ArgumentParser,
    ConfigError,
    DDPConfig,
    LinkConfig,
    PacTrainConfig,
    PruneFinetuneConfig,
    RunConfig,
    TopKConfig,
)
from prunex.interrupt import Interrupted, interruptible, last_signal
from prunex.launch import experiment_path, launch
from prunex.lock import LockHeld
from prunex.slurm import add_cluster_options, check_submission, slurm_options_from_args

# command-line option -> (nested config, field)
_NESTED_OPTIONS = {
    "iterations": ("admm", "iterations"),
    "local_epochs": ("admm", "local_epochs"),
    "channel_keep": ("admm", "channel_keep"),
    "filter_keep": ("admm", "filter_keep"),
    "shape_keep": ("admm", "shape_keep"),
    "layers": ("admm", "layers"),
    "freeze_iteration": ("admm", "freeze_iteration"),
    "freeze_patience": ("admm", "freeze_patience"),
    "retrain_epochs": ("admm", "retrain_epochs"),
    "bucket_mb": ("admm", "bucket_mb"),
    "rho_intra": ("admm", "rho_intra"),
    "rho_inter": ("admm", "rho_inter"),
    "rho_max": ("admm", "rho_max"),
    "momentum_policy": ("admm", "momentum_policy"),
    "average_bn_stats": ("admm", "average_bn_stats"),
    "wire_dtype": ("admm", "wire_dtype"),
    "pipeline_buckets": ("admm", "pipeline_buckets"),
    "inter_exchange": ("admm", "inter_exchange"),
    "grad_dtype": ("ddp", "grad_dtype"),
    "topk_ratio": ("topk", "ratio"),
    "topk_warmup_epochs": ("topk", "warmup_epochs"),
    "topk_momentum_correction": ("topk", "momentum_correction"),
    "density": ("pactrain", "density"),
    "prune_epochs": ("pactrain", "prune_epochs"),
    "prune_every": ("pactrain", "prune_every"),
    "init_from": ("prune_finetune", "init_from"),
    "flops_from": ("prune_finetune", "flops_from"),
    "flops_keep": ("prune_finetune", "flops_keep"),
    "link_model": ("link", "model"),
    "inter_latency_s": ("link", "alpha_s"),
    "inter_bw_gbit": ("link", "bandwidth_gbit"),
}
_NESTED_TYPES = {
    "admm": ADMMConfig,
    "ddp": DDPConfig,
    "topk": TopKConfig,
    "pactrain": PacTrainConfig,
    "prune_finetune": PruneFinetuneConfig,
    "link": LinkConfig,
}


def build_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(prog="python -m prunex.run", description="Run one PruneX training run.")
    p.add_argument("--method", required=True)
    p.add_argument("--model", default="resnet20")
    p.add_argument("--dataset", default="digits")
    p.add_argument("--data-root", default="")
    p.add_argument("--nodes", type=int, default=1)
    p.add_argument("--procs-per-node", type=int, default=1)
    p.add_argument("--executor", default="local")
    p.add_argument("--results", default="results")
    p.add_argument("--experiment", default="adhoc", help="directory level above the run")
    p.add_argument("--name", default="", help="run name (part of its run_id and directory)")
    p.add_argument("--epochs", type=int)
    p.add_argument("--batch-size", type=int)
    p.add_argument("--lr", type=float)
    p.add_argument("--momentum", type=float)
    p.add_argument("--weight-decay", type=float)
    p.add_argument("--seed", type=int)
    p.add_argument("--eval-every", type=int)
    p.add_argument("--bn-batches", type=int, help="BatchNorm re-estimation batches before evaluating (0: off)")
    p.add_argument("--num-workers", type=int)
    p.add_argument("--train-subset", type=int, help="use only the first n training images")
    p.add_argument("--collective-timeout-s", type=float)
    p.add_argument(
        "--checkpoint-every-min",
        type=float,
        help="minutes between checkpoints, taken at the next evaluation point (default 20; 0: at every one)",
    )
    p.add_argument(
        "--detach",
        action="store_true",
        help="on Ctrl-C/SIGTERM leave the Slurm job running (default: cancel it); run again to reattach",
    )
    g = p.add_argument_group("method options")
    for opt in (
        "iterations",
        "local_epochs",
        "freeze_iteration",
        "freeze_patience",
        "retrain_epochs",
        "topk_warmup_epochs",
        "prune_epochs",
        "prune_every",
    ):
        g.add_argument("--" + opt.replace("_", "-"), type=int)
    for opt in (
        "channel_keep",
        "filter_keep",
        "shape_keep",
        "bucket_mb",
        "rho_intra",
        "rho_inter",
        "rho_max",
        "topk_ratio",
        "density",
        "inter_latency_s",
        "inter_bw_gbit",
        "flops_keep",
    ):
        g.add_argument("--" + opt.replace("_", "-"), type=float)
    g.add_argument("--layers", help="fnmatch glob of the constrained parameter names")
    g.add_argument("--momentum-policy", help="ADMM: SGD momentum across outer iterations, carry (default) or reset")
    g.add_argument(
        "--average-bn-stats",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="ADMM: average BatchNorm statistics at every consensus (default: only with --bn-batches 0)",
    )
    g.add_argument("--grad-dtype", choices=["fp32", "bf16", "fp16"])
    g.add_argument("--wire-dtype", choices=["fp32", "bf16", "fp16"], help="hsadmm: compact inter-node buckets' type")
    g.add_argument("--inter-exchange", choices=["leader", "sharded"], help="hsadmm: compact buckets across nodes")
    g.add_argument("--pipeline-buckets", action=argparse.BooleanOptionalAction, default=None, help="hsadmm, default on")
    g.add_argument("--topk-momentum-correction", action="store_true", default=None)
    g.add_argument("--link-model", help="none, alpha-beta or netns-tc")
    g.add_argument("--init-from", help="prune_finetune: run (same experiment) whose final model is pruned")
    g.add_argument("--flops-from", help="prune_finetune: run whose exported FLOPs fraction is the target")
    p.add_argument(
        "--export",
        action="store_true",
        default=None,
        help="after training: export the compact model and bench inference (prunex.export, prunex.bench.inference)",
    )
    add_cluster_options(p)  # --device, --site, --account, ... (prunex.slurm)
    return p


def config_from_args(args: argparse.Namespace) -> RunConfig:
    """A validated RunConfig from parsed options (unset options keep the config's defaults)."""
    top = {f.name for f in dataclasses.fields(RunConfig)}
    kwargs = {k: v for k, v in vars(args).items() if k in top and v is not None}
    nested: dict[str, dict] = {}
    for opt, (section, field_name) in _NESTED_OPTIONS.items():
        value = getattr(args, opt, None)
        if value is not None:
            nested.setdefault(section, {})[field_name] = value
    for section, values in nested.items():
        kwargs[section] = _NESTED_TYPES[section](**values)
    return RunConfig(**kwargs)


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
    except Interrupted as e:
        print(str(e), file=sys.stderr)
        return e.exit_code
    except LockHeld as e:
        print(f"error: {e}", file=sys.stderr)
        return 3
    except (ConfigError, TypeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except RuntimeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"logs: {experiment_path(config)} -> {run_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
