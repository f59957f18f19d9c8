"""What a run asks Slurm for, from the site preset, the environment and the command line, and the
refusals that come before anything is submitted.

    python -m experiments.all --profile paper --site puhti --account project_2001234 --dry-run

Precedence, lowest first: the site preset (`--site NAME` / `PRUNEX_SITE`, `prunex.cluster.sites`), the
`PRUNEX_SLURM_*` environment variables (`PARTITION`, `ACCOUNT`, `TIME_MIN`, `GPUS_PER_NODE`,
`GRES`, `CPUS_PER_TASK`, `MEM`), the command-line options (`add_cluster_options`, shared by
`prunex.run` and every `experiments.*` module). `--sbatch KEY=VALUE` (repeatable; `--sbatch KEY`
for a flag) passes any other sbatch option (qos, constraint, reservation, ...); one prunex sets itself (time,
partition, account, gres, nodes, tasks, array, output, ...: `OWN_SBATCH`) is refused, naming the option to use.

A run on the `slurm` executor asks for (`executor_parameters`): M nodes of P tasks; one GPU per
task unless it runs on the CPU (`--gres`, else `--gpus-per-node`, else the site's gres for P GPUs,
else `--gpus-per-node=P`);
the site's partition, CPUs per task and memory (its per-GPU memory x P); the site's setup lines and
environment in the job script; and a time limit: `--time-min`, else the performance model's
estimate of the run on the site's cluster file with the site's margin (`prunex.cluster.estimate`,
`prunex.cluster.sites.TimeLimitPolicy`), else 60 minutes. A run of several tasks with `--export` has an
export job after training (`prunex.training.export_step`): one node, one task, one GPU, its own time limit
(`executor_parameters(..., export=True)`; a `--time-min` given applies to it as well).

Refusals (`check_submission`, one line each, `ConfigError`): no `--account` on a real Slurm (the
mini cluster is not one: `PRUNEX_MINICLUSTER_DIR` says so); a Python or torch outside the supported
range; `--device cuda` with a torch that has no kernels for the GPU (this host's, else the site's);
`--device cuda` on the mini cluster, which has no GPUs; `--gres` or `--gpus-per-node` with fewer GPUs per node
than a cuda run has tasks (each task takes a GPU of its own), unless `--sbatch gpus-per-task=...` binds them; more
cuda tasks per node than the site's nodes have GPUs, or more nodes than the site's partition takes (its
`gpus_per_node`, `max_nodes`). An `sbatch` that refuses the job is one line carrying Slurm's own message
(`submission`, `SubmitError`).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from prunex.cluster.compat import UnsupportedEnvironment, check_cuda_arch, check_this_torch
from prunex.cluster.estimate import EstimateError, RunEstimate, estimate_export, estimate_run
from prunex.cluster.rundir import run_dir_for
from prunex.cluster.sites import Site, load_site
from prunex.perfmodel.calibrate import CalibrationError
from prunex.training.config import DEVICE_NAMES, ConfigError, RunConfig
from prunex.training.log import TRAINED

DEFAULT_TIME_MIN = 60  # without --time-min and without a site's cluster file to estimate from
_SBATCH_KEY = re.compile(r"^[a-z][a-z0-9_-]*$")


def _env_int(name: str) -> int | None:
    value = os.environ.get(name, "")
    if not value:
        return None
    try:
        return int(value)
    except ValueError:
        raise ConfigError(f"{name}={value!r} is not a whole number") from None


def _site_from_env() -> Site | None:
    name = os.environ.get("PRUNEX_SITE", "")
    return load_site(name) if name else None


def on_minicluster() -> bool:
    """Slurm here is `prunex.minicluster` (no GPUs, no accounts), not a real cluster."""
    return bool(os.environ.get("PRUNEX_MINICLUSTER_DIR"))


@dataclass(frozen=True, kw_only=True)
class SlurmOptions:
    """Slurm options of a submission; unset (None) fields fall back to the site preset."""

    site: Site | None = field(default_factory=_site_from_env)
    partition: str | None = field(default_factory=lambda: os.environ.get("PRUNEX_SLURM_PARTITION") or None)
    account: str | None = field(default_factory=lambda: os.environ.get("PRUNEX_SLURM_ACCOUNT") or None)
    time_min: int | None = field(default_factory=lambda: _env_int("PRUNEX_SLURM_TIME_MIN"))
    gpus_per_node: int | None = field(default_factory=lambda: _env_int("PRUNEX_SLURM_GPUS_PER_NODE"))
    gres: str | None = field(default_factory=lambda: os.environ.get("PRUNEX_SLURM_GRES") or None)
    cpus_per_task: int | None = field(default_factory=lambda: _env_int("PRUNEX_SLURM_CPUS_PER_TASK"))
    mem: str | None = field(default_factory=lambda: os.environ.get("PRUNEX_SLURM_MEM") or None)
    sbatch: tuple[tuple[str, str | bool], ...] = ()  # --sbatch KEY=VALUE

    def __post_init__(self) -> None:
        if self.time_min is not None and self.time_min < 1:
            raise ConfigError(f"the time limit must be >= 1 minute, got {self.time_min}")
        cap = self.site.max_time_min if self.site is not None else None
        if self.time_min is not None and cap and self.time_min > cap:
            raise ConfigError(
                f"--time-min {self.time_min} is over site {self.site.name}'s limit of {cap} minutes (its partition "
                "would refuse the job, or hold it pending for ever)"
            )
        if self.cpus_per_task is not None and self.cpus_per_task < 1:
            raise ConfigError(f"--cpus-per-task must be >= 1, got {self.cpus_per_task}")
        if self.gpus_per_node is not None and self.gpus_per_node < 0:  # 0: none, for runs on the CPU
            raise ConfigError(f"--gpus-per-node must be >= 0, got {self.gpus_per_node}")
        if self.mem is not None and not re.fullmatch(r"\d+[KMGTkmgt]?", self.mem):  # sbatch refused it at submission
            raise ConfigError(f"--mem {self.mem!r}: a size as sbatch takes it, such as 320G, 1T or 64000 (megabytes)")
        for key, _ in self.sbatch:
            if not _SBATCH_KEY.match(key):
                raise ConfigError(f"--sbatch {key!r}: an sbatch option name such as qos or mail-type")

    @property
    def partition_or_site(self) -> str | None:
        return self.partition or (self.site.partition if self.site else None)


# ----------------------------------------------------------------------------------- the CLI option set
def add_cluster_options(p: argparse.ArgumentParser) -> None:
    """`--device`, the Slurm options and `--detach`: the one set `prunex.run` and `experiments.cli` share."""
    p.add_argument(
        "--device", choices=DEVICE_NAMES, help="default: cuda on the slurm executor and in the paper profile"
    )
    s = p.add_argument_group("slurm (a site preset, then PRUNEX_SLURM_* variables, then these options)")
    s.add_argument("--site", help="site preset: a name in clusters/sites/ or a path (default: $PRUNEX_SITE)")
    s.add_argument("--account", help="the project to bill; required on a Slurm cluster")
    s.add_argument("--partition")
    s.add_argument(
        "--time-min", type=int, help="time limit; default: the perf model's estimate on the site's cluster + margin"
    )
    s.add_argument("--gpus-per-node", type=int)
    s.add_argument("--gres", help="e.g. gpu:v100:4 (default: the site's, for one GPU per task)")
    s.add_argument("--cpus-per-task", type=int)
    s.add_argument("--mem", help="memory per node, e.g. 320G")
    s.add_argument(
        "--sbatch", action="append", default=[], metavar="KEY=VALUE", help="any other sbatch option (repeatable)"
    )
    s.add_argument(
        "--detach",
        action="store_true",
        help="on Ctrl-C/SIGTERM leave the Slurm jobs running (default: cancel them); run again to reattach",
    )


# sbatch options prunex sets itself (`executor_parameters`, submitit's script): through --sbatch they would override
# what the dry run prints and how runs are grouped into arrays, so they are refused, naming the option to use (the
# upper-case short forms, -A, -N, -J, are no option name `_SBATCH_KEY` lets through)
OWN_SBATCH = {
    "time": "--time-min",
    "t": "--time-min",
    "partition": "--partition",
    "p": "--partition",
    "account": "--account",
    "gres": "--gres",
    "gpus-per-node": "--gpus-per-node",
    "gpus_per_node": "--gpus-per-node",
    "cpus-per-task": "--cpus-per-task",
    "cpus_per_task": "--cpus-per-task",
    "c": "--cpus-per-task",
    "mem": "--mem",
    "nodes": "the run's --nodes",
    "ntasks-per-node": "the run's --procs-per-node",
    "ntasks_per_node": "the run's --procs-per-node",
    "ntasks": "the run's --nodes x --procs-per-node",
    "n": "the run's --nodes x --procs-per-node",
    "array": "nothing: runs of one shape and time limit go out as one array",
    "job-name": "nothing: prunex names each job after its run",
    "output": "nothing: submitit writes each task's log in the run's submitit/ folder",
    "o": "nothing: submitit writes each task's log in the run's submitit/ folder",
    "error": "nothing: submitit writes each task's log in the run's submitit/ folder",
    "e": "nothing: submitit writes each task's log in the run's submitit/ folder",
    "signal": "nothing: submitit's preemption signal is what the checkpoints answer",
}


def parse_sbatch(items: list[str]) -> tuple[tuple[str, str | bool], ...]:
    """``["qos=normal", "exclusive"]`` -> (("qos", "normal"), ("exclusive", True)). An option prunex sets itself
    (`OWN_SBATCH`) is refused in one line naming what to use instead."""
    out: list[tuple[str, str | bool]] = []
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip().lstrip("-")
        if not _SBATCH_KEY.match(key) or (sep and not value):
            raise ConfigError(f"--sbatch {item!r}: use KEY=VALUE (e.g. qos=normal) or KEY for a flag")
        if key in OWN_SBATCH:
            raise ConfigError(
                f"--sbatch {item!r}: prunex sets {key} itself (what the dry run prints); use {OWN_SBATCH[key]}"
            )
        out.append((key, value if sep else True))
    return tuple(out)


def slurm_options_from_args(args: argparse.Namespace) -> SlurmOptions:
    """`SlurmOptions` from parsed `add_cluster_options` arguments (unset options keep env/site values)."""
    given: dict[str, Any] = {
        k: getattr(args, k, None)
        for k in ("partition", "account", "time_min", "gpus_per_node", "gres", "cpus_per_task", "mem")
    }
    kwargs = {k: v for k, v in given.items() if v is not None}
    if getattr(args, "site", None):
        kwargs["site"] = load_site(args.site)
    kwargs["sbatch"] = parse_sbatch(getattr(args, "sbatch", None) or [])
    return SlurmOptions(**kwargs)


# ----------------------------------------------------------------------------------- parameters
def estimate_for(config: RunConfig, slurm: SlurmOptions, *, export: bool = False) -> RunEstimate | None:
    """The run's estimate on the site's cluster file, or None without a site that names one. `export`: its
    export job's (`prunex.cluster.estimate.estimate_export`, `RunConfig.export_job`)."""
    site = slurm.site
    if site is None or not site.cluster:
        return None
    try:
        return (estimate_export if export else estimate_run)(config, site.cluster, site.time_limit, site.max_time_min)
    except EstimateError as e:
        if slurm.time_min:
            return None
        raise ConfigError(f"run {config.name}: {e}") from None
    except CalibrationError as e:  # the site names a cluster file that is missing or unreadable
        raise ConfigError(f"site {site.name} ({site.path}): its cluster file: {e}") from None


