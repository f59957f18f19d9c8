"""Command line of `prunex.perfmodel`: validate, validate-iterations, project, loopback, cluster-from-sweep
(package docstring)."""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import replace
from pathlib import Path

from prunex.cluster.options import comma_list
from prunex.cluster.preflight import check_writable
from prunex.perfmodel.calibrate import (
    COMPUTE_STATS,
    SWEEP_TIMES,
    CalibrationError,
    load_cluster,
    measure_loopback,
    read_fit_table,
)
from prunex.perfmodel.formulas import Link
from prunex.perfmodel.iterations import CSV_NAME, format_iteration_table, validate_iterations
from prunex.perfmodel.measured import cluster_from_sweep, device_of, model_compute_per_sample
from prunex.perfmodel.project import format_projection, gpu_series, plot_projection, project, with_overrides
from prunex.perfmodel.validate import format_breakdown, format_table, plot_validation, validate, validate_by_op
from prunex.perfmodel.workload import Options
from prunex.training.config import DATASET_DEFAULTS, ADMMConfig, RunConfig, TopKConfig
from prunex.training.log import write_parquet

SWEEP_TIME_HELP = (
    "which time per sweep call the links are fitted on: the slowest member's (the sweep's own fit; default) or "
    "the last-arriving member's (needs a sweep that recorded seconds_last; leaves out the skew with which members "
    "leave the sweep's barrier)"
)


def _validate(args: argparse.Namespace) -> int:
    fit = read_fit_table(args.collectives, args.sweep_time) if args.collectives else None
    if fit is not None:
        print(f"collective sweep {args.collectives}: fitted on {fit['time_stat'].iloc[0]} times")
    loopback = None
    if args.measure_loopback:
        meas, lfit = measure_loopback(procs=args.loopback_procs)
        row = lfit[lfit["op"] == "allreduce"].iloc[0]
        steps = 2 * (args.loopback_procs - 1)
        loopback = Link(float(row["alpha_s"]) / steps, float(row["beta_bytes_per_s"]))
        print(
            f"measured loopback ({args.loopback_procs} processes): alpha {loopback.alpha_s * 1e6:.1f} us/step, "
            f"beta {loopback.beta / 1e9:.3f} GB/s, r2 {row['r2']:.3f}"
        )
    elif args.loopback_alpha_s is not None or args.loopback_beta is not None:
        if args.loopback_alpha_s is None or args.loopback_beta is None:
            raise CalibrationError("give both --loopback-alpha-s and --loopback-beta")
        loopback = Link(args.loopback_alpha_s, args.loopback_beta)
    df = validate(args.results, fit, loopback, args.tolerance)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    by_op = validate_by_op(args.results, fit, loopback)
    df.to_csv(out / "validation.csv", index=False)
    by_op.to_csv(out / "validation_by_op.csv", index=False)
    plot_validation(df, out / "validation.png", args.tolerance)
    print(format_table(df))
    print(format_breakdown(by_op))
    print(f"wrote {out / 'validation.csv'}, {out / 'validation_by_op.csv'} and {out / 'validation.png'}")
    return 1 if args.strict and not bool(df["within"].all()) else 0


def _validate_iterations(args: argparse.Namespace) -> int:
    fit = read_fit_table(args.collectives, args.sweep_time) if args.collectives else None
    if fit is not None:
        print(f"collective sweep {args.collectives}: fitted on {fit['time_stat'].iloc[0]} times")
    cluster = load_cluster(args.cluster) if args.cluster else None
    df = validate_iterations(
        args.results,
        fit,
        cluster=cluster,
        compute_runs=args.compute_from_run,
        procs_per_node=args.procs_per_node or None,
        min_nodes=args.min_nodes,
        tolerance=args.tolerance,
        compute_stat=args.compute_stat,
    )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    df.to_csv(out / CSV_NAME, index=False)
    print(format_iteration_table(df, args.tolerance))
    print(f"wrote {out / CSV_NAME}")
    return 1 if args.strict and not bool(df["within"].all()) else 0


