"""tests/distributed.py, the harness itself: a pool's processes end with the test process that started them."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

TESTS = Path(__file__).resolve().parent

# A test process that starts a 1-rank pool, prints the pool process's pid and exits without closing it
# (`os._exit` skips the atexit `_shutdown`): its pool's process must not outlive it. After two passing CI runs
# (2026-11-27) the 1-rank pool of test_timing.py was found orphaned, its pytest worker gone.
SCRIPT = f"""
import os, sys
sys.path.insert(0, {str(TESTS)!r})
from distributed import run_distributed

def pid(rank):
    return os.getpid()

if __name__ == "__main__":
    print(run_distributed(pid, 1, timeout_s=120)[0], flush=True)
    os._exit(0)
"""


def test_a_pool_process_ends_with_the_process_that_started_it(tmp_path: Path) -> None:
    script = tmp_path / "parent.py"
    script.write_text(SCRIPT)
    # the pool process's output goes to a file, not to a pipe it could hold open after its parent is gone
    out = tmp_path / "out.txt"
    with out.open("w") as f:
        parent = subprocess.run([sys.executable, str(script)], stdout=f, stderr=subprocess.STDOUT, timeout=180)
    text = out.read_text()
    assert parent.returncode == 0, text
    worker = int(text.split()[0])
    deadline = time.monotonic() + 10  # PR_SET_PDEATHSIG: at once; the polling fallback: within 0.5 s
    while time.monotonic() < deadline and _alive(worker):
        time.sleep(0.1)
    alive = _alive(worker)
    if alive:
        os.kill(worker, 9)
    assert not alive, f"pool process {worker} outlived its parent"


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"  # a zombie has ended (reaped by init soon after)
