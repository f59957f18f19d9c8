"""The local executor's jobs (`prunex.cluster.jobs.LocalGroupExecutor`) and the GPUs they see."""

from __future__ import annotations

import functools
import os
from pathlib import Path

import pytest

from prunex.cluster import jobs


def _visible_in_a_job(folder: Path, **params: object) -> str | None:
    executor = jobs.LocalGroupExecutor(folder=str(folder))
    executor.update_parameters(tasks_per_node=1, timeout_min=2, **params)
    return executor.submit(functools.partial(os.getenv, "CUDA_VISIBLE_DEVICES")).result()


def test_a_local_job_sees_the_gpus_its_launcher_sees(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """submitit's local executor sets CUDA_VISIBLE_DEVICES to the GPUs a job asks for, '' when it asks for none:
    `--executor local --device cuda` then found no GPU (measured on an H100, tests/gpu/test_gpu_export.py). A
    prunex job asks for none and sees what its launcher sees; one that asks for GPUs gets submitit's choice."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    assert _visible_in_a_job(tmp_path / "a") == "3,5"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert _visible_in_a_job(tmp_path / "b") is None
    assert _visible_in_a_job(tmp_path / "c", gpus_per_node=1) == "0"
