"""Preflight check: one screen for a person about to spend GPU-hours, and the first thing to fix.

    python -m experiments.doctor [--profile paper] [--site puhti] [--account project_2001234] [--data-root DIR]
    ./run_all.sh --check [same options]

This module holds the checks and the command line; the command itself is `experiments.doctor`, which
hands it the profiles and their runs (`Profiles`): the library never imports the experiments.
`python -m prunex.cluster.doctor` refuses in one line naming that command.

Checks, in order (each line: ok, FAIL, or -- for not applicable / not checked): Python; torch's
version, CUDA build and the architectures it has kernels for; this host's GPUs with their compute
capability and whether the build runs on them; the site's GPU against the build (a login node has
no GPU: the site file names it); NCCL; whether Slurm answers (`sinfo`) and knows the partition; the
resolved site, partition, gres, CPUs, memory and setup; the account (required on a real Slurm); the
profile's dataset at the data root; the profile's runs and their estimated GPU-hours (performance
model on the site's cluster file, or `--cluster FILE`).

Exit code 0 when nothing failed, 1 with the first failure repeated on the last line, 2 for bad
options. `run_all.sh` runs it before it submits anything to a real Slurm cluster.

How to read it: a FAIL on `gpu kernels` means the jobs would die at start on every rank (install a
torch whose arch list covers the GPU); on `account` or `slurm` nothing would be accepted; on
`dataset` every run would stop before training. `--` lines are informational (e.g. no GPU on a
login node: each rank checks its own GPU at start).
"""

from __future__ import annotations

import argparse
import getpass
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass

from prunex.cluster import compat
from prunex.cluster.estimate import EstimateError, estimate_jobs
from prunex.cluster.exits import one_line
from prunex.cluster.slurm import (
    SlurmOptions,
    add_cluster_options,
    executor_parameters,
    on_minicluster,
    slurm_options_from_args,
)
from prunex.training.config import EXECUTOR_NAMES, ConfigError, RunConfig

OK, FAIL, NA = "ok", "FAIL", "--"
SLURM_TIMEOUT_S = 15.0


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # OK, FAIL or NA
    detail: str


@dataclass
class Context:
    profile: str
    executor: str
    device: str
    slurm: SlurmOptions
    data_root: str
    cluster: str | None
    slurm_answers: bool | None = None
    only: str = ""  # a glob of experiment names (`./run_all.sh --only`): their runs alone are checked and estimated


def _run(cmd: list[str]) -> tuple[int, str]:
    """(exit code, stdout or stderr) of a command, bounded in time; 127 when it is not installed."""
    if shutil.which(cmd[0]) is None:
        return 127, f"{cmd[0]} not found on PATH"
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=SLURM_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return 124, f"{' '.join(cmd)} did not answer within {SLURM_TIMEOUT_S:g} s"
    return p.returncode, (p.stdout if p.returncode == 0 else (p.stderr or p.stdout)).strip()


def slurm_answers() -> bool:
    return _run(["sinfo", "-h", "-o", "%P"])[0] == 0


# ----------------------------------------------------------------------------------------- checks
def check_python(ctx: Context) -> Check:
    try:
        compat.check_python()
    except compat.UnsupportedEnvironment as e:
        return Check("python", FAIL, str(e))
    v = ".".join(map(str, sys.version_info[:3]))
    return Check("python", OK, f"{v} ({sys.executable}); needs >= {'.'.join(map(str, compat.PYTHON_MIN))}")


def check_torch(ctx: Context) -> Check:
    try:
        import torch
    except ImportError as e:
        return Check("torch", FAIL, f"cannot import torch: {e}")
    build = f"CUDA {torch.version.cuda}" if torch.version.cuda else "CPU-only build"
    archs = " ".join(torch.cuda.get_arch_list()) if torch.version.cuda else "none"
    detail = f"{torch.__version__} ({build}; kernels for {archs}); supported {compat.TORCH_RANGE}"
    try:
        compat.check_torch_version(torch.__version__)
    except compat.UnsupportedEnvironment as e:
        return Check("torch", FAIL, str(e))
    if ctx.device == "cuda" and torch.version.cuda is None:
        return Check("torch", FAIL, f"{detail}: --device cuda needs a CUDA build")
    return Check("torch", OK, detail)


