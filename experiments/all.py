"""Every experiment of the paper, in order: `python -m experiments.all --profile local --results DIR`.

Takes the options of `experiments.cli` (`--only` selects experiments by name here). A failed
experiment does not stop the others; the exit code is 1 if any run failed.
"""

from __future__ import annotations

import contextlib
import fnmatch
import importlib
import sys
import time

from experiments import cli
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


def main(argv: list[str] | None = None) -> int:
    args = cli.parser("all", __doc__).parse_args(argv)
    names = [n for n in EXPERIMENTS if not args.only or fnmatch.fnmatch(n, args.only)]
    if not names:
        print(f"error: unknown experiment {args.only!r}; known: {', '.join(EXPERIMENTS)}", file=sys.stderr)
        return 2
    forwarded = [a for a in (argv if argv is not None else sys.argv[1:])]
    if args.only:  # --only selects experiments here, not runs
        i = forwarded.index("--only")
        del forwarded[i : i + 2]
    failed = []
    t0 = time.monotonic()
    try:
        with results_lock(args.results) if not args.dry_run else contextlib.nullcontext():
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
    if args.dry_run:  # experiments asking for the same training share one run (prunex.launch.run_dir_for)
        asked = [
            c
            for n in names
            for c in cli.resolve(n, importlib.import_module(f"experiments.{n}").runs, args.profile, args.executor, ".")
        ]
        print(f"[all] {len(asked)} runs asked for, {len({c.shared_id for c in asked})} distinct trainings", flush=True)
    print(
        f"[all] {len(names) - len(failed)}/{len(names)} experiments complete in {time.monotonic() - t0:.0f}s"
        + (f"; failed: {', '.join(failed)}" if failed else ""),
        flush=True,
    )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
