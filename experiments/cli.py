"""The command line every experiment module shares, and the driver that runs experiments.

    python -m experiments.NAME --profile {smoke,local,paper} --executor {debug,local,slurm} \\
        --results DIR [--only GLOB] [--dry-run] [--detach] [--with-method METHOD]

`--dry-run` prints every run with exactly what submitit would receive and its estimated GPU-hours
(with `--site`: the performance model on the site's cluster file), then the total, and submits
nothing. Device and cluster options (`--device --site --account --partition --time-min
--gpus-per-node --gres --cpus-per-task --mem --sbatch KEY=VALUE`) are `prunex.cluster.slurm`'s. Bad input
(an unknown profile, an unwritable results directory, a missing dataset, a configuration that
would train nothing, no account on a real Slurm) is one line and exit code 2 before anything is
submitted.

`--with-method METHOD` (repeatable; the experiments that compare methods: `WITH_METHOD_EXPERIMENTS`) adds a
run of METHOD, a method of your own (docs/methods-of-your-own.md), beside each of the experiment's DDP runs,
with that run's settings (topology, model, data, epochs, batch size, learning rate, seed, link) and DDP's name
with the method's in its place: the figures then draw it beside the paper's methods.

A run is identified by its training configuration (`prunex.cluster.rundir.run_dir_for`): a run another
experiment already trained is not trained again, only linked as `RESULTS/<experiment>/<name>`.

The driver can be stopped and started again at any point (it holds no state a re-run needs):
finished runs (their DONE marker) are skipped; a run whose Slurm job is queued or running is
reattached to, never submitted twice; a run whose job failed or vanished is submitted again and
resumes from its checkpoints; no file of a run a live job owns is touched (`prunex.cluster.lock`). On
Slurm every unfinished run of every selected experiment is submitted at once, one job array per
shape (nodes x tasks) in `RESULTS/submitit/`, since no experiment depends on another; the driver
then waits for all of them. Runs that need other runs' results (`RunConfig.depends_on`:
prune_finetune needs its dense run and the run whose FLOPs it matches) go in a later wave, after
those have finished; a run whose dependency failed is not started. With the local and debug
executors runs go one after another. A failed run does not stop the others: the summary lists it
with its log path and the exit code is 1. Ctrl-C or SIGTERM cancels the driver's jobs (`--detach`:
leaves Slurm jobs running) and ends with one line saying how to resume (`prunex.cluster.interrupt`).
"""

from __future__ import annotations

import argparse
import dataclasses
import fnmatch
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from experiments.common import PROFILE_NAMES, Profile, profile
from prunex.cluster.executor import submitit_parameters
from prunex.cluster.exits import one_line, refuse
from prunex.cluster.interrupt import Interrupted, interruptible, last_signal
from prunex.cluster.launch import (
    SubmitInterrupted,
    by_submission,
    interrupted,
    launch,
    submission_key,
    submit,
    wait_all,
)
from prunex.cluster.lock import LockHeld, results_lock
from prunex.cluster.options import add_config_options
from prunex.cluster.preflight import check_start, preflight
from prunex.cluster.regime import REGIME_ENV, REGIME_FILE
from prunex.cluster.regime import read as read_regime
from prunex.cluster.rundir import run_dir_for
from prunex.cluster.slurm import (
    SlurmOptions,
    add_cluster_options,
    check_submission,
    estimate_jobs_for,
    slurm_options_from_args,
)
from prunex.methods.registry import PAPER_METHODS
from prunex.perfmodel.workload import workload_builder
from prunex.training.config import EXECUTOR_NAMES, ArgumentParser, ConfigError, RunConfig
from prunex.training.log import DONE

RunsFn = Callable[[Profile], list[RunConfig]]
# The experiments whose figures set methods side by side, each with DDP among them: `--with-method` applies there.
WITH_METHOD_EXPERIMENTS = ("time_to_accuracy", "volume", "latency", "strong_scaling")


def parser(name: str, doc: str | None) -> argparse.ArgumentParser:
    p = ArgumentParser(prog=f"python -m experiments.{name}", description=(doc or "").split("\n")[0])
    p.add_argument("--profile", default="local", choices=PROFILE_NAMES)
    p.add_argument("--executor", choices=EXECUTOR_NAMES, help="default: the profile's")
    p.add_argument("--results", default="results")
    p.add_argument("--only", help="run only the runs whose name matches this glob")
    p.add_argument(
        "--dry-run", action="store_true", help="print the runs, their Slurm parameters and estimated GPU-hours"
    )
    p.add_argument(
        "--with-method",
        action="append",
        default=[],
        metavar="METHOD",
        help="also run METHOD (a method of your own: PRUNEX_METHODS, docs/methods-of-your-own.md) with the settings "
        f"of each DDP run of the experiment; repeatable; for {', '.join(WITH_METHOD_EXPERIMENTS)}",
    )
    add_config_options(p, only=("checkpoint_every_min",))  # applied to every run; not part of a run's identity
    add_cluster_options(p)  # --device, --site, --account, ..., --detach (prunex.cluster.slurm)
    return p