def check_gpus(ctx: Context) -> Check:
    import torch

    if not torch.cuda.is_available():
        where = " (a login node? each rank checks its own GPU at start)" if ctx.device == "cuda" else ""
        return Check("gpus", NA, f"none visible on this host{where}")
    rows, bad = [], None
    for i in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(i)
        rows.append(f"{i}: {p.name} ({p.major}.{p.minor})")
        try:
            compat.check_cuda_arch(
                torch.cuda.get_arch_list(),
                (p.major, p.minor),
                torch_version=torch.__version__,
                cuda_version=torch.version.cuda,
                gpu=p.name,
            )
        except compat.UnsupportedEnvironment as e:
            bad = bad or str(e)
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    detail = "; ".join(rows) + (f" (CUDA_VISIBLE_DEVICES={visible})" if visible is not None else "")
    return Check("gpus", FAIL, bad) if bad else Check("gpus", OK, detail)


def check_site_gpu(ctx: Context) -> Check:
    import torch

    site = ctx.slurm.site
    if site is None or site.gpu_capability is None:
        return Check("gpu kernels", NA, "no site GPU to check the build against (give --site)")
    cap = site.gpu_capability
    what = f"{site.name}'s {site.gpu_name or 'GPU'}"
    if ctx.device == "cpu":
        return Check("gpu kernels", NA, f"runs on the CPU (--device cpu); {what} not used")
    try:
        compat.check_cuda_arch(
            torch.cuda.get_arch_list(), cap, torch_version=torch.__version__, cuda_version=torch.version.cuda, gpu=what
        )
    except compat.UnsupportedEnvironment as e:
        return Check("gpu kernels", FAIL, str(e))
    return Check("gpu kernels", OK, f"{what} ({cap[0]}.{cap[1]} = {compat.sm_name(cap)}) is covered by this build")


def check_nccl(ctx: Context) -> Check:
    import torch
    import torch.distributed as dist

    if not dist.is_nccl_available() or torch.version.cuda is None:
        status = FAIL if ctx.device == "cuda" else NA
        return Check("nccl", status, "not in this torch build" + (": --device cuda needs it" if status == FAIL else ""))
    return Check("nccl", OK, ".".join(map(str, torch.cuda.nccl.version())))


def check_cpu_compress(ctx: Context) -> Check:
    """Whether H-SADMM's compress on the CPU runs the native kernel (never a failure: the torch path
    gives the same bytes, slower). With ``--device cuda``, which way the GPU packs and unpacks a bucket
    instead (`prunex.comm.shrink.BucketShrinkPlan`): Triton's kernels where Triton imports, else torch's
    index ops over the bucket, the same bytes."""
    if ctx.device == "cuda":
        from prunex.comm import bucket_kernels  # lazy: torch and Triton; the doctor starts, and reports, without them

        how = (
            "one Triton kernel per bucket (prunex.comm.bucket_kernels)"
            if bucket_kernels.available()
            else "torch's index_select / index_copy_ per bucket (Triton does not import here)"
        )
        return Check("cpu compress", NA, f"not used: the GPU packs and unpacks with {how}")
    from prunex.comm import native  # lazy: torch; the doctor starts, and reports, without it

    reason = native.unavailable_reason()
    if reason is None:
        return Check("cpu compress", OK, "native AVX-512F kernel built (prunex.comm.native)")
    return Check("cpu compress", NA, f"torch index_select, about half as fast: {reason}")


def check_slurm(ctx: Context) -> Check:
    if ctx.executor != "slurm":
        return Check("slurm", NA, f"not used (executor {ctx.executor})")
    rc, out = _run(["sinfo", "-h", "-o", "%P %a %D %G"])
    ctx.slurm_answers = rc == 0
    if rc != 0:
        return Check("slurm", FAIL, f"sinfo does not answer: {out.splitlines()[-1] if out else f'exit code {rc}'}")
    parts = [ln.split() for ln in out.splitlines() if ln.strip()]
    names = [p[0].rstrip("*") for p in parts]
    where = f"mini cluster at {os.environ['PRUNEX_MINICLUSTER_DIR']}" if on_minicluster() else "sinfo answers"
    listing = ", ".join(f"{p[0]} ({p[2]} nodes, {p[1]}, gres {p[3]})" for p in parts if len(p) >= 4)
    partition = ctx.slurm.partition_or_site
    if partition and partition not in names:
        return Check("slurm", FAIL, f"{where}, but partition {partition!r} is not among {', '.join(names)}")
    return Check("slurm", OK, f"{where}: {listing or ', '.join(names)}")


