"""The command line every experiment module shares, and the driver that runs experiments.

    python -m experiments.NAME --profile {smoke,local,paper} --executor {debug,local,slurm} \\
        --results DIR [--only GLOB] [--dry-run] [--detach]

`--dry-run` prints every run with its resolved Slurm parameters and submits nothing. Bad input
(an unknown profile, an unwritable results directory, a missing dataset, a configuration that
would train nothing) is one line and exit code 2 before anything is submitted.

The driver can be stopped and started again at any point (it holds no state a re-run needs):
finished runs (their DONE marker) are skipped; a run whose Slurm job is queued or running is
reattached to, never submitted twice; a run whose job failed or vanished is submitted again and
resumes from its checkpoints; no file of a run a live job owns is touched (`prunex.lock`). On
Slurm every unfinished run of every selected experiment is submitted at once, one job array per
shape (nodes x tasks) in `RESULTS/submitit/`, since no experiment depends on another; the driver
then waits for all of them. With the local and debug executors runs go one after another. A failed
run does not stop the others: the summary lists it with its log path and the exit code is 1.
Ctrl-C or SIGTERM cancels the driver's jobs (`--detach`: leaves Slurm jobs running) and ends with
one line saying how to resume (`prunex.interrupt`).
"""

from __future__ import annotations

import argparse
import dataclasses
import fnmatch
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

from experiments.common import PROFILE_NAMES, Profile, profile
from prunex.config import EXECUTOR_NAMES, ArgumentParser, ConfigError, RunConfig
from prunex.interrupt import Interrupted, interruptible, last_signal
from prunex.launch import (
    SlurmOptions,
    SubmitInterrupted,
    executor_parameters,
    interrupted,
    launch,
    preflight,
    run_dir_for,
    submit,
    wait_all,
)
from prunex.lock import LockHeld, results_lock
from prunex.log import DONE

RunsFn = Callable[[Profile], list[RunConfig]]


def parser(name: str, doc: str | None) -> argparse.ArgumentParser:
    p = ArgumentParser(prog=f"python -m experiments.{name}", description=(doc or "").split("\n")[0])
    p.add_argument("--profile", default="local", choices=PROFILE_NAMES)
    p.add_argument("--executor", choices=EXECUTOR_NAMES, help="default: the profile's")
    p.add_argument("--results", default="results")
    p.add_argument("--only", help="run only the runs whose name matches this glob")
    p.add_argument("--dry-run", action="store_true", help="print the runs and their Slurm parameters")
    p.add_argument(
        "--detach", action="store_true", help="on Ctrl-C/SIGTERM leave Slurm jobs running (default: cancel them)"
    )
    p.add_argument("--partition")
    p.add_argument("--account")
    p.add_argument("--time-min", type=int)
    p.add_argument("--gpus-per-node", type=int)
    p.add_argument("--gres")
    return p


def resolve(
    name: str, runs_fn: RunsFn, profile_name: str, executor: str | None, results: str, only: str | None = None
) -> list[RunConfig]:
    """The experiment's runs for a profile and executor, in the results directory."""
    configs = [dataclasses.replace(c, results=results) for c in runs_fn(profile(profile_name, executor))]
    names = [c.name for c in configs]
    if len(set(names)) != len(names):
        raise ConfigError(f"experiment {name}: duplicate run names {sorted({n for n in names if names.count(n) > 1})}")
    if only:
        configs = [c for c in configs if fnmatch.fnmatch(c.name, only)]
    return configs


def slurm_options(args: argparse.Namespace) -> SlurmOptions:
    given = {
        "partition": args.partition,
        "account": args.account,
        "time_min": args.time_min,
        "gpus_per_node": args.gpus_per_node,
        "gres": args.gres,
    }
    return SlurmOptions(**{k: v for k, v in given.items() if v is not None})


