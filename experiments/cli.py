"""The command line every experiment module shares.

    python -m experiments.NAME --profile {smoke,local,paper} --executor {debug,local,slurm} \\
        --results DIR [--only GLOB] [--dry-run]

Finished runs (their DONE marker) are skipped, so a re-run resumes a partial suite. `--dry-run`
prints every run with its resolved Slurm parameters and submits nothing. On Slurm an experiment's
runs go out as one job array per distinct shape (nodes x tasks), via `executor.batch()`; with the
local and debug executors they run one after another. A failed run does not stop the others: the
summary lists it with its log path and the exit code is 1. Runs that need other runs' results
(`RunConfig.depends_on`: prune_finetune needs its dense run and the run whose FLOPs it matches)
go in a later wave, after those have finished; a run whose dependency failed is not started.
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
from prunex.config import EXECUTOR_NAMES, ConfigError, RunConfig
from prunex.launch import SlurmOptions, executor_parameters, launch, preflight, run_dir_for, submit_array, wait
from prunex.lock import LockHeld, results_lock
from prunex.log import DONE

RunsFn = Callable[[Profile], list[RunConfig]]


def parser(name: str, doc: str | None) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=f"python -m experiments.{name}", description=(doc or "").split("\n")[0])
    p.add_argument("--profile", default="local", choices=PROFILE_NAMES)
    p.add_argument("--executor", choices=EXECUTOR_NAMES, help="default: the profile's")
    p.add_argument("--results", default="results")
    p.add_argument("--only", help="run only the runs whose name matches this glob")
    p.add_argument("--dry-run", action="store_true", help="print the runs and their Slurm parameters")
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


def waves(configs: list[RunConfig]) -> list[list[RunConfig]]:
    """`configs` in dependency order (`RunConfig.depends_on`): a wave needs only earlier waves' runs."""
    names = {c.name for c in configs}
    placed: set[str] = set()
    out, left = [], list(configs)
    while left:
        wave = [c for c in left if all(d in placed or d not in names for d in c.depends_on)]
        if not wave:
            raise ConfigError(f"circular run dependencies among {', '.join(c.name for c in left)}")
        out.append(wave)
        placed |= {c.name for c in wave}
        left = [c for c in left if c.name not in placed]
    return out


def execute(name: str, configs: list[RunConfig], slurm: SlurmOptions, *, echo: bool = True) -> list[tuple[str, str]]:
    """Run the configs, wave after wave of dependencies; returns (run name, error) for every failed run."""
    failures: list[tuple[str, str]] = []
    todo = [c for c in configs if not (run_dir_for(c) / DONE).exists()]
    if echo:
        print(f"[{name}] {len(configs)} runs, {len(configs) - len(todo)} already done", flush=True)
    for wave in waves(todo):
        failed = {f for f, _ in failures}
        blocked = [c for c in wave if failed & set(c.depends_on)]
        failures += [(c.name, f"not run: {', '.join(sorted(failed & set(c.depends_on)))} failed") for c in blocked]
        failures += _execute_wave(name, [c for c in wave if c not in blocked], slurm, echo=echo)
    return failures


def _execute_wave(name: str, todo: list[RunConfig], slurm: SlurmOptions, *, echo: bool) -> list[tuple[str, str]]:
    failures: list[tuple[str, str]] = []
    if todo and todo[0].executor == "slurm":
        shapes: dict[tuple[int, int], list[RunConfig]] = {}
        for c in todo:
            shapes.setdefault((c.nodes, c.procs_per_node), []).append(c)
        submitted = [s for group in shapes.values() for s in submit_array(group, slurm)]
        for i, (c, d, job) in enumerate(submitted):
            if echo:
                print(f"[{name}] waiting for {c.name} (job {job.job_id}, {i + 1}/{len(submitted)})", flush=True)
            try:
                wait(job, c, d)
            except RuntimeError as e:
                failures.append((c.name, str(e)))
        return failures
    for i, c in enumerate(todo):
        if echo:
            print(f"[{name}] run {i + 1}/{len(todo)}: {c.name}", flush=True)
        t0 = time.monotonic()
        try:
            launch(c, slurm, echo=echo)
        except RuntimeError as e:
            failures.append((c.name, str(e)))
            print(f"[{name}] FAILED {c.name}: {e}", file=sys.stderr, flush=True)
        if echo:
            print(f"[{name}] {c.name} took {time.monotonic() - t0:.0f}s", flush=True)
    return failures


def main(name: str, runs_fn: RunsFn, doc: str | None = None, argv: list[str] | None = None) -> int:
    args = parser(name, doc).parse_args(argv)
    try:
        configs = resolve(name, runs_fn, args.profile, args.executor, args.results, args.only)
        slurm = slurm_options(args)
    except (ConfigError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.dry_run:
        for c in configs:
            params = executor_parameters(c, slurm)
            print(
                json.dumps(
                    {
                        "run": c.name,
                        "method": c.method,
                        "model": c.model,
                        "dataset": c.dataset,
                        "topology": f"{c.nodes}x{c.procs_per_node}",
                        "executor": c.executor,
                        "params": params,
                    },
                    sort_keys=True,
                )
            )
        return 0
    try:
        with results_lock(args.results):
            for c in configs:  # bad data roots or results paths: one line, before anything launches
                preflight(c)
            failures = execute(name, configs, slurm)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except LockHeld as e:
        print(f"error: {e}", file=sys.stderr)
        return 3
    if failures:
        print(f"[{name}] {len(failures)} failed run(s):", file=sys.stderr)
        for run_name, err in failures:
            print(f"  {run_name}: {err}", file=sys.stderr)
        return 1
    print(f"[{name}] logs under {Path(args.results).resolve() / name}")
    return 0