def check_site(ctx: Context, configs: list[RunConfig]) -> Check:
    site = ctx.slurm.site
    sample = configs[0] if configs else None
    if ctx.executor != "slurm" or sample is None:
        return Check("site", NA, site.name if site else "none")
    params = executor_parameters(sample, ctx.slurm)
    keys = {
        "slurm_partition": "partition",
        "slurm_gres": "gres",
        "gpus_per_node": "gpus/node",
        "cpus_per_task": "cpus/task",
        "slurm_mem": "mem",
    }
    shown = ", ".join(f"{label} {params[k]}" for k, label in keys.items() if k in params)
    setup = "; ".join(params.get("slurm_setup", [])) or "none"
    name = f"{site.name} ({site.path})" if site else "none (PRUNEX_SLURM_* / options only)"
    return Check("site", OK, f"{name}: {shown or 'nothing but nodes and tasks'}; setup: {setup}")


def check_account(ctx: Context) -> Check:
    if ctx.executor != "slurm":
        return Check("account", NA, "not used")
    if on_minicluster():
        return Check("account", NA, "the mini cluster has no accounts")
    account = ctx.slurm.account
    if not account:
        return Check(
            "account", FAIL, "missing: --account PROJECT or PRUNEX_SLURM_ACCOUNT (required on a Slurm cluster)"
        )
    rc, out = _run(["sacctmgr", "-nP", "show", "assoc", f"user={getpass.getuser()}", "format=account"])
    if rc != 0:
        return Check("account", OK, f"{account} (not verified: sacctmgr did not answer)")
    mine = sorted({ln.strip() for ln in out.splitlines() if ln.strip()})
    if mine and account not in mine:
        return Check("account", FAIL, f"{account} is not one of your accounts: {', '.join(mine)}")
    return Check("account", OK, account)


def check_dataset(ctx: Context, configs: list[RunConfig]) -> Check:
    """Every dataset the profile's runs read (the one-machine profiles read two: digits and Fashion-MNIST)."""
    from prunex.training.data import DatasetMissing, default_root, load_dataset  # lazy: torch, as check_cpu_compress

    if not configs:
        return Check("dataset", NA, "no runs")
    found = []
    for name, data_root in dict.fromkeys((c.dataset, c.data_root) for c in configs):
        root = ctx.data_root or data_root or str(default_root())
        try:
            train = load_dataset(name, root, train=True)
            test = load_dataset(name, root, train=False)
        except DatasetMissing as e:
            return Check("dataset", FAIL, str(e))
        found.append(f"{name} at {root}: {len(train)} train / {len(test)} test images")
    return Check("dataset", OK, "; ".join(found))


def check_runs(ctx: Context, configs: list[RunConfig]) -> Check:
    if not configs:
        only = f" matching --only {ctx.only}" if ctx.only else ""
        return Check("runs", FAIL, f"profile {ctx.profile} has no runs{only}")
    site = ctx.slurm.site
    cluster = ctx.cluster or (site.cluster if site else None)
    # experiments asking for the same training share one run (RESULTS/runs): estimate each once, as the
    # dry run of experiments.all totals them
    distinct = list({c.shared_id: c for c in configs}.values())
    head = (
        f"{len(configs)} runs ({len(distinct)} distinct trainings) of profile {ctx.profile}"
        f"{f' (--only {ctx.only})' if ctx.only else ''} on {ctx.executor}, "
        f"device {ctx.device}"
    )
    if not cluster:
        return Check("runs", NA, f"{head}; no GPU-hour estimate (give --site or --cluster FILE)")
    policy = site.time_limit if site else None
    try:
        # every job of each: its training and, for a multi-task --export, its one-GPU export job
        est = [e for c in distinct for e in estimate_jobs(c, cluster, policy, site.max_time_min if site else None)]
    except EstimateError as e:
        if ctx.slurm.time_min:  # as the dry run and the submission: the given limit stands where nothing estimates
            return Check(
                "runs", NA, f"{head}; --time-min {ctx.slurm.time_min} for every job, no GPU-hour estimate: {e}"
            )
        return Check("runs", FAIL, f"{head}; cannot estimate: {e}")
    hours = sum(e.gpu_hours for e in est)
    wall = sum(e.seconds for e in est) / 3600
    limits = [e.time_limit_min for e in est if e.time_limit_min is not None]
    span = f"; time limits {min(limits)}-{max(limits)} min" if limits else ""
    unit = "process-hours (CPU)" if ctx.device == "cpu" else "GPU-hours"  # seconds x ranks / 3600 either way
    where = f"{hours:.1f} {unit} estimated on {est[0].cluster} ({wall:.1f} h one after another)"
    return Check("runs", OK, f"{head}; {where}{span}")


