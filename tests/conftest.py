"""Shared fixtures: the digits data root, and the fault table.

The fault table: each injected fault (tests/faults, and the interrupt tests of tests/minicluster),
the seconds until every process had exited, the message shown, and what was left on disk, printed
at the end of the pytest session (and written as CSV to $PRUNEX_FAULT_TABLE when set), so a run of
the suite documents its own outcome.
"""

from __future__ import annotations

import csv
import json
import os
import platform
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

# One instruction set for the CPU kernels of every test process (this one, the spawned ranks and the
# subprocesses, which inherit the environment; set before torch loads them), so that tests comparing runs
# in different processes of one host compare the same kernels. AVX2 is what every x86-64 CI host here has.
# The behaviour pins do not rely on it alone: they run in numerics of their own (tests/pins.py). Explicit
# settings win.
if platform.machine().lower() in ("x86_64", "amd64"):
    os.environ.setdefault("ATEN_CPU_CAPABILITY", "avx2")
    os.environ.setdefault("ONEDNN_MAX_CPU_ISA", "AVX2")
# The suite keeps both cores busy with three pytest workers and their processes: an OpenMP thread that has
# finished its share spins for its next task (libgomp's default) on a core another process needs. Passive
# waiting changes no result, only who gets the core (measured: the smoke profile alone used 11% less CPU).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


@pytest.hookimpl(hookwrapper=True)  # the old-style wrapper: also on the GPU machines' older pytest
def pytest_collection(session: pytest.Session) -> Iterator[None]:
    """Collection imports the test modules, torch and the trainer with them: with the collector paused, as a
    rank's start does (`prunex.startup`)."""
    from prunex.startup import collector_paused  # after the sys.path lines above

    with collector_paused():
        yield


@pytest.fixture(scope="session")
def data_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data root holding the offline digits dataset (made once per test session)."""
    from prunex.training.data import make_digits

    root = tmp_path_factory.mktemp("data")
    make_digits(root)
    os.environ["PRUNEX_DATA"] = str(root)
    return root


FAULT_ROW = "fault_row"  # the user property a fault's outcome travels in (from pytest-xdist's workers too)


@pytest.fixture
def fault_report(record_property: Callable[[str, object], None]) -> Callable[..., None]:
    def record(fault: str, exit_s: float | None, message: str, on_disk: str) -> None:
        row = {
            "fault": fault,
            "all exited after": "-" if exit_s is None else f"{exit_s:.1f} s",
            "message": message.strip().splitlines()[-1] if message.strip() else "",
            "left on disk": on_disk,
        }
        record_property(FAULT_ROW, json.dumps(row))

    return record


# The modules that run on the pools of gloo processes of tests/distributed.py (started once per pytest process).
# (test_golden_runs.py and test_divergence.py run on pools of their own environment, closed with their module:
# groups of their own, so that the scheduler can run them beside the shared pool's group.)
POOL_MODULES = {
    f"test_{m}.py"
    for m in "admm_convex admm_method baselines checkpoint comm device evaluation exchange hsadmm_comm "
    "pipeline run_ddp run_hsadmm timing wire".split()
}
# The longest groups first, longest first, so that no worker starts a long one at the end while the others idle;
# pytest's order otherwise. Under pytest-xdist this order is the collection's only: its LoadScopeScheduling queues the
# scopes by their number of tests (`--loadscope-reorder`, on by default), so a worker takes the groups of many tests
# first (2026-12-07: test_faults.py started at 274 s of a 570 s suite). Queued longest first instead
# (`config.option.loadscopereorder = False` in `pytest_xdist_make_scheduler`, this list reordered by that suite's
# group times: minicluster, test_faults, test_export, test_golden_runs, pool, test_experiments, test_resume,
# test_methods_of_your_own, test_analysis, test_run_all, test_interrupts), the same suite took 618 s of pytest
# against 588 s, one run each on the 2-core Zen 3 VM: the groups' times depend on what runs beside them (the mini
# cluster's took 365 s instead of 440, test_resume 201 instead of 89), so it was left as it is. Seconds each group
# took in a suite on two workers (`--durations=0`, 2-core AMD EPYC, 2026-11-26): minicluster 365, test_faults 121,
# test_golden_runs 102, test_experiments 94, pool 88, test_run_all 76, test_resume 54, test_export 42, test_interrupts
# 36, test_analysis 26; every other under 20.
FIRST = (
    "minicluster",
    "test_faults.py",
    "test_golden_runs.py",
    "test_experiments.py",
    "pool",
    "test_run_all.py",
    "test_resume.py",
    "test_export.py",
    "test_interrupts.py",
    "test_analysis.py",
)


def xdist_group_of(nodeid: str) -> str:
    """The group a test runs in under pytest-xdist (one worker runs a group, one test after another):
    every mini-cluster test together (they share the session's cluster, and the others bring up
    clusters of their own that must not overlap), the modules that use the process pools together (one
    worker starts the pools, not each), every other module by itself (its module-scoped runs, such as
    tests/test_run_hsadmm.py's, are trained once, not once per worker)."""
    path = Path(nodeid.split("::", 1)[0])
    if "minicluster" in path.parts:
        return "minicluster"
    return "pool" if path.name in POOL_MODULES else path.as_posix()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        group = xdist_group_of(item.nodeid)
        return next((i for i, name in enumerate(FIRST) if name == group or group.endswith("/" + name)), len(FIRST))

    items.sort(key=rank)  # stable: the order within a group stays


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """`--dist loadscope` (what `./run_all.sh test` asks for) with `test_group` as the scope. (pytest-xdist's
    own `loadgroup` does not group under pytest 9.2: the group suffix it writes into `item._nodeid`
    never reaches the node ids it schedules by.)"""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_group_of(nodeid)

    return GroupScheduling(config, log)


def pytest_terminal_summary(terminalreporter) -> None:
    rows = []
    for key in ("passed", "failed"):
        for report in terminalreporter.stats.get(key, []):
            if getattr(report, "when", None) != "call":
                continue
            rows += [json.loads(v) for k, v in getattr(report, "user_properties", []) if k == FAULT_ROW]
    if not rows:
        return
    terminalreporter.write_sep("=", "fault injection: outcome of each fault")
    for row in rows:
        terminalreporter.write_line(f"- {row['fault']}: all processes exited after {row['all exited after']}")
        terminalreporter.write_line(f"    message: {row['message']}")
        terminalreporter.write_line(f"    on disk: {row['left on disk']}")
    path = os.environ.get("PRUNEX_FAULT_TABLE")
    if path:
        with open(path, "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
