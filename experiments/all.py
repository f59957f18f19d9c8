"""Every experiment of the paper, in order: `python -m experiments.all --profile local --results DIR`.

Takes the options of `experiments.cli` (`--only` selects experiments by name here). A failed
experiment does not stop the others; the exit code is 1 if any run failed. `--dry-run` prints
every run's Slurm parameters and estimated GPU-hours and the total over all experiments:
`python -m experiments.all --profile paper --site puhti --account X --dry-run`.
"""

from __future__ import annotations

import argparse
import fnmatch
import importlib
import sys
import time

from experiments import cli
from prunex.config import ConfigError
from prunex.lock import LockHeld, results_lock

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


def dry_run(args: argparse.Namespace, names: list[str]) -> int:
    """Every experiment's runs with their Slurm parameters and estimated GPU-hours, then the total over
    the distinct trainings: experiments asking for the same training share one run
    (`prunex.launch.run_dir_for`), trained once, so it is counted once."""
    try:
        slurm = cli.slurm_options(args)
        runs, noted, distinct = 0, set(), {}
        for name in names:
            module = importlib.import_module(f"experiments.{name}")
            configs = cli.resolve(name, module.runs, args.profile, args.executor, args.results, device=args.device)
            n, _ = cli.dry_run(name, configs, slurm, noted)
            runs += n
            for c in configs:
                distinct.setdefault(c.shared_id, c)
        estimates = [cli.estimate_for(c, slurm) for c in distinct.values()]
        total = None if any(e is None for e in estimates) else sum(e.gpu_hours for e in estimates)
    except (ConfigError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    estimate = f"{total:.1f} GPU-hours estimated" if total is not None else "no GPU-hour estimate (give --site)"
    print(
        f"[all] {runs} runs asked for in {len(names)} experiments, {len(distinct)} distinct trainings "
        f"(each trained once): {estimate}"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    args = cli.parser("all", __doc__).parse_args(argv)
    names = [n for n in EXPERIMENTS if not args.only or fnmatch.fnmatch(n, args.only)]
    if not names:
        print(f"error: unknown experiment {args.only!r}; known: {', '.join(EXPERIMENTS)}", file=sys.stderr)
        return 2
    if args.dry_run:
        return dry_run(args, names)
    forwarded = [a for a in (argv if argv is not None else sys.argv[1:])]
    if args.only:  # --only selects experiments here, not runs
        i = forwarded.index("--only")
        del forwarded[i : i + 2]
    failed = []
    t0 = time.monotonic()
    try:
        with results_lock(args.results):
            for i, name in enumerate(names):
                print(
                    f"[all] experiment {i + 1}/{len(names)}: {name} ({time.monotonic() - t0:.0f}s so far)", flush=True
                )
                module = importlib.import_module(f"experiments.{name}")
                if cli.main(name, module.runs, module.__doc__, forwarded) != 0:
                    failed.append(name)
    except LockHeld as e:
        print(f"error: {e}", file=sys.stderr)
        return 3
    print(
        f"[all] {len(names) - len(failed)}/{len(names)} experiments complete in {time.monotonic() - t0:.0f}s"
        + (f"; failed: {', '.join(failed)}" if failed else ""),
        flush=True,
    )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
