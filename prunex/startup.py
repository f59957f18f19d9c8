"""A fresh process's load of torch and the trainer, with the cyclic garbage collector paused.

Every rank of a job, every export job, every launcher (its preflight builds the dataset and the model it
checks) and every driver starts by importing torch, torchvision, torch._dynamo (which torchvision, DDP and
the optimizer all import) and pandas: millions of objects, none of them garbage, and Python's collector walks
them all each time its oldest generation is due while they load, and once more as the interpreter exits.
`collector_paused` around those imports loads them with the collector off, then freezes what exists
(`gc.freeze`: moved to the permanent generation, never walked again) and turns the collector back on.
`python -m prunex.bench.startup` measures it (fresh interpreters that import `prunex.training.train` and exit,
the variants interleaved). On a 2-core AMD EPYC VM (Zen 3), 8 runs per variant, user + system CPU, median
(ratio to the first): as it was 8.59 s; with `gc.freeze()` after the imports, what a job's task did at its end
before (`prunex.cluster.task`), 6.42 s (0.75); paused, not frozen, 7.35 s (0.86); paused, then frozen, 5.80 s
(0.67). So the freeze is most of it, and a job's task saves ~10% against what it had; a launcher, which froze
nothing, a third. (A shell loop of the same variants, user CPU alone, earlier on the same VM: 7.1, 5.9, 6.5,
4.4 s; this VM's speed drifts by more than a tenth between runs.) Nothing that
runs after the imports changes: the collector is on again for training, and what the imports made was
reachable (the few cycles they left as garbage stay allocated).

Where: at a process's start, before it has made garbage of its own (a cycle that is garbage when the freeze
comes is kept for good). A job's task (`prunex.cluster.task`, not under the debug executor, whose jobs run in
the driver's process), the launcher's and a driver's first preflight (`prunex.cluster.preflight`, before
anything trains there). The freeze happens only when the block imported something, so a process that enters
the block again, with everything already loaded, neither freezes what it made since nor pays anything.

Preflight also runs in processes that are not ours: a researcher's notebook or script that calls
`prunex.cluster.launch.launch`. There a freeze would keep for good every cycle of theirs that was garbage at
that moment (a traceback's frames and the tensors they hold), so preflight freezes only in a process started as
one of this repository's commands (`started_as_command`: `python -m prunex.run`, `./run_all.sh`'s `python -m
experiments.run_all`), and elsewhere only pauses the collector while it imports.
"""

from __future__ import annotations

import contextlib
import gc
import sys
from collections.abc import Iterator

# the top-level packages whose modules are this repository's commands (`python -m <package>.<module>`)
COMMAND_PACKAGES = ("prunex", "experiments", "analysis", "benchmarks")


def started_as_command(main_module: str | None = None) -> bool:
    """Whether this process was started as one of this repository's commands (`python -m prunex.run`,
    `python -m experiments.run_all`, ...), i.e. is a process of its own rather than a user's notebook, script or
    test runner that imports the library. `main_module`: the name `python -m` ran (default: this process's,
    `__main__.__spec__.name`; none for `python -c`, a script or a notebook kernel's own)."""
    if main_module is None:
        spec = getattr(sys.modules.get("__main__"), "__spec__", None)
        main_module = getattr(spec, "name", None) or ""
    return main_module.split(".")[0] in COMMAND_PACKAGES


@contextlib.contextmanager
def collector_paused(*, freeze: bool = True) -> Iterator[None]:
    """Run the block (lazy imports of torch and what needs it) with the cyclic collector off; if the block
    loaded modules and `freeze`, freeze every object that exists at its end (`gc.freeze`); then the collector
    is as it was before the block. `freeze=False` where the process may not be ours (module docstring)."""
    loaded = len(sys.modules)
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if freeze and len(sys.modules) > loaded:
            gc.freeze()
        if enabled:
            gc.enable()