def regime_of(profile_name: str, results: str) -> dict | None:
    """The `regime` profile's RESULTS/regime.json (`prunex.cluster.regime`); None for other profiles or before
    the probe."""
    if profile_name != "regime":
        return None
    return read_regime(Path(results) / REGIME_FILE)


def resolve(
    name: str,
    runs_fn: RunsFn,
    profile_name: str,
    executor: str | None,
    results: str,
    only: str | None = None,
    device: str | None = None,
    with_methods: Sequence[str] = (),
) -> list[RunConfig]:
    """The experiment's runs for a profile and executor, in the results directory (`device`: overrides
    the profile's), with a run of each of `with_methods` beside each DDP run (module docstring)."""
    overrides = {"results": results, **({"device": device} if device else {})}
    p = profile(profile_name, executor, regime_of(profile_name, results))
    if device == "cuda" and p.link.model == "alpha-beta":  # RunConfig's own line names an option these lack
        raise ConfigError(
            f"--device cuda: profile {profile_name} on the {p.executor} executor emulates its inter-node link with the "
            "alpha-beta model, which is for CPU runs; run it with --device cpu, or on GPUs with --executor slurm "
            "(the cluster's own links)"
        )
    configs = [dataclasses.replace(c, **overrides) for c in runs_fn(p)]
    configs += beside_ddp(name, configs, with_methods)
    names = [c.name for c in configs]
    if len(set(names)) != len(names):
        raise ConfigError(f"experiment {name}: duplicate run names {sorted({n for n in names if names.count(n) > 1})}")
    if only:
        matched = [c for c in configs if fnmatch.fnmatch(c.name, only)]
        if not matched:  # a mistyped glob ran nothing and said "0 runs" with exit code 0
            shown = ", ".join(names[:4]) + (", ..." if len(names) > 4 else "")
            raise ConfigError(f"--only {only!r} matches none of experiment {name}'s {len(names)} runs ({shown})")
        configs = matched
    return configs


def beside_ddp(name: str, configs: list[RunConfig], methods: Sequence[str]) -> list[RunConfig]:
    """A run of each of `methods` per DDP run of `configs`, with its settings, named after it ("ddp-..." ->
    "METHOD-..."); [] without `methods`. ConfigError for an experiment that does not compare methods or a
    method that is not registered (or is one of the paper's: the profiles run those as the paper does)."""
    if not methods:
        return []
    if name not in WITH_METHOD_EXPERIMENTS:
        raise ConfigError(
            f"--with-method: experiment {name} does not compare methods ({', '.join(WITH_METHOD_EXPERIMENTS)} do)"
        )
    added = []
    for method in methods:
        try:  # registered, with a workload that prices its Slurm limits: refused before any run is listed
            workload_builder(method)
        except ValueError as e:
            raise ConfigError(f"--with-method: {e}") from None
        if method in PAPER_METHODS:
            raise ConfigError(
                f"--with-method: {method} is one of the paper's methods, which the profiles already place"
            )
        for c in configs:
            if c.method == "ddp":
                run_name = method + c.name[len("ddp") :] if c.name.startswith("ddp") else f"{method}-{c.name}"
                added.append(dataclasses.replace(c, method=method, name=run_name))
    return added


def slurm_options(args: argparse.Namespace) -> SlurmOptions:
    return slurm_options_from_args(args)


