"""`python -m experiments.doctor`: the preflight check (`prunex.cluster.doctor`) over this suite's profiles.

    python -m experiments.doctor [--profile paper] [--site puhti] [--account project_2001234] [--data-root DIR]
    ./run_all.sh --check [same options]

The checks live in the library (`prunex.cluster.doctor`); the profiles and their runs are the experiments', so
this command hands them over (`prunex.cluster.doctor.Profiles`).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import importlib
import sys

from experiments import all as all_experiments
from experiments import cli
from experiments.common import PROFILE_NAMES, profile
from prunex.cluster import doctor
from prunex.training.config import RunConfig


def profile_runs(ctx: doctor.Context) -> list[RunConfig]:
    """Every run of the profile (the experiments' own `runs`), with the doctor's device and data root; with `--only`,
    those of the experiments it selects (a glob, as `experiments.all` reads it)."""
    out: list[RunConfig] = []
    for name in all_experiments.EXPERIMENTS:
        if ctx.only and not fnmatch.fnmatch(name, ctx.only):
            continue
        module = importlib.import_module(f"experiments.{name}")
        out += cli.resolve(name, module.runs, ctx.profile, ctx.executor, "results", device=ctx.device)
    if ctx.data_root:
        out = [dataclasses.replace(c, data_root=ctx.data_root) for c in out]
    return out


PROFILES = doctor.Profiles(PROFILE_NAMES, lambda name, executor: profile(name, executor).device, profile_runs)


def main(argv: list[str] | None = None) -> int:
    return doctor.main(argv, PROFILES)


if __name__ == "__main__":
    sys.exit(main())
