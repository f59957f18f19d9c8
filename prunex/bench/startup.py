"""A fresh process's CPU to load the trainer and exit, with and without `prunex.startup.collector_paused`.

Run::

    PYTHONPATH=. python -m prunex.bench.startup [--runs 8] [--module prunex.training.train]

Starts ``runs`` fresh interpreters per variant, the variants interleaved (run 1 of each, then run 2 of each,
...), so that a machine whose speed drifts (a shared VM) moves every variant alike. Each child imports
``--module`` and exits; its user + system CPU is read from the parent's `resource.getrusage` of waited
children. The variants:

- ``as it was``: the import, nothing else;
- ``frozen at the end``: the import, then ``gc.freeze()`` (what a job's task did at its end before
  `prunex.startup`: the collector's walk at exit skipped);
- ``paused, not frozen``: the import with the collector off, then on again;
- ``paused, then frozen``: the import inside `collector_paused`, what job tasks, preflight and the test
  pools run.

It prints the median and the range per variant, and the ratio of each median to the first variant's
(measured in the same run; below 1 is less CPU). The numbers are this machine's: the import's share of a
rank's start-up, and so the saving, differs with the CPU, the Python version and the file system.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import resource
import statistics
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from prunex.training.log import hardware_name

ROOT = Path(__file__).resolve().parents[2]

VARIANTS: dict[str, str] = {
    "as it was": "import {module}",
    "frozen at the end": "import gc\nimport {module}\ngc.freeze()",
    "paused, not frozen": "import gc\ngc.disable()\nimport {module}\ngc.enable()",
    "paused, then frozen": "from prunex.startup import collector_paused\nwith collector_paused():\n    import {module}",
}


def child_cpu_s(code: str) -> float:
    """User + system CPU seconds of one fresh interpreter running ``code`` (from the repository root)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure(module: str, runs: int) -> dict[str, list[float]]:
    """Each variant's CPU seconds per run, the variants interleaved."""
    out: dict[str, list[float]] = {name: [] for name in VARIANTS}
    for _ in range(runs):
        for name, code in VARIANTS.items():
            out[name].append(child_cpu_s(code.format(module=module)))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m prunex.bench.startup", description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=8, help="fresh interpreters per variant (median and range)")
    parser.add_argument("--module", default="prunex.training.train", help="what each child imports")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error(f"--runs must be >= 1, got {args.runs}")
    try:
        found = importlib.util.find_spec(args.module) is not None
    except ImportError:  # a parent package that is not there
        found = False
    if not found:  # here, not as a traceback of the first child
        parser.error(f"--module {args.module}: no such module on this Python's path")
    print(
        f"# {hardware_name('cpu')}, {os.cpu_count()} CPUs, Python {platform.python_version()}: "
        f"`import {args.module}` and exit, user + system CPU of the child, {args.runs} runs per variant interleaved"
    )
    times = measure(args.module, args.runs)
    reference = statistics.median(times["as it was"])
    print(f"{'variant':<22} {'median s':>9} {'min s':>7} {'max s':>7} {'ratio':>6}")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"{name:<22} {median:>9.2f} {min(values):>7.2f} {max(values):>7.2f} {median / reference:>6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