def dry_run(
    name: str, configs: list[RunConfig], slurm: SlurmOptions, noted: set[str] | None = None
) -> tuple[int, float | None]:
    """Print every run with exactly what submitit would receive and its estimate (one JSON line each),
    then the experiment's total; submit nothing. Returns (runs, estimated GPU-hours), the hours None
    when there is no estimate (no site naming a cluster file: `prunex.cluster.estimate`).

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
        estimates = estimate_jobs_for(c, slurm)  # its training and, for a multi-task --export, its export job
        estimate = estimates[0] if estimates else None
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
        if c.export_job:  # the one-task job that exports and benches after training (prunex.training.export_step)
            export = estimates[1] if estimates and len(estimates) > 1 else None
            row["export_params"] = submitit_parameters(c, slurm, export=True)[0]
            row["export_estimate"] = export.as_dict() if export is not None else None
        print(json.dumps(row, sort_keys=True))
        total = total + sum(e.gpu_hours for e in estimates) if (estimates is not None and total is not None) else None
    # what sbatch receives per submission: the runs of one wave with equal `submission_key` share a job array;
    # a multi-task run's --export is a one-task job after its training (the driver submits it when training ends)
    for w, wave in enumerate(waves(configs)):
        folder = Path("RESULTS/<experiment>/submitit")
        exported = [c for c in wave if c.export_job]
        for export, stage in ((False, wave), (True, exported)):
            for runs in by_submission(stage, slurm, folder, export=export):
                executor, nodes, tasks, _, limit, _ = submission_key(runs[0], slurm, folder, export=export)
                after = ", export jobs after training" if export else ""
                print(
                    f"[{name}] submission (wave {w + 1}{after}): {len(runs)} run(s) on {executor}, {nodes}x{tasks}, "
                    f"time limit {limit} min: {', '.join(c.name for c in runs)}"
                )
    if total is None:
        print(f"[{name}] {len(configs)} runs; no GPU-hour estimate (give --site with a cluster file)")
    else:
        where = slurm.site.cluster if slurm.site else ""
        print(f"[{name}] {len(configs)} runs, {total:.1f} GPU-hours estimated (perf model, cluster {where})")
    return len(configs), total


def needed_dirs(configs: list[RunConfig], named: list[RunConfig] | None = None) -> dict[Path, set[Path]]:
    """Per run directory of `configs`, the run directories among theirs that its run waits for
    (`RunConfig.depends_on`: names of runs of its own experiment, looked up among `named`, default `configs`).
    By directory, not by name: one run per training keeps one of several equal runs, which may carry another
    experiment's name (the smoke profile's Pareto start is time_to_accuracy's DDP run), and its dependents must wait
    for it. A dependency outside `configs` is taken as finished (`preflight.check_start` checks it)."""
    named = configs if named is None else named
    dir_of = {(c.experiment, c.name): run_dir_for(c) for c in named}
    mine = {run_dir_for(c) for c in configs}
    return {
        run_dir_for(c): {dir_of[(c.experiment, d)] for d in c.depends_on if (c.experiment, d) in dir_of} & mine
        for c in configs
    }


def waves(configs: list[RunConfig], named: list[RunConfig] | None = None) -> list[list[RunConfig]]:
    """`configs` in dependency order (`needed_dirs`): a wave needs only earlier waves' runs."""
    needs = needed_dirs(configs, named)
    placed: set[Path] = set()
    out, left = [], list(configs)
    while left:
        wave = [c for c in left if needs[run_dir_for(c)] <= placed]
        if not wave:
            raise ConfigError(f"circular run dependencies among {', '.join(c.name for c in left)}")
        out.append(wave)
        placed |= {run_dir_for(c) for c in wave}
        left = [c for c in left if run_dir_for(c) not in placed]
    return out


def check_outside(configs: list[RunConfig]) -> None:
    """The runs that a run of `configs` reads at its start and that are not among `configs` (left out by `--only`)
    are finished and hold what it reads (`preflight.check_start`): refused before the results lock or any run
    directory is made. (Before, `--only 'ptf*'` made the run's directory and link, then refused at its launch.)"""
    selected = {(c.experiment, c.name) for c in configs}
    for c in configs:
        outside = {d for d in c.depends_on if (c.experiment, d) not in selected}
        if outside:
            check_start(c, outside)


def execute(
    configs: list[RunConfig], slurm: SlurmOptions, *, echo: bool = True, detach: bool = False, serial: bool = False
) -> list[tuple[str, str]]:
    """Run the configs (module docstring), each distinct training once, wave after wave of
    dependencies; returns (run name, error) for every failed run. `serial`: one run at a time on
    Slurm too (a profile whose timings are its results, on a cluster whose nodes share one machine):
    each wave goes out as job arrays that run one task at a time (`prunex.cluster.launch.submit`'s
    `one_at_a_time`), one array after the other, so Slurm starts a run as the one before it ends
    instead of waiting for this driver to notice and submit it (docs/experiments.md, "The paper's regime on one
    machine": 13-16 s from one run's DONE to the next run's start on the mini cluster, 17-20 s before)."""
    unique: dict[Path, RunConfig] = {}
    for c in configs:  # one run per training configuration
        unique.setdefault(run_dir_for(c), c)
    todo = [c for d, c in unique.items() if not (d / DONE).exists()]
    needs = needed_dirs(todo, configs)
    failures: list[tuple[str, str]] = []
    failed: dict[Path, str] = {}  # run directory -> the name its run failed under
    for wave in waves(todo, configs):
        blocked = [c for c in wave if needs[run_dir_for(c)] & failed.keys()]
        for c in blocked:
            failed[run_dir_for(c)] = c.name
            why = ", ".join(sorted(failed[d] for d in needs[run_dir_for(c)] & failed.keys()))
            failures.append((c.name, f"not run: {why} failed"))
        runnable = [c for c in wave if c not in blocked]
        new = _execute_wave(runnable, slurm, echo=echo, detach=detach, serial=serial)
        names = {n for n, _ in new}
        failed |= {run_dir_for(c): c.name for c in runnable if c.name in names}
        failures += new
    return failures