def check_values(args: argparse.Namespace) -> None:
    """The numbers the subcommands read, before anything is read or measured (2026-12-08: `--tolerance -1` judged
    every prediction a miss and a NaN one too, `--min-nodes 0` and `--procs-per-node -1` failed on what they
    selected, a negative loopback rate was fitted with)."""
    tolerance = getattr(args, "tolerance", None)
    if tolerance is not None and not (0.0 < tolerance < math.inf):
        raise ValueError(f"--tolerance must be a positive finite relative error (0.15: 15%), got {tolerance!r}")
    alpha, beta = getattr(args, "loopback_alpha_s", None), getattr(args, "loopback_beta", None)
    if alpha is not None and not 0.0 <= alpha < math.inf:
        raise ValueError(f"--loopback-alpha-s must be >= 0 and finite, got {alpha!r}")
    if beta is not None and not 0.0 < beta < math.inf:
        raise ValueError(f"--loopback-beta must be positive and finite, got {beta!r}")
    if getattr(args, "min_nodes", 1) < 1:
        raise ValueError(f"--min-nodes must be >= 1, got {args.min_nodes}")
    procs = getattr(args, "procs_per_node", None)
    least = 0 if args.cmd == "validate-iterations" else 1  # validate-iterations: 0 for any
    if procs is not None and procs < least:
        raise ValueError(f"--procs-per-node must be >= {least}, got {procs}")


def project_options(args: argparse.Namespace) -> Options:
    """The projected runs' options: `Options.from_config` of the `RunConfig` the options describe, so
    what is left unset takes the run defaults (the dataset's batch size, the paper's ADMM settings; a
    dataset only a cluster file knows takes CIFAR-10's); ``--dynamic-fraction`` overrides the share of
    iterations with a dynamic mask that the config's T_freeze implies."""
    admm = {"local_epochs": args.local_epochs, "channel_keep": args.channel_keep, "filter_keep": args.filter_keep}
    cfg = RunConfig(
        method="hsadmm",
        model=args.model,
        dataset=args.dataset if args.dataset in DATASET_DEFAULTS else "cifar10",
        batch_size=args.batch_size,
        admm=ADMMConfig(**{k: v for k, v in admm.items() if v is not None}),
        topk=TopKConfig() if args.topk_ratio is None else TopKConfig(ratio=args.topk_ratio),
    )
    opts = Options.from_config(cfg, ddp_overlap=args.ddp_overlap)
    return opts if args.dynamic_fraction is None else replace(opts, dynamic_fraction=args.dynamic_fraction)


def _project(args: argparse.Namespace) -> int:
    cluster = with_overrides(load_cluster(args.cluster), args.inter_beta_scale)
    opts = project_options(args)
    counts = comma_list(args.gpus, "--gpus", int)
    if args.extend_to < 0:
        raise ValueError(f"--extend-to must be >= 0 (0: no doubling), got {args.extend_to}")
    try:
        gpus = gpu_series(counts, args.extend_to)  # refuses counts below 1
    except ValueError as e:
        raise ValueError(f"--gpus {args.gpus!r}: {e}") from None
    methods = comma_list(args.methods, "--methods")
    per_sample = args.compute_s_per_sample
    if per_sample is not None and not (0.0 < per_sample < math.inf):  # a projection was made of it (2026-12-08)
        raise ValueError(f"--compute-s-per-sample must be a positive finite number of seconds, got {per_sample!r}")
    if args.compute_from_run:
        # forward, backward and step, as a cluster file's compute per sample: the run's logged compute less its
        # method's own work, which the projection adds back for each method (`measured.model_compute_per_sample`)
        per_sample = model_compute_per_sample(args.compute_from_run, cluster.mem_bw, cluster.launch_s)
        print(
            f"compute per sample from {args.compute_from_run} (less its method's own work): {per_sample * 1e3:.4f} ms"
        )
    df = project(cluster, args.model, args.dataset, methods, gpus, opts, per_sample)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"projection_{Path(cluster.path).stem or cluster.name}_{args.model}"
    df.to_csv(out / f"{stem}.csv", index=False)
    plot_projection(
        df,
        out / f"{stem}.png",
        f"{cluster.name}: {args.model}, {args.dataset}, batch "
        f"{opts.batch_size}/GPU, channel keep {opts.channel_keep}, E = {opts.local_epochs}",
    )
    print(format_projection(df, cluster))
    print("assumptions:")
    for note in cluster.assumptions:
        print(f"  - {note}")
    print(f"wrote {out / (stem + '.csv')} and {out / (stem + '.png')}")
    return 0


