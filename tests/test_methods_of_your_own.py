"""A method of your own, kept outside prunex (docs/methods-of-your-own.md): a module named in `PRUNEX_METHODS`
registers it, and it then trains, logs and evaluates through `python -m prunex.run` like the paper's methods.
The example is `examples/local_sgd` (local SGD with periodic averaging)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch

from prunex.methods.registry import METHOD_NAMES, PLUGINS_ENV
from prunex.training.config import ConfigError, RunConfig

ROOT = Path(__file__).resolve().parent.parent


def _env(plugins: str, *extra_path: Path) -> dict[str, str]:
    path = os.pathsep.join([str(ROOT), *map(str, extra_path)])
    return {**os.environ, PLUGINS_ENV: plugins, "PYTHONPATH": path}


def test_a_module_named_in_the_variable_registers_its_method_without_torch() -> None:
    code = (
        "import sys\n"
        "from prunex.methods.registry import METHOD_NAMES, MethodInfo, method_info, register\n"
        "from prunex.training.config import RunConfig\n"
        "from analysis import style\n"
        "RunConfig(method='local_sgd')\n"
        "print(*METHOD_NAMES[-3:], '|', style.method_label('local_sgd'), '|', 'torch' in sys.modules)\n"
        "try:\n"
        "    register(MethodInfo('mine', 'Mine', '#000000', 'x:Y', False, 'ddp', 'nothing'))\n"
        "except RuntimeError as e:\n"
        "    print(e)\n"
        "from examples.local_sgd.method import averages_after\n"  # the ranks' import (torch)
        "print(*([k for k in range(20) if averages_after(k, period, 10)] for period in (8, None)))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], env=_env("examples.local_sgd"), capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    first, late, averaged = proc.stdout.strip().splitlines()
    # listed after the paper's methods, labelled in figures; registering keeps the launchers torch-free
    assert first == "local_sgd local_sgd_epoch local_sgd_epoch_on_mask | Local SGD (example) | False"
    assert late.startswith("register('mine') after the registry was made")
    # after which steps the ranks average, 10 steps an epoch: local_sgd every PERIOD (8) steps and at each epoch's
    # end; local_sgd_epoch (benchmarks.pruned's control) at each epoch's end only
    assert averaged == "[7, 9, 15, 19] [9, 19]"


def test_without_the_variable_the_method_is_unknown_and_the_error_says_how() -> None:
    if "local_sgd" in METHOD_NAMES:
        pytest.skip(f"this pytest process was started with {PLUGINS_ENV} naming the example")
    with pytest.raises(ConfigError, match=f"unknown method 'local_sgd'; .*registered through {PLUGINS_ENV}"):
        RunConfig(method="local_sgd")


_REGISTER = "from prunex.methods.registry import MethodInfo, register\nregister(MethodInfo({}))\n"


@pytest.mark.parametrize(
    ("plugins", "source", "error"),
    [
        ("examples.nope", "", "ModuleNotFoundError: No module named 'examples.nope'"),
        (
            "my_plugin",
            _REGISTER.format("'ddp', 'again', '#000000', 'x:Y', False, 'ddp', 'a second ddp'"),
            "ValueError: method 'ddp' is registered twice",
        ),
        (
            "my_plugin",
            _REGISTER.format("'mine', 'Mine', '#000000', 'x:Y', False, 'ddp', 'mine', ('mine',)"),
            "ValueError: method 'mine' reads ['mine']; RunConfig's sections: admm, topk, pactrain, ddp, prune_finetune",
        ),
        (
            "my_plugin",
            _REGISTER.format("'mine', 'Mine', '#000000', 'x:Y', True, 'hsadmm', 'mine'"),
            "ValueError: method 'mine': outer iterations are ADMM's; it must read the 'admm' section",
        ),
    ],
)
def test_a_module_that_fails_is_one_line_and_nothing_is_launched(
    plugins: str, source: str, error: str, tmp_path: Path
) -> None:
    (tmp_path / "my_plugin.py").write_text(source)
    results = tmp_path / "results"
    argv = [sys.executable, "-m", "prunex.run", "--method", "ddp", "--executor", "local", "--results", str(results)]
    proc = subprocess.run(argv, env=_env(plugins, tmp_path), capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"error: {PLUGINS_ENV} names {plugins!r}, which failed to import: {error}"
    assert not results.exists()


@pytest.mark.parametrize(
    ("plugins", "source"),
    [
        ("os", ""),  # a name that happens to import
        ("my_plugin", "from prunex.methods.registry import MethodInfo, register\n"),  # the register call left out
        ("examples.local_sgd,my_plugin", "VALUE = 1\n"),  # the second of two names
    ],
)
def test_a_module_that_registers_no_method_is_one_line_and_nothing_is_launched(
    plugins: str, source: str, tmp_path: Path
) -> None:
    """Review (2026-12-07): a module named in the variable that imported but registered nothing was accepted in
    silence, so `PRUNEX_METHODS=os` trained ddp as if the variable were unset. It is now refused as a module that
    fails to import is."""
    (tmp_path / "my_plugin.py").write_text(source)
    results = tmp_path / "results"
    argv = [sys.executable, "-m", "prunex.run", "--method", "ddp", "--executor", "local", "--results", str(results)]
    proc = subprocess.run(argv, env=_env(plugins, tmp_path), capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 2, proc.stderr
    module = plugins.split(",")[-1]
    assert proc.stderr.strip() == (
        f"error: {PLUGINS_ENV} names {module!r}, which imported but registered no method: a module named there "
        "calls prunex.methods.registry.register(MethodInfo(...)) when imported (docs/methods-of-your-own.md)"
    )
    assert not results.exists()


def test_a_module_named_twice_is_imported_once() -> None:
    code = (
        "from prunex.methods.registry import METHOD_NAMES, PLUGIN_ERROR\nprint(repr(PLUGIN_ERROR), *METHOD_NAMES[-3:])"
    )
    env = _env(" examples.local_sgd , examples.local_sgd")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "'' local_sgd local_sgd_epoch local_sgd_epoch_on_mask"


def test_experiments_add_it_beside_each_ddp_run_with_ddps_settings(tmp_path: Path) -> None:
    code = (
        "import dataclasses\n"
        "from experiments import cli, strong_scaling\n"
        "cs = cli.resolve('strong_scaling', strong_scaling.runs, 'paper', None, 'r', with_methods=['local_sgd'])\n"
        "ddp = {c.name[len('ddp'):]: c for c in cs if c.method == 'ddp'}\n"
        "mine = {c.name[len('local_sgd'):]: c for c in cs if c.method == 'local_sgd'}\n"
        "assert ddp and sorted(mine) == sorted(ddp), (sorted(mine), sorted(ddp))\n"
        "for k, c in mine.items():\n"
        "    assert dataclasses.replace(c, method='ddp', name=ddp[k].name) == ddp[k], k\n"
        "print(len(mine), sorted(c.name for c in mine.values())[0])\n"
    )
    env = _env("examples.local_sgd")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["4", "local_sgd-resnet152-16x4"]  # one per DDP run: 2, 4, 8 and 16 nodes
    (tmp_path / "my_plugin.py").write_text(_REGISTER.format("'mine', 'Mine', '#000000', 'x:Y', False, 'nope', 'mine'"))
    env = _env("examples.local_sgd,my_plugin", tmp_path)
    for experiment, method, error in [
        ("residuals", "local_sgd", "experiment residuals does not compare methods"),
        ("volume", "topk", "topk is one of the paper's methods"),
        ("volume", "mine", "mine names the workload 'nope'; known: hsadmm, flat_admm, ddp, topk, pactrain"),
    ]:
        argv = [sys.executable, "-m", f"experiments.{experiment}", "--results", str(tmp_path / "r")]
        proc = subprocess.run(
            [*argv, "--dry-run", "--with-method", method], env=env, capture_output=True, text=True, timeout=120
        )
        assert proc.returncode == 2 and proc.stderr.startswith(f"error: --with-method: {error}"), proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1 and not proc.stdout


@pytest.mark.slow
def test_the_example_trains_logs_and_averages_through_prunex_run(data_root: Path, tmp_path: Path) -> None:
    # 640 images on 2 ranks, batch 32: 10 steps in the one epoch, so the example averages after step 8 (its
    # PERIOD) and after step 10 (the epoch's last, before the evaluation), nowhere else
    results = tmp_path / "results"
    argv = [
        sys.executable, "-m", "prunex.run", "--method", "local_sgd", "--nodes", "2", "--procs-per-node", "1",
        "--executor", "local", "--dataset", "digits", "--data-root", str(data_root), "--train-subset", "640",
        "--epochs", "1", "--bn-batches", "2", "--name", "mine", "--results", str(results),
    ]  # fmt: skip
    proc = subprocess.run(argv, env=_env("examples.local_sgd"), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = results / "adhoc" / "mine"
    assert (run / "DONE").exists()
    assert json.loads((run / "config.json").read_text())["method"] == "local_sgd"
    steps = pd.read_parquet(run / "steps.parquet")
    assert list(steps["iteration"]) == list(range(10)) and steps["test_acc"].iloc[-1] > 0
    state = torch.load(run / "final_model.pt", weights_only=True)
    buffers = ("running_mean", "running_var", "num_batches_tracked")
    params = sum(v.numel() for k, v in state.items() if not k.endswith(buffers))
    comm = pd.read_parquet(run / "comm.parquet")
    for rank in (0, 1):
        mine = comm[comm["rank"] == rank]
        assert list(mine["iteration"]) == [7, 9] and set(mine["op"]) == {"allreduce"}, mine
        assert (mine["bytes"] == 4 * params).all()  # every parameter, float32, once per averaging


@pytest.mark.slow
def test_the_masked_control_trains_another_runs_mask_and_keeps_it_zero(data_root: Path, tmp_path: Path) -> None:
    """local_sgd_epoch_on_mask (benchmarks.pruned --localsgd-on-hsadmm-mask): the mask of `--mask-from`'s
    final_masks.parquet from the first step to the exported model, one average at the epoch's end."""
    results = tmp_path / "results"
    source = results / "adhoc" / "hs"
    source.mkdir(parents=True)
    rows = [{"layer": "layer1.0.conv2.weight", "out_keep": "1" * 16, "in_keep": "10" * 8, "density": 0.5}]
    pd.DataFrame(rows).to_parquet(source / "final_masks.parquet")
    (source / "DONE").write_text("")  # a finished run: what `--mask-from` names (prunex.cluster.preflight.check_start)
    argv = [
        sys.executable, "-m", "prunex.run", "--method", "local_sgd_epoch_on_mask", "--mask-from", "hs",
        "--nodes", "2", "--procs-per-node", "1", "--executor", "local", "--dataset", "digits",
        "--data-root", str(data_root), "--train-subset", "640", "--epochs", "1", "--bn-batches", "2",
        "--name", "mine", "--results", str(results),
    ]  # fmt: skip
    proc = subprocess.run(argv, env=_env("examples.local_sgd"), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = results / "adhoc" / "mine"
    w = torch.load(run / "final_model.pt", weights_only=True)["layer1.0.conv2.weight"]
    assert (w[:, 1::2] == 0).all() and (w[:, 0::2] != 0).all()  # off the mask exactly zero, trained on it
    logged = pd.read_parquet(run / "final_masks.parquet").set_index("layer")
    assert logged.loc["layer1.0.conv2.weight", "in_keep"] == "10" * 8
    assert list(logged.index) == ["layer1.0.conv2.weight"]  # the source's rows, no more
    comm = pd.read_parquet(run / "comm.parquet")
    assert sorted(set(comm["iteration"])) == [9]  # 10 steps: one average, after the epoch's last


def test_the_masked_control_without_a_mask_is_refused(tmp_path: Path) -> None:
    code = (
        "from types import SimpleNamespace\n"
        "import prunex.methods.registry\n"  # the registry imports the plugin first, as on the ranks
        "from examples.local_sgd.method import LocalSGDPerEpochOnMask\n"
        "from prunex.training.config import RunConfig\n"
        "try:\n"
        "    LocalSGDPerEpochOnMask(SimpleNamespace(config=RunConfig(method='local_sgd_epoch_on_mask')))\n"
        "except RuntimeError as e:\n"
        "    print(e)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], env=_env("examples.local_sgd"), capture_output=True, text=True, timeout=120
    )
    assert proc.stdout.strip() == "local_sgd_epoch_on_mask: give the run whose final mask it trains (--mask-from RUN)"