def execute(
    configs: list[RunConfig], slurm: SlurmOptions, *, echo: bool = True, detach: bool = False
) -> list[tuple[str, str]]:
    """Run the configs (module docstring); returns (run name, error) for every failed run."""
    todo = [c for c in configs if not (run_dir_for(c) / DONE).exists()]
    if not todo:
        return []
    if todo[0].executor == "slurm":
        folder = Path(todo[0].results).resolve() / "submitit"
        try:
            entries = submit(todo, slurm, folder, echo=echo)
        except SubmitInterrupted as e:
            raise interrupted(e.entries, e.entries, detach) from None
        return wait_all(entries, echo=echo, detach=detach)
    failures: list[tuple[str, str]] = []
    for i, c in enumerate(todo):
        if echo:
            print(f"[{c.experiment}] run {i + 1}/{len(todo)}: {c.name}", flush=True)
        t0 = time.monotonic()
        try:
            launch(c, slurm, echo=echo, detach=detach)
        except (RuntimeError, LockHeld) as e:
            failures.append((c.name, str(e)))
            print(f"[{c.experiment}] FAILED {c.name}: {e}", file=sys.stderr, flush=True)
        except Interrupted as e:
            raise Interrupted(f"[{c.name}] {e}", e.signum) from None
        if echo:
            print(f"[{c.experiment}] {c.name} took {time.monotonic() - t0:.0f}s", flush=True)
    return failures


def dry_run(configs: list[RunConfig], slurm: SlurmOptions) -> None:
    for c in configs:
        params = executor_parameters(c, slurm)
        record = {
            "run": c.name,
            "method": c.method,
            "model": c.model,
            "dataset": c.dataset,
            "topology": f"{c.nodes}x{c.procs_per_node}",
            "executor": c.executor,
            "params": params,
        }
        print(json.dumps(record, sort_keys=True))


def run_experiments(
    experiments: dict[str, list[RunConfig]], args: argparse.Namespace, label: str, slurm: SlurmOptions
) -> int:
    """Preflight every run, then run them all (module docstring); the exit code."""
    configs = [c for cs in experiments.values() for c in cs]
    if args.dry_run:
        dry_run(configs, slurm)
        return 0
    if args.detach and any(c.executor != "slurm" for c in configs):
        print("error: --detach leaves Slurm jobs running; a local or debug job ends with its launcher", file=sys.stderr)
        return 2
    failures: list[tuple[str, str]] = []
    try:
        with interruptible():
            try:
                with results_lock(args.results):
                    memo: dict = {}
                    for c in configs:  # bad data, results paths, empty shards: one line, before anything launches
                        preflight(c, memo)
                    done = sum((run_dir_for(c) / DONE).exists() for c in configs)
                    print(f"[{label}] {len(configs)} runs, {done} already done", flush=True)
                    if configs and configs[0].executor == "slurm":  # independent experiments go out together
                        failures = execute(configs, slurm, detach=args.detach)
                    else:
                        for name, cs in experiments.items():
                            print(f"[{label}] experiment {name}: {len(cs)} runs", flush=True)
                            failures += execute(cs, slurm, detach=args.detach)
            except KeyboardInterrupt:
                raise Interrupted("interrupted before anything was submitted", last_signal()) from None
    except Interrupted as e:
        print(str(e), file=sys.stderr)
        return e.exit_code
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except LockHeld as e:
        print(f"error: {e}", file=sys.stderr)
        return 3
    if failures:
        print(f"[{label}] {len(failures)} failed run(s):", file=sys.stderr)
        for run_name, err in failures:
            print(f"  {run_name}: {err}", file=sys.stderr)
        return 1
    print(f"[{label}] logs under {Path(args.results).resolve()}")
    return 0


def main(name: str, runs_fn: RunsFn, doc: str | None = None, argv: list[str] | None = None) -> int:
    args = parser(name, doc).parse_args(argv)
    try:
        configs = resolve(name, runs_fn, args.profile, args.executor, args.results, args.only)
        slurm = slurm_options(args)
    except (ConfigError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return run_experiments({name: configs}, args, name, slurm)
