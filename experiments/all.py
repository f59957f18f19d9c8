"""Every experiment of the paper: `python -m experiments.all --profile local --results DIR`.

Takes the options of `experiments.cli` (`--only` selects experiments by name here, a glob). The
experiments do not depend on each other: on Slurm all their runs are submitted at once (one job
array per shape) and waited for together; with the local executor they run one after another, in
the order below. Stopping the driver and running the same command again resumes where it was
(`experiments.cli`): finished runs are skipped, live jobs reattached, failed ones resubmitted. A
failed run does not stop the others; the exit code is 1 if any failed.
"""

from __future__ import annotations

import fnmatch
import importlib
import sys
import time

from experiments import cli
from prunex.config import ConfigError

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


def main(argv: list[str] | None = None) -> int:
    args = cli.parser("all", __doc__).parse_args(argv)
    names = [n for n in EXPERIMENTS if not args.only or fnmatch.fnmatch(n, args.only)]
    if not names:
        print(f"error: unknown experiment {args.only!r}; known: {', '.join(EXPERIMENTS)}", file=sys.stderr)
        return 2
    t0 = time.monotonic()
    try:
        selected = {}
        for name in names:
            module = importlib.import_module(f"experiments.{name}")
            selected[name] = cli.resolve(name, module.runs, args.profile, args.executor, args.results)
        slurm = cli.slurm_options(args)
    except (ConfigError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    rc = cli.run_experiments(selected, args, "all", slurm)
    if not args.dry_run and rc in (0, 1):
        print(f"[all] {len(names)} experiment(s) in {time.monotonic() - t0:.0f}s", flush=True)
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