# ----------------------------------------------------------------------------------------- driver
@dataclass(frozen=True)
class Profiles:
    """What the doctor asks of the experiments layer (`experiments.doctor` provides it)."""

    names: tuple[str, ...]  # the profiles `--profile` accepts
    device: Callable[[str, str], str]  # (profile, executor) -> the profile's device
    runs: Callable[[Context], list[RunConfig]]  # every run of ctx.profile, with the doctor's device and data root


def run_checks(ctx: Context, profiles: Profiles) -> list[Check]:
    checks: list[Check] = []
    for fn in (check_python, check_torch):
        checks.append(fn(ctx))
    if checks[-1].status == FAIL and checks[-1].detail.startswith("cannot import"):
        return checks
    simple: list[Callable[[Context], Check]] = [
        check_gpus,
        check_site_gpu,
        check_nccl,
        check_slurm,
        check_account,
        check_cpu_compress,
    ]
    checks += [fn(ctx) for fn in simple]
    try:
        configs = profiles.runs(ctx)
    except ConfigError as e:
        return checks + [Check("runs", FAIL, str(e))]
    checks.insert(6, check_site(ctx, configs))
    checks += [check_dataset(ctx, configs), check_runs(ctx, configs)]
    return checks


def render(checks: list[Check], header: str) -> str:
    width = max(len(c.name) for c in checks)
    lines = [header] + [f"  {c.status:4}  {c.name:{width}}  {c.detail}" for c in checks]
    failed = [c for c in checks if c.status == FAIL]
    lines.append(f"first to fix: {failed[0].name}: {failed[0].detail}" if failed else "nothing to fix")
    return "\n".join(lines)


def build_parser(profiles: tuple[str, ...]) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m experiments.doctor", description=__doc__.split("\n")[0])
    p.add_argument("--profile", choices=profiles, help="default: paper where Slurm answers")
    p.add_argument("--executor", choices=EXECUTOR_NAMES, help="default: slurm where Slurm answers")
    p.add_argument("--data-root", default="", help="default: $PRUNEX_DATA, else ./data")
    p.add_argument("--cluster", help="perf-model cluster file for the estimate (default: the site's)")
    p.add_argument("--only", default="", help="the experiments (a glob of names) whose runs are checked and estimated")
    add_cluster_options(p)
    return p


def main(argv: list[str] | None, profiles: Profiles) -> int:
    """`python -m experiments.doctor`: parse, check, print; 0 when nothing failed, 1 otherwise, 2 bad options."""
    args = build_parser(profiles.names).parse_args(argv)
    try:
        slurm = slurm_options_from_args(args)
    except ConfigError as e:
        print(f"error: {one_line(e)}", file=sys.stderr)
        return 2
    answers = slurm_answers()
    profile = args.profile or ("paper" if answers and not on_minicluster() else "regime")  # as ./run_all.sh picks
    executor = args.executor or (
        "slurm" if answers else {"paper": "slurm", "local": "local", "regime": "local", "smoke": "debug"}[profile]
    )
    device = args.device or profiles.device(profile, executor)
    ctx = Context(profile, executor, device, slurm, args.data_root, args.cluster, only=args.only)
    checks = run_checks(ctx, profiles)
    site = slurm.site.name if slurm.site else "none"
    header = f"prunex doctor: profile {profile}, executor {executor}, device {device}, site {site}"
    print(render(checks, header))
    return 1 if any(c.status == FAIL for c in checks) else 0


MOVED = "error: the preflight check is `python -m experiments.doctor` (it reads the profiles)"

if __name__ == "__main__":
    print(MOVED, file=sys.stderr)
    sys.exit(2)
