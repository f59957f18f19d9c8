"""The command line every experiment module shares.

    python -m experiments.NAME --profile {smoke,local,paper} --executor {debug,local,slurm} \\
        --results DIR [--only GLOB] [--dry-run]

Finished runs (their DONE marker) are skipped, so a re-run resumes a partial suite. A run is
identified by its training configuration (`prunex.launch.run_dir_for`): a run another experiment
already trained is not trained again, only linked as `RESULTS/<experiment>/<name>`. `--dry-run`
prints every run with exactly what submitit would receive and its estimated GPU-hours (with
`--site`: the performance model on the site's cluster file), then the total, and submits nothing.
Device and cluster options (`--device --site --account --partition --time-min --gpus-per-node
--gres --cpus-per-task --mem --sbatch KEY=VALUE`) are `prunex.slurm`'s. On Slurm an experiment's
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
from prunex.launch import launch, preflight, run_dir_for, submit_array, submitit_parameters, wait
from prunex.lock import LockHeld, results_lock
from prunex.log import DONE
from prunex.slurm import SlurmOptions, add_cluster_options, check_submission, estimate_for, slurm_options_from_args

RunsFn = Callable[[Profile], list[RunConfig]]


def parser(name: str, doc: str | None) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=f"python -m experiments.{name}", description=(doc or "").split("\n")[0])
    p.add_argument("--profile", default="local", choices=PROFILE_NAMES)
    p.add_argument("--executor", choices=EXECUTOR_NAMES, help="default: the profile's")
    p.add_argument("--results", default="results")
    p.add_argument("--only", help="run only the runs whose name matches this glob")
    p.add_argument(
        "--dry-run", action="store_true", help="print the runs, their Slurm parameters and estimated GPU-hours"
    )
    p.add_argument(
        "--checkpoint-every-min",
        type=float,
        help="minutes between checkpoints (default 20; 0: at every evaluation point); not part of a run's identity",
    )
    add_cluster_options(p)  # --device, --site, --account, ... (prunex.slurm)
    return p


def resolve(
    name: str,
    runs_fn: RunsFn,
    profile_name: str,
    executor: str | None,
    results: str,
    only: str | None = None,
    device: str | None = None,
) -> list[RunConfig]:
    """The experiment's runs for a profile and executor, in the results directory (`device`: overrides
    the profile's)."""
    overrides = {"results": results, **({"device": device} if device else {})}
    configs = [dataclasses.replace(c, **overrides) for c in runs_fn(profile(profile_name, executor))]
    names = [c.name for c in configs]
    if len(set(names)) != len(names):
        raise ConfigError(f"experiment {name}: duplicate run names {sorted({n for n in names if names.count(n) > 1})}")
    if only:
        configs = [c for c in configs if fnmatch.fnmatch(c.name, only)]
    return configs


def slurm_options(args: argparse.Namespace) -> SlurmOptions:
    return slurm_options_from_args(args)


def dry_run(
    name: str, configs: list[RunConfig], slurm: SlurmOptions, noted: set[str] | None = None
) -> tuple[int, float | None]:
    """Print every run with exactly what submitit would receive and its estimate (one JSON line each),
    then the experiment's total; submit nothing. Returns (runs, estimated GPU-hours), the hours None
    when there is no estimate (no site naming a cluster file: `prunex.estimate`).

    What a real submission would refuse (no account, a torch without kernels for the site's GPUs) is
    printed once (per `noted` set, shared by callers that print several experiments) as a note on stderr."""
    noted = set() if noted is None else noted
    total: float | None = 0.0
    for c in configs:
        try:
            check_submission(c, slurm)
        except ConfigError as e:
            if str(e) not in noted:
                noted.add(str(e))
                print(f"note: a submission would be refused: {e}", file=sys.stderr)
        params, _ = submitit_parameters(c, slurm)
        estimate = estimate_for(c, slurm)
        row = {
            "run": c.name,
            "method": c.method,
            "model": c.model,
            "dataset": c.dataset,
            "topology": f"{c.nodes}x{c.procs_per_node}",
            "executor": c.executor,
            "device": c.device,
            "params": params,
            "shared_run": c.shared_id,
            "estimate": estimate.as_dict() if estimate is not None else None,
        }
        print(json.dumps(row, sort_keys=True))
        total = total + estimate.gpu_hours if (estimate is not None and total is not None) else None
    if total is None:
        print(f"[{name}] {len(configs)} runs; no GPU-hour estimate (give --site with a cluster file)")
    else:
        where = slurm.site.cluster if slurm.site else ""
        print(f"[{name}] {len(configs)} runs, {total:.1f} GPU-hours estimated (perf model, cluster {where})")
    return len(configs), total


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
    unique: dict[Path, RunConfig] = {}
    for c in configs:  # one run per training configuration
        unique.setdefault(run_dir_for(c), c)
    todo = [c for d, c in unique.items() if not (d / DONE).exists()]
    if echo:
        shared = f" ({len(unique)} distinct trainings)" if len(unique) < len(configs) else ""
        print(f"[{name}] {len(configs)} runs{shared}, {len(unique) - len(todo)} already done", flush=True)
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
        configs = resolve(name, runs_fn, args.profile, args.executor, args.results, args.only, args.device)
        if args.checkpoint_every_min is not None:
            configs = [dataclasses.replace(c, checkpoint_every_min=args.checkpoint_every_min) for c in configs]
        slurm = slurm_options(args)
        if args.dry_run:
            dry_run(name, configs, slurm)
            return 0
        for c in configs:  # no account, a torch that cannot run there: one line, before anything is made
            check_submission(c, slurm)
    except (ConfigError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
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