def _execute_wave(
    todo: list[RunConfig], slurm: SlurmOptions, *, echo: bool, detach: bool, serial: bool = False
) -> list[tuple[str, str]]:
    if not todo:
        return []
    if todo[0].executor == "slurm":
        folder = Path(todo[0].results).resolve() / "submitit"
        failures: list[tuple[str, str]] = []
        for part in by_submission(todo, slurm, folder) if serial else [todo]:
            try:
                entries = submit(part, slurm, folder, echo=echo, one_at_a_time=serial)
            except SubmitInterrupted as e:
                raise interrupted(e.entries, e.entries, detach) from None
            failures += wait_all(entries, echo=echo, detach=detach)
        return failures
    failures = []
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


def run_experiments(
    experiments: dict[str, list[RunConfig]], args: argparse.Namespace, label: str, slurm: SlurmOptions
) -> int:
    """Preflight every run, then run them all (module docstring); the exit code."""
    configs = [c for cs in experiments.values() for c in cs]
    if args.profile == "regime":  # its link rate is chosen before any run, once per results directory
        regime_file = Path(args.results) / REGIME_FILE
        if read_regime(regime_file) is None:
            print(
                f"error: profile regime needs {regime_file}: choose the link rate first with "
                f"python -m prunex.cluster.regime probe --out {regime_file} (./run_all.sh does)",
                file=sys.stderr,
            )
            return 2
        os.environ[REGIME_ENV] = str(regime_file.resolve())  # every run's meta.json carries it
    if args.detach and any(c.executor != "slurm" for c in configs):
        print("error: --detach leaves Slurm jobs running; a local or debug job ends with its launcher", file=sys.stderr)
        return 2
    try:
        check_outside(configs)
    except ConfigError as e:
        return refuse(e, {ConfigError: 2})
    failures: list[tuple[str, str]] = []
    try:
        with interruptible():
            try:
                with results_lock(args.results):
                    memo: dict = {}
                    for c in configs:  # bad data, results paths, empty shards: one line, before anything launches
                        preflight(c, memo)
                    distinct = {run_dir_for(c) for c in configs}
                    done = sum((d / DONE).exists() for d in distinct)
                    shared = f" ({len(distinct)} distinct trainings)" if len(distinct) < len(configs) else ""
                    print(f"[{label}] {len(configs)} runs{shared}, {done} already done", flush=True)
                    serial = profile(args.profile).serial
                    # independent experiments go out together, unless the profile runs one at a time
                    if configs and configs[0].executor == "slurm" and not serial:
                        failures = execute(configs, slurm, detach=args.detach)
                    else:
                        for name, cs in experiments.items():
                            print(f"[{label}] experiment {name}: {len(cs)} runs", flush=True)
                            failures += execute(cs, slurm, detach=args.detach, serial=serial)
            except KeyboardInterrupt:
                raise Interrupted("interrupted before anything was submitted", last_signal()) from None
    except (Interrupted, ConfigError, LockHeld) as e:
        return refuse(e, {ConfigError: 2, LockHeld: 3})
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
        configs = resolve(
            name, runs_fn, args.profile, args.executor, args.results, args.only, args.device, args.with_method
        )
        if args.checkpoint_every_min is not None:
            configs = [dataclasses.replace(c, checkpoint_every_min=args.checkpoint_every_min) for c in configs]
        slurm = slurm_options(args)
        if args.dry_run:
            dry_run(name, configs, slurm)
            return 0
        for c in configs:  # no account, a torch that cannot run there: one line, before anything is made
            check_submission(c, slurm)
    except (ConfigError, ValueError) as e:
        print(f"error: {one_line(e)}", file=sys.stderr)
        return 2
    return run_experiments({name: configs}, args, name, slurm)
