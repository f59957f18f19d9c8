"""Supported versions and GPU kernels (`prunex.cluster.compat`): every refusal, with the facts faked at the seam."""

import pytest

from prunex.cluster.compat import (
    VOLTA_INDEX,
    VOLTA_TORCH,
    VOLTA_TORCHVISION,
    UnsupportedEnvironment,
    arch_runs_on,
    check_cuda_arch,
    check_python,
    check_torch_version,
    parse_capability,
)

# torch 2.14.1's default wheel (CUDA 13.0), as torch.cuda.get_arch_list() reports it
CU130_ARCHS = ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]
CU126_ARCHS = ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"]


@pytest.mark.parametrize(
    "entry, capability, runs",
    [
        ("sm_80", (8, 6), True),  # a cubin runs on later minors of its major
        ("sm_86", (8, 0), False),  # not on earlier ones
        ("sm_80", (9, 0), False),  # nor on another major
        ("sm_90a", (9, 0), True),  # arch-specific: exactly that GPU
        ("sm_90a", (10, 0), False),
        ("compute_80", (9, 0), True),  # PTX is JIT-compiled for later GPUs
        ("compute_90", (8, 0), False),
        ("sm_75", (7, 0), False),  # the CUDA 13 build on a V100
        ("sm_70", (7, 0), True),
        ("bogus", (7, 0), False),
    ],
)
def test_which_kernels_run_on_which_gpu(entry: str, capability: tuple[int, int], runs: bool) -> None:
    assert arch_runs_on(entry, capability) is runs


def test_cuda13_build_on_a_v100_is_refused_naming_build_gpu_and_remedy() -> None:
    with pytest.raises(UnsupportedEnvironment) as e:
        check_cuda_arch(
            CU130_ARCHS, (7, 0), torch_version="2.14.1+cu130", cuda_version="13.0", gpu="Tesla V100-SXM2-32GB"
        )
    msg = str(e.value)
    assert "\n" not in msg
    for part in ("2.14.1+cu130", "CUDA 13.0", "sm_75", "sm_120", "Tesla V100-SXM2-32GB", "7.0", "sm_70"):
        assert part in msg, part
    assert "module load pytorch" in msg and "CUDA 12" in msg
    # an exact pair to install, inside the range this code supports (issue 27: the advice named none)
    assert f"pip install torch=={VOLTA_TORCH} torchvision=={VOLTA_TORCHVISION} --index-url {VOLTA_INDEX}" in msg
    assert VOLTA_INDEX.endswith("/cu126")
    check_torch_version(VOLTA_TORCH)
    check_cuda_arch(CU126_ARCHS, (7, 0), torch_version=f"{VOLTA_TORCH}+cu126", cuda_version="12.6", gpu="V100")


@pytest.mark.parametrize("capability", [(8, 0), (9, 0), (12, 0)])  # A100, H100, RTX 50xx: covered
def test_cuda13_build_runs_on_newer_gpus(capability: tuple[int, int]) -> None:
    check_cuda_arch(CU130_ARCHS, capability, torch_version="2.14.1+cu130", cuda_version="13.0", gpu="x")


def test_cuda12_build_runs_on_a_v100() -> None:
    check_cuda_arch(CU126_ARCHS, (7, 0), torch_version="2.6.0+cu126", cuda_version="12.6", gpu="V100")


def test_cpu_only_build_is_refused_for_a_gpu() -> None:
    with pytest.raises(UnsupportedEnvironment, match="CPU-only build"):
        check_cuda_arch([], (8, 0), torch_version="2.14.1+cpu", cuda_version=None, gpu="A100")


def test_old_python_is_refused_in_one_line() -> None:
    with pytest.raises(UnsupportedEnvironment) as e:
        check_python((3, 6, 8), "/usr/bin/python3")
    msg = str(e.value)
    assert "\n" not in msg and "3.6.8" in msg and "/usr/bin/python3" in msg and ">= 3.10" in msg
    check_python((3, 10, 0), "/x")  # the floor itself is fine


@pytest.mark.parametrize(
    "version, ok",
    [("2.2.2", False), ("2.3.0", True), ("2.7.0", False), ("2.7.1", True), ("2.14.1+cu130", True), ("3.0.0", False)],
)
def test_torch_range(version: str, ok: bool) -> None:
    if ok:
        check_torch_version(version)
    else:
        with pytest.raises(UnsupportedEnvironment, match=version.split("+")[0]):
            check_torch_version(version)


def test_capability_strings_of_site_files() -> None:
    assert parse_capability("7.0") == (7, 0) and parse_capability(" 9.0 ") == (9, 0)
    with pytest.raises(ValueError):
        parse_capability("sm_70")
