"""What this code runs on: the supported Python and torch versions, and whether a torch build can drive a GPU.

    python -c "from prunex.cluster import compat; print(compat.TORCH_RANGE)"

- **Python >= 3.10**: `zip(strict=True)` and `dataclass(kw_only=True)` are used throughout.
- **torch >= 2.3, < 3, != 2.7.0.** The floor is set by `dist.init_process_group(device_id=...)`
  (`prunex.training.topology.init_distributed`: eager NCCL communicators bound to this rank's GPU), which
  torch 2.3 introduced; every other torch API the code calls is older (`torch.load(weights_only=True)`
  1.13, DDP communication hooks and `bf16_compress_hook` 1.10-1.12, `dist.GradBucket.buffer()` 1.10,
  `torch.cuda.Event(enable_timing=True)` and `torch.cuda.get_arch_list()` 1.x). 2.7.0 is excluded: with
  `device_id` its NCCL 2.26 non-blocking initialisation can hang collectives (pytorch/pytorch#153960,
  worked around in 2.7.1). Below 3 because a new major release is untested. The CI environment is the
  pin in `requirements.txt` (torch 2.14.1); the range is what the code needs, not what CI ran.
- **A GPU needs kernels in the build.** `torch.cuda.get_arch_list()` names the architectures a build
  carries: ``sm_XY`` cubins run on compute capability X.Y' with Y' >= Y of the same major X (``sm_XYa``
  only on exactly X.Y), ``compute_XY`` PTX is JIT-compiled for any capability >= X.Y. torch 2.14.1's
  default wheel (CUDA 13) carries sm_75 ... sm_120 and no PTX, so it cannot run on Volta (V100, 7.0):
  CUDA 13 dropped Volta.

Every check raises `UnsupportedEnvironment` with a one-line message that names what was found and
what to do. The functions take the facts as arguments (versions, arch list, capability), so each
refusal is tested on a machine without a GPU.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence

PYTHON_MIN = (3, 10)
TORCH_MIN = (2, 3)
TORCH_BELOW = (3, 0)
TORCH_EXCLUDED = {(2, 7, 0): "its NCCL initialisation with device_id can hang (pytorch/pytorch#153960)"}
TORCH_RANGE = ">=2.3, <3, !=2.7.0"
# What to do when a build has no kernels for the GPU, by the GPU's architecture. On Volta: an exact pair whose
# CUDA 12.6 wheels carry sm_70 (PyTorch 2.11's CUDA support matrix, RELEASE.md: 12.6 builds keep Maxwell, Pascal
# and Volta, the 12.8 and 13.0 builds start at Turing) and torch 2.11.0 is a release `tests/gpu` ran on (its
# CUDA 13.0 build, on an H200: saved-logs/gpu/h200-2026-11-28); torchvision 0.26 is torch 2.11's.
VOLTA_TORCH, VOLTA_TORCHVISION = "2.11.0", "0.26.0"
VOLTA_INDEX = "https://download.pytorch.org/whl/cu126"
VOLTA_ADVICE = (
    "CUDA 13 builds dropped Volta: use the site's PyTorch module (e.g. `module load pytorch`) or a CUDA 12.6 "
    f"build: pip install torch=={VOLTA_TORCH} torchvision=={VOLTA_TORCHVISION} --index-url {VOLTA_INDEX}"
)


class UnsupportedEnvironment(RuntimeError):
    """Python, torch or the GPU cannot run this code; the message is one line for the user."""


def version_tuple(version: str) -> tuple[int, ...]:
    """``"2.14.1+cu130"`` -> (2, 14, 1); ``"2.6.0a0+git1234"`` -> (2, 6, 0)."""
    m = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", version)
    if not m:
        raise UnsupportedEnvironment(f"cannot read the version {version!r}")
    return tuple(int(x) for x in m.groups(default="0"))


def check_python(version_info: Sequence[int] | None = None, executable: str | None = None) -> None:
    """Refuse a Python older than `PYTHON_MIN` (default: this interpreter)."""
    version_info = tuple(sys.version_info[:3] if version_info is None else version_info[:3])
    if version_info < PYTHON_MIN:
        found = ".".join(map(str, version_info))
        need = ".".join(map(str, PYTHON_MIN))
        raise UnsupportedEnvironment(
            f"Python {found} ({executable or sys.executable}) is too old: prunex needs Python >= {need}; "
            "load a newer one (a site module, conda) or name it with PRUNEX_PYTHON=/path/to/python"
        )


def check_torch_version(version: str) -> None:
    """Refuse a torch outside `TORCH_RANGE`."""
    v = version_tuple(version)
    if v[:2] < TORCH_MIN or v[:2] >= TORCH_BELOW:
        raise UnsupportedEnvironment(
            f"torch {version} is outside the supported range {TORCH_RANGE}: install one in range "
            "(requirements.txt pins the tested one) or load a site module that has one"
        )
    if v[:3] in TORCH_EXCLUDED:
        raise UnsupportedEnvironment(f"torch {version} is excluded: {TORCH_EXCLUDED[v[:3]]}; use 2.7.1 or later")


def _arch(entry: str) -> tuple[str, int, int, str] | None:
    """``"sm_86"`` -> ("sm", 8, 6, ""); ``"sm_90a"`` -> ("sm", 9, 0, "a");
    ``"compute_120"`` -> ("compute", 12, 0, "")."""
    m = re.fullmatch(r"(sm|compute)_(\d+)([a-z]?)", entry.strip())
    if not m:
        return None
    n = int(m.group(2))
    return m.group(1), n // 10, n % 10, m.group(3)


def arch_runs_on(entry: str, capability: tuple[int, int]) -> bool:
    """Whether code compiled for `entry` (an item of `torch.cuda.get_arch_list()`) runs on `capability`."""
    parsed = _arch(entry)
    if parsed is None:
        return False
    kind, major, minor, suffix = parsed
    if suffix == "a":  # architecture-specific features: exactly that GPU
        return (major, minor) == tuple(capability)
    if kind == "compute":  # PTX: JIT-compiled for this or any later capability
        return (major, minor) <= tuple(capability)
    return major == capability[0] and minor <= capability[1]  # cubin (or family "f"): same major, newer minor


def sm_name(capability: tuple[int, int]) -> str:
    return f"sm_{capability[0]}{capability[1]}"


def check_cuda_arch(
    arch_list: Sequence[str],
    capability: tuple[int, int],
    *,
    torch_version: str,
    cuda_version: str | None,
    gpu: str,
) -> None:
    """Refuse a torch build without kernels for a GPU of compute capability `capability`.

    Args:
        arch_list: `torch.cuda.get_arch_list()` of the build.
        capability: `torch.cuda.get_device_capability()` of the GPU (or the site file's, before submitting).
        torch_version: `torch.__version__`, for the message.
        cuda_version: `torch.version.cuda` (None: a CPU-only build).
        gpu: the GPU's name, for the message.
    """
    if cuda_version is None:
        raise UnsupportedEnvironment(
            f"torch {torch_version} is a CPU-only build and cannot use the GPU ({gpu}): install a CUDA build "
            "or load the site's PyTorch module"
        )
    if any(arch_runs_on(a, capability) for a in arch_list):
        return
    have = ", ".join(arch_list) if arch_list else "no architectures"
    cap = f"{capability[0]}.{capability[1]}"
    advice = (
        VOLTA_ADVICE
        if capability[0] < 7 or tuple(capability) == (7, 0) or tuple(capability) == (7, 2)
        else f"install a torch build whose torch.cuda.get_arch_list() includes {sm_name(capability)}"
    )
    raise UnsupportedEnvironment(
        f"torch {torch_version} (CUDA {cuda_version}) has kernels for {have}, none of which runs on "
        f"{gpu} (compute capability {cap} = {sm_name(capability)}): {advice}"
    )


def parse_capability(text: str) -> tuple[int, int]:
    """``"7.0"`` -> (7, 0) (as site files write it)."""
    m = re.fullmatch(r"\s*(\d+)\.(\d+)\s*", str(text))
    if not m:
        raise ValueError(f"a compute capability looks like '7.0', got {text!r}")
    return int(m.group(1)), int(m.group(2))


def check_this_torch() -> None:
    """Python and torch of this process in range (every rank at start, and before submitting)."""
    import torch

    check_python()
    check_torch_version(torch.__version__)