def estimate_jobs_for(config: RunConfig, slurm: SlurmOptions) -> list[RunEstimate] | None:
    """The estimates of every job of the run (its training, its export job: `estimate_jobs`), or None
    without a site that names a cluster file."""
    train = estimate_for(config, slurm)
    if train is None:
        return None
    export = estimate_for(config, slurm, export=True) if config.export_job else None
    return [train] + ([export] if export is not None else [])


def executor_parameters(
    config: RunConfig, slurm: SlurmOptions | None = None, estimate: RunEstimate | None = None, *, export: bool = False
) -> dict[str, Any]:
    """The submitit parameters of a run (pure; `--dry-run` prints them, golden files pin them).

    `estimate`: the run's `estimate_for` when the caller has it already (else computed here). `export`: those
    of the run's export job instead (`RunConfig.export_job`, `prunex.training.export_step`): one node, one
    task, one GPU unless the run is on the CPU (a `--gres` that ends in a count asks for one of its kind),
    the memory of one GPU, and the time limit of `prunex.cluster.estimate.estimate_export`."""
    name = f"prunex-{config.experiment}-{config.name}"[: 120 - 7 * export] + "-export" * export
    nodes, tasks = (1, 1) if export else (config.nodes, config.procs_per_node)
    if config.executor in ("debug", "local"):
        return {"name": name, "nodes": 1, "tasks_per_node": nodes * tasks, "timeout_min": 24 * 60}
    slurm = slurm or SlurmOptions()
    site = slurm.site
    if slurm.time_min:
        time_min = slurm.time_min
    else:
        if estimate is None:
            estimate = estimate_for(config, slurm, export=export)
        time_min = estimate.time_limit_min if estimate is not None else DEFAULT_TIME_MIN
    params: dict[str, Any] = {"name": name, "nodes": nodes, "tasks_per_node": tasks, "timeout_min": time_min}
    if slurm.partition_or_site:
        params["slurm_partition"] = slurm.partition_or_site
    if slurm.account:
        params["slurm_account"] = slurm.account
    gres, gpus = slurm.gres, slurm.gpus_per_node
    if export and gres:
        gres = re.sub(r":\d+$", ":1", gres)
    if export and gpus:
        gpus = 1
    if gres is None and gpus is None and config.device != "cpu":  # one GPU per task
        gres = site.gres_for(tasks) if site is not None else None
        gpus = None if gres else tasks
    if gres:
        params["slurm_gres"] = gres
    elif gpus:
        params["gpus_per_node"] = gpus
    cpus = slurm.cpus_per_task or (site.cpus_per_task if site else None)
    if cpus:
        params["cpus_per_task"] = cpus
    if export:  # the site's memory of one GPU, else what the run asked for
        mem = (site.mem_for(1) if site else None) or slurm.mem
    else:
        mem = slurm.mem or (site.mem_for(tasks) if site else None)
    if mem:
        params["slurm_mem"] = mem
    if site is not None and site.setup_lines():
        params["slurm_setup"] = site.setup_lines()
    if slurm.sbatch:
        params["slurm_additional_parameters"] = dict(slurm.sbatch)
    return params


