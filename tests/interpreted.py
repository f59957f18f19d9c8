"""Run a test module's check in Triton's interpreter, on the CPU: the GPU kernels' logic where no GPU is.

The interpreter is chosen when Triton is imported (``TRITON_INTERPRET=1``), so the check runs in a fresh
interpreter process with that variable set, importing the test module from this folder.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def run_in_triton_interpreter(module: str, call: str) -> None:
    """``module.call`` (``call``: the function call's source, e.g. ``"check(kernels=True)"``) in a fresh
    process under Triton's interpreter; skipped where Triton is not installed, failed with its stderr."""
    pytest.importorskip("triton")
    script = f"import {module} as t; t.{call}; print('ok')"
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=os.pathsep.join([str(Path(__file__).parent), os.getcwd()]))
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-3000:]
