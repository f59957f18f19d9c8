"""`prunex.startup.collector_paused`: the collector off for the block, on again after it as it was, and a
freeze only when the block loaded modules (in a fresh interpreter: a freeze in pytest's own would keep
its objects for the rest of the session); and `prunex.bench.startup`, which measures what it saves."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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