def gpus_per_node_asked(slurm: SlurmOptions) -> int | None:
    """The GPUs per node that `--gres` (its `gpu[:TYPE][:N]` entry; N defaults to 1) or else `--gpus-per-node` asks
    for; None where neither says (the site's gres for one GPU per task is used) or the gres names no GPU count."""
    if not slurm.gres:
        return slurm.gpus_per_node
    for part in slurm.gres.split(","):
        m = re.fullmatch(r"gpu(?::([^:]+))?(?::(\d+))?", part.strip())
        if m:
            count = m.group(2) or (m.group(1) if m.group(1) and m.group(1).isdigit() else None)
            return int(count) if count else 1
    return None


# ----------------------------------------------------------------------------------- refusals
def check_submission(config: RunConfig, slurm: SlurmOptions | None = None, *, export: bool = False) -> None:
    """Refuse, in one line, a Slurm run that cannot work, before anything is submitted (module docstring); a local
    or debug run on cuda that this machine cannot place (`check_local_gpus`). `export`: the run's export job."""
    if config.executor != "slurm":  # local and debug runs: every rank checks at start (prunex.training.device)
        if config.device == "cuda":  # ...on this machine, where what it sees can be checked now
            trained = (run_dir_for(config) / TRAINED).exists()  # its next job is the export job of one task
            check_local_gpus(config, 1 if export or trained else config.world_size)
        return
    slurm = slurm or SlurmOptions()
    mini = on_minicluster()
    if not mini and not slurm.account:
        raise ConfigError(
            "--account is required on a Slurm cluster: the project to bill (e.g. --account project_2001234, "
            "or PRUNEX_SLURM_ACCOUNT)"
        )
    if config.device == "cuda" and slurm.gpus_per_node == 0 and not slurm.gres:
        raise ConfigError(
            "--gpus-per-node 0 asks for no GPU, and the run is on cuda: give the GPUs per node, or --device cpu"
        )
    # What the site's nodes and partition hold (clusters/sites/NAME.json): more would pend for ever or be refused by
    # sbatch after the queue's wait (a node of 8 tasks asks for gpu:v100:8 on nodes of 4 GPUs)
    site = slurm.site
    site_gres = site is not None and site.gpus_per_node and not slurm.gres and slurm.gpus_per_node is None
    if site_gres and config.device == "cuda" and config.procs_per_node > site.gpus_per_node:
        raise ConfigError(
            f"{config.procs_per_node} tasks per node on cuda, and site {site.name}'s nodes have "
            f"{site.gpus_per_node} GPUs: each task needs one of its own; run at most {site.gpus_per_node} per node"
        )
    if (
        site is not None
        and site.max_nodes
        and config.nodes > site.max_nodes
        and slurm.partition in (None, site.partition)
    ):
        raise ConfigError(
            f"{config.nodes} nodes: site {site.name}'s partition {site.partition} takes at most {site.max_nodes} per "
            "job (its file in clusters/sites/); run on fewer nodes, or name another partition with --partition"
        )
    # Fewer GPUs on a node than tasks: every task sees the node's GPUs and takes the one of its local rank, so the
    # job started and each rank stopped (`prunex.training.device.cuda_index`). Not where sbatch binds a GPU per task.
    asked = gpus_per_node_asked(slurm)
    bound = any(key in ("gpus-per-task", "gpus_per_task") for key, _ in slurm.sbatch)
    if config.device == "cuda" and asked is not None and 0 < asked < config.procs_per_node and not bound:
        given = f"--gres {slurm.gres}" if slurm.gres else f"--gpus-per-node {slurm.gpus_per_node}"
        raise ConfigError(
            f"{given} gives a node {asked} GPU(s) for its {config.procs_per_node} tasks on cuda, and each task needs "
            f"one of its own: ask for {config.procs_per_node} per node, or run {asked} tasks per node"
        )
    try:
        check_this_torch()  # submitit runs the job with this same Python
        if config.device == "cuda":
            if mini:
                raise ConfigError("the mini cluster has no GPUs: run with --device cpu")
            check_gpu_build(slurm.site)
    except UnsupportedEnvironment as e:
        raise ConfigError(str(e)) from None