def _loopback(args: argparse.Namespace) -> int:
    meas, fit = measure_loopback(procs=args.procs)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_parquet(out, meas)
    write_parquet(out.with_name(out.name.removesuffix(".parquet") + ".fit.parquet"), fit)
    print(fit.to_string(index=False))
    print(f"wrote {out} (measurements) and its .fit.parquet; use it with validate --collectives {out}")
    return 0


def _cluster_from_sweep(args: argparse.Namespace) -> int:
    import json

    fit = read_fit_table(args.collectives, args.sweep_time)
    procs = args.procs_per_node
    if procs is None:
        if "procs_per_node" not in fit.columns:
            raise CalibrationError(f"{args.collectives}: no procs_per_node column; give --procs-per-node")
        procs = int(fit["procs_per_node"].iloc[0])
    out = Path(args.out)
    name = args.name or out.stem
    device, device_source = device_of(args.device_from) if args.device_from else (None, None)
    raw = cluster_from_sweep(
        fit,
        name=name,
        procs_per_node=procs,
        compute_runs=args.compute_from_run,
        sweep_source=str(args.collectives),
        device=device,
        device_source=device_source,
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(raw, indent=2) + "\n")
    cluster = load_cluster(out)
    net = cluster.network
    compute = ", ".join(f"{m} {v * 1e3:.4g} ms" for m, v in cluster.compute_s_per_sample.items()) or "none"
    print(
        f"{name}: {procs} processes per node; intra alpha {net.intra.alpha_s * 1e6:.1f} us/step, beta "
        f"{net.intra.beta / 1e9:.3f} GB/s; inter alpha {net.inter.alpha_s * 1e6:.1f} us/step, beta "
        f"{net.inter.beta / 1e9:.4f} GB/s; compute per sample: {compute}"
    )
    print(f"wrote {out}; use it with project --cluster {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m prunex.perfmodel", description="PruneX analytic performance model")
    sub = p.add_subparsers(dest="cmd", required=True)
    v = sub.add_parser("validate", help="predict logged runs' comm seconds per iteration and compare")
    v.add_argument("--results", required=True, help="searched recursively for runs")
    v.add_argument("--collectives", default=None, help="collective sweep parquet (or its .fit.parquet)")
    v.add_argument("--sweep-time", choices=SWEEP_TIMES, default="slowest", help=SWEEP_TIME_HELP)
    v.add_argument("--measure-loopback", action="store_true", help="measure the loopback level now (gloo)")
    v.add_argument("--loopback-procs", type=int, default=2)
    v.add_argument("--loopback-alpha-s", type=float, default=None, help="loopback latency per ring step")
    v.add_argument("--loopback-beta", type=float, default=None, help="loopback bandwidth, bytes/s")
    v.add_argument("--tolerance", type=float, default=0.2)
    v.add_argument("--strict", action="store_true", help="exit 1 when a prediction misses the tolerance")
    v.add_argument("--out", default="results/perfmodel")
    it = sub.add_parser(
        "validate-iterations",
        help="predict logged runs' iteration time (compute + exposed communication) and compare",
        description="Predict each run's iteration time (compute + overhead + exposed communication; "
        "prunex.perfmodel.iterations) and compare with its measured iter_s (median over iterations, the "
        f"first left out). Writes OUT/{CSV_NAME}.",
    )
    it.add_argument("--results", required=True, help="searched recursively for runs")
    it.add_argument("--collectives", default=None, help="collective sweep parquet (or its .fit.parquet)")
    it.add_argument("--sweep-time", choices=SWEEP_TIMES, default="slowest", help=SWEEP_TIME_HELP)
    it.add_argument(
        "--cluster", default=None, help="cluster file: network without --collectives, compute per sample, device"
    )
    it.add_argument(
        "--compute-from-run",
        action="append",
        default=[],
        metavar="RUN_DIR",
        help="compute per sample from this run (repeat); by default each method's run on 1 node with the "
        "same processes per node under --results",
    )
    it.add_argument("--compute-stat", choices=COMPUTE_STATS, default="median", help="of compute_s over iterations")
    it.add_argument(
        "--procs-per-node", type=int, default=1, help="validate the runs with this many processes per node (0: any)"
    )
    it.add_argument("--min-nodes", type=int, default=2, help="validate the runs on at least this many nodes")
    it.add_argument("--tolerance", type=float, default=0.15)
    it.add_argument("--strict", action="store_true", help="exit 1 when a prediction misses the tolerance")
    it.add_argument("--out", default="results/perfmodel")
    j = sub.add_parser("project", help="project Fig. 9 (strong scaling) on a described cluster")
    j.add_argument("--cluster", default="puhti", help="name in clusters/ or a JSON path")
    j.add_argument("--model", default="resnet152")
    j.add_argument("--dataset", default="cifar10")
    j.add_argument("--methods", default="hsadmm,ddp,topk")
    j.add_argument("--gpus", default="8,16,32,64", help="base series (the first is the speedup baseline)")
    j.add_argument("--extend-to", type=int, default=4096, help="continue doubling up to this many GPUs (0: no)")
    j.add_argument("--batch-size", type=int, help="per GPU (default: the dataset's, 128 for CIFAR-10)")
    j.add_argument("--local-epochs", type=int, help="E (default: the run default, 5)")
    j.add_argument("--channel-keep", type=float, help="default: the run default, 0.5")
    j.add_argument("--filter-keep", type=float, help="default: the run default, 1.0")
    j.add_argument("--topk-ratio", type=float, help="default: the run default, 0.01")
    j.add_argument("--ddp-overlap", type=float, default=1.0, help="share of the backward pass DDP hides comm behind")
    j.add_argument(
        "--dynamic-fraction", type=float, help="hsadmm iterations with a dynamic mask (default: T_freeze / K = 0.25)"
    )
    j.add_argument("--compute-s-per-sample", type=float, default=None, help="override the cluster file's value")
    j.add_argument(
        "--compute-from-run",
        metavar="RUN_DIR",
        help="forward, backward and step seconds per sample from a run's logs (its method's own work taken off), "
        "for every method",
    )
    j.add_argument("--inter-beta-scale", type=float, default=None, help="scale the inter-node bandwidth")
    j.add_argument("--out", default="results/perfmodel")
    lb = sub.add_parser("loopback", help="measure this machine's loopback level (gloo) and write a fit table")
    lb.add_argument("--procs", type=int, default=2)
    lb.add_argument("--out", default="results/perfmodel/loopback.parquet")
    cs = sub.add_parser("cluster-from-sweep", help="a cluster file from a collective sweep and measured runs")
    cs.add_argument("--collectives", required=True, help="collective sweep parquet (or its .fit.parquet)")
    cs.add_argument(
        "--compute-from-run",
        action="append",
        default=[],
        metavar="RUN_DIR",
        help="compute seconds per sample from this run (repeat: the median per model)",
    )
    cs.add_argument("--sweep-time", choices=SWEEP_TIMES, default="slowest", help=SWEEP_TIME_HELP)
    cs.add_argument("--procs-per-node", type=int, default=None, help="default: the sweep's")
    cs.add_argument("--name", default=None, help="cluster name (default: the file name)")
    cs.add_argument(
        "--device-from",
        default=None,
        metavar="CLUSTER_JSON",
        help="memory bandwidth and per-op time from this cluster file, not measured here (runs of another machine)",
    )
    cs.add_argument("--out", required=True, help="the cluster JSON to write")
    args = p.parse_args(argv)
    try:
        check_values(args)
        # before anything is measured or read: an output that could not be written at the end
        check_writable(args.out, "--out", folder=args.cmd in ("validate", "validate-iterations", "project"))
        return {
            "validate": _validate,
            "validate-iterations": _validate_iterations,
            "project": _project,
            "loopback": _loopback,
            "cluster-from-sweep": _cluster_from_sweep,
        }[args.cmd](args)
    except (CalibrationError, ValueError, OSError) as e:
        print(f"prunex.perfmodel: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
