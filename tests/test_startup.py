"""`prunex.startup.collector_paused`: the collector off for the block, on again after it as it was, and a
freeze only when the block loaded modules (in a fresh interpreter: a freeze in pytest's own would keep
its objects for the rest of the session); and `prunex.bench.startup`, which measures what it saves."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from prunex.startup import started_as_command

ROOT = Path(__file__).resolve().parent.parent

_CHECKS = """
import gc, sys
from prunex.startup import collector_paused

assert gc.isenabled()
frozen = gc.get_freeze_count()
with collector_paused():
    assert not gc.isenabled()
assert gc.isenabled()
assert gc.get_freeze_count() == frozen, "froze without loading anything"
new = "xml.dom.minidom"
assert new not in sys.modules
with collector_paused():
    __import__(new)
assert gc.isenabled() and gc.get_freeze_count() > frozen, "loaded a module and froze nothing"
frozen = gc.get_freeze_count()
with collector_paused():
    __import__(new)  # loaded already: nothing to freeze
assert gc.get_freeze_count() == frozen
gc.disable()
with collector_paused():
    __import__("xml.sax.saxutils")
assert not gc.isenabled(), "a collector that was off before the block is on after it"
try:
    with collector_paused():
        raise KeyError("in the block")
except KeyError:
    pass
assert not gc.isenabled()
gc.enable()
try:
    with collector_paused():
        raise KeyError("in the block")
except KeyError:
    pass
assert gc.isenabled(), "an exception in the block left the collector off"
print("ok")
"""


def test_the_collector_is_paused_for_the_block_and_frozen_only_when_it_loaded_modules() -> None:
    proc = subprocess.run([sys.executable, "-c", _CHECKS], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stdout + proc.stderr


def test_the_startup_bench_times_every_variant_against_the_first(capsys) -> None:
    from prunex.bench import startup as bench

    assert bench.main(["--runs", "2", "--module", "xml.dom.minidom"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = {line[:22].strip(): line[22:].split() for line in lines[2:]}
    assert list(rows) == list(bench.VARIANTS), lines
    for name, (median, low, high, _ratio) in rows.items():
        assert 0 < float(low) <= float(median) <= float(high), (name, rows[name])
    assert rows["as it was"][3] == "1.00"
    assert "collector_paused" in bench.VARIANTS["paused, then frozen"]  # the function itself, not a copy of it


@pytest.mark.parametrize(
    ("main_module", "ours"),
    [
        ("prunex.run", True),  # python -m prunex.run: a launcher
        ("experiments.run_all", True),  # ./run_all.sh's driver
        ("benchmarks.pruned", True),
        ("", False),  # python -c, a script run by path
        ("ipykernel_launcher", False),  # a Jupyter kernel
        ("pytest", False),
        ("prunexlike.tool", False),
    ],
)
def test_a_process_is_ours_when_started_as_one_of_the_commands(main_module: str, ours: bool) -> None:
    assert started_as_command(main_module) is ours


_USERS_SCRIPT = """
import gc, sys, weakref
from prunex.cluster.preflight import preflight
from prunex.startup import started_as_command
from prunex.training.config import RunConfig

assert not started_as_command()  # python -c: a user's script
class Node:
    pass
cycle = Node()
cycle.me = cycle  # garbage of the user's, a cycle only the collector frees
alive = weakref.ref(cycle)
del cycle
gc.disable()  # not collected before preflight: still there when preflight's imports end
config = RunConfig(method="ddp", dataset="digits", data_root=sys.argv[1], results=sys.argv[2], name="users")
preflight(config)  # imports torch and torchvision
gc.enable()
assert "torchvision" in sys.modules, "preflight imported nothing: the check below would prove nothing"
assert gc.get_freeze_count() == 0, "preflight froze a user's process"
gc.collect()
assert alive() is None, "the user's garbage outlived a collection"
print("ok")
"""


def test_preflight_in_a_users_process_freezes_none_of_its_garbage(data_root: Path, tmp_path: Path) -> None:
    """A researcher's script or notebook that launches a run: preflight's imports pause the collector but do not
    freeze, so a cycle of theirs that was garbage then is still collected (`prunex.startup`)."""
    proc = subprocess.run(
        [sys.executable, "-c", _USERS_SCRIPT, str(data_root), str(tmp_path / "results")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stdout + proc.stderr