def check_local_gpus(config: RunConfig, tasks: int) -> None:
    """A cuda job of `tasks` processes on the local or debug executor, which all run on this machine, each on a GPU
    of its own (`prunex.training.device.cuda_index`; two ranks on one GPU are refused at start): this machine must
    show each one. Before, the run was launched, made its directory, and each rank stopped at start."""
    import torch  # only for a cuda run on this machine

    shown = os.environ.get("CUDA_VISIBLE_DEVICES")
    visible = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if visible < tasks:
        where = "no CUDA GPU" if visible == 0 else f"{visible} GPU(s)"
        raise ConfigError(
            f"--device cuda on the {config.executor} executor runs {tasks} process(es) on this machine, "
            f"where torch {torch.__version__} sees {where}"
            + (f" (CUDA_VISIBLE_DEVICES={shown!r})" if shown is not None else "")
            + "; each needs a GPU of its own: run with --device cpu, or on a cluster with --executor slurm"
        )


def check_gpu_build(site: Site | None) -> None:
    """This torch against this host's GPU, else the site's GPU (a login node has none)."""
    import torch

    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        capability, gpu = (props.major, props.minor), props.name
    elif site is not None and site.gpu_capability is not None:
        capability, gpu = site.gpu_capability, f"{site.name}'s {site.gpu_name or 'GPU'}"
    else:
        if torch.version.cuda is None:
            raise UnsupportedEnvironment(f"torch {torch.__version__} is a CPU-only build: --device cuda needs CUDA")
        return  # nothing to check the arch list against here; every rank checks at start
    arch = torch.cuda.get_arch_list()
    check_cuda_arch(arch, capability, torch_version=torch.__version__, cuda_version=torch.version.cuda, gpu=gpu)


class SubmitError(ConfigError):
    """sbatch refused the job; the message carries Slurm's own reason."""


@contextlib.contextmanager
def submission(what: str) -> Iterator[None]:
    """Turn a refused `sbatch` into one `SubmitError` line (submitit would print Slurm's stderr, then raise)."""
    from submitit.core.utils import FailedJobError

    held = io.StringIO()
    try:
        with contextlib.redirect_stderr(held):
            yield
    except FailedJobError as e:
        message = "; ".join(ln.strip() for ln in str(e).splitlines() if ln.strip()) or held.getvalue().strip()
        raise SubmitError(f"sbatch refused {what}: {message or 'no message'}") from None
    except FileNotFoundError as e:
        if "sbatch" not in str(e):
            raise
        raise SubmitError(f"cannot submit {what}: sbatch is not on PATH (not a Slurm login node?)") from None
    else:
        sys.stderr.write(held.getvalue())  # anything else said while submitting
