"""Every experiment of the paper: `python -m experiments.all --profile local --results DIR`.

Takes the options of `experiments.cli` (`--only` selects experiments by name here, a glob; `--skip`
leaves out those matching others, a comma-separated list: ./run_all.sh runs the regime profile's
`LINK_FREE` ones apart; a glob of either that matches no experiment is refused). The experiments do not
depend on each other: on Slurm all their runs are submitted at once (one job array per shape) and waited
for together; with the local executor they run one after another, in the order below. Stopping the
driver and running the same command again resumes where it was (`experiments.cli`): finished runs are
skipped, live jobs reattached, failed ones resubmitted. A failed run does not stop the others; the exit
code is 1 if any failed.
`--dry-run` prints every run's Slurm parameters and estimated GPU-hours and the total over the
distinct trainings:
`python -m experiments.all --profile paper --site puhti --account X --dry-run`. `--with-method METHOD` adds
a method of your own to the experiments that compare methods (`experiments.cli`).
"""

from __future__ import annotations

import argparse
import dataclasses
import fnmatch
import importlib
import sys
import time
from types import ModuleType

from experiments import cli
from prunex.cluster.exits import one_line
from prunex.cluster.slurm import check_submission
from prunex.training.config import ConfigError, RunConfig

EXPERIMENTS = (
    "time_to_accuracy",
    "volume",
    "latency",
    "latency_breakdown",
    "strong_scaling",
    "residuals",
    "pareto",
    "sparsity_patterns",
)


def _resolve(name: str, module: ModuleType, args: argparse.Namespace) -> list[RunConfig]:
    """The experiment's runs; `--with-method` applies to the experiments that compare methods, not the others."""
    extra = args.with_method if name in cli.WITH_METHOD_EXPERIMENTS else ()
    return cli.resolve(
        name, module.runs, args.profile, args.executor, args.results, device=args.device, with_methods=extra
    )


def dry_run(args: argparse.Namespace, names: list[str]) -> int:
    """Every experiment's runs with their Slurm parameters and estimated GPU-hours, then the total over
    the distinct trainings: experiments asking for the same training share one run
    (`prunex.cluster.rundir.run_dir_for`), trained once, so it is counted once."""
    try:
        slurm = cli.slurm_options(args)
        runs, noted, distinct = 0, set(), {}
        for name in names:
            module = importlib.import_module(f"experiments.{name}")
            configs = _resolve(name, module, args)
            n, _ = cli.dry_run(name, configs, slurm, noted)
            runs += n
            for c in configs:
                distinct.setdefault(c.shared_id, c)
        estimates = [cli.estimate_jobs_for(c, slurm) for c in distinct.values()]  # training and export jobs
        total = None if any(e is None for e in estimates) else sum(j.gpu_hours for e in estimates for j in e)
    except (ConfigError, ValueError) as e:
        print(f"error: {one_line(e)}", file=sys.stderr)
        return 2
    estimate = f"{total:.1f} GPU-hours estimated" if total is not None else "no GPU-hour estimate (give --site)"
    print(
        f"[all] {runs} runs asked for in {len(names)} experiments, {len(distinct)} distinct trainings "
        f"(each trained once): {estimate}"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = cli.parser("all", __doc__)
    parser.add_argument("--skip", help="leave out the experiments whose name matches one of these globs (a,b,...)")
    args = parser.parse_args(argv)
    names = [n for n in EXPERIMENTS if not args.only or fnmatch.fnmatch(n, args.only)]
    if not names:
        print(f"error: unknown experiment {args.only!r}; known: {', '.join(EXPERIMENTS)}", file=sys.stderr)
        return 2
    skips = args.skip.split(",") if args.skip else []
    if unknown := [g for g in skips if not any(fnmatch.fnmatch(n, g) for n in EXPERIMENTS)]:  # a typo ran it
        print(
            f"error: --skip {','.join(unknown)} matches no experiment; known: {', '.join(EXPERIMENTS)}", file=sys.stderr
        )
        return 2
    names = [n for n in names if not any(fnmatch.fnmatch(n, glob) for glob in skips)]
    if not names:
        print(f"[all] every experiment selected matches --skip {args.skip}: nothing to run", flush=True)
        return 0
    if args.dry_run:
        return dry_run(args, names)
    t0 = time.monotonic()
    try:
        selected = {}
        for name in names:
            module = importlib.import_module(f"experiments.{name}")
            configs = _resolve(name, module, args)
            if args.checkpoint_every_min is not None:
                configs = [dataclasses.replace(c, checkpoint_every_min=args.checkpoint_every_min) for c in configs]
            selected[name] = configs
        slurm = cli.slurm_options(args)
        for c in (c for cs in selected.values() for c in cs):  # no account, no kernels: one line, before anything
            check_submission(c, slurm)
    except (ConfigError, ValueError) as e:
        print(f"error: {one_line(e)}", file=sys.stderr)
        return 2
    rc = cli.run_experiments(selected, args, "all", slurm)
    if rc in (0, 1):
        print(f"[all] {len(names)} experiment(s) in {time.monotonic() - t0:.0f}s", flush=True)
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
