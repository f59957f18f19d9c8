"""The method registry: one description per method, read by the config, the trainer, the perf model and
the analysis; and the torch-free modules that make that possible stay torch-free."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from prunex.methods import METHOD_NAMES, REGISTRY, method_class, method_info
from prunex.training.config import ConfigError, RunConfig

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("name", METHOD_NAMES)
def test_every_entry_names_its_implementation_and_workload(name: str) -> None:
    from prunex.methods.base import Method, StepwiseMethod
    from prunex.methods.hsadmm import ADMMMethod
    from prunex.perfmodel.workload import WORKLOADS

    info = method_info(name)
    cls = method_class(name)
    assert issubclass(cls, Method) and cls.name == name
    assert info.outer_iterations == issubclass(cls, ADMMMethod)
    assert info.outer_iterations != issubclass(cls, StepwiseMethod)
    assert info.workload in WORKLOADS
    assert info.color.startswith("#") and info.label


def test_perf_model_prices_every_registered_method() -> None:
    from prunex.perfmodel import workload

    p = workload.ParamSpec
    spec = workload.ModelSpec("tiny", (p("conv.weight", (8, 4, 3, 3), True), p("fc.weight", (10, 8), False)), (8,))
    for name in METHOD_NAMES:
        w = workload.method_workload(name, spec, workload.Options(batch_size=4), world=4, shard=16)
        assert w.method == name and w.collectives
    with pytest.raises(ValueError, match="unknown method 'nope'; known: " + ", ".join(METHOD_NAMES)):
        workload.method_workload("nope", spec, workload.Options(), world=4, shard=16)


def test_config_and_analysis_read_the_registry() -> None:
    with pytest.raises(ConfigError, match="known: " + ", ".join(METHOD_NAMES)):
        RunConfig(method="nope")
    from analysis import style

    assert style.METHOD_ORDER == list(REGISTRY)
    for name, info in REGISTRY.items():
        assert style.method_color(name) == info.color and style.method_label(name) == info.label


def test_descriptions_cost_model_and_residual_table_import_without_torch() -> None:
    code = (
        "import sys\n"
        "import prunex.training.config, prunex.methods, prunex.comm.cost, prunex.admm.residuals, prunex.admm.freeze\n"
        "print('torch imported' if 'torch' in sys.modules else 'no torch')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "no torch"
