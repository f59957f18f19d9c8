"""compress/decompress on a GPU: `ShrinkPlan` keeps the device's own gather (no native CPU kernel) and
gives the same bytes as on the CPU; `python -m prunex.bench.shrink` prints its table for the GPU.

    pytest tests/gpu -q        # skipped where torch sees no CUDA GPU
"""

from __future__ import annotations

import math
import re

import pytest
import torch

from prunex.bench import shrink as bench
from prunex.comm import bucket_kernels
from prunex.comm.shrink import ShrinkPlan

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.mark.parametrize("shape", [(64, 520, 1, 1), (128, 128, 3, 3), (10, 64)])
def test_gpu_plan_is_bitwise_the_cpu_plan(shape: tuple[int, ...]) -> None:
    gen = torch.Generator().manual_seed(0)
    out_idx = torch.randperm(shape[0], generator=gen)[: shape[0] // 2].sort().values
    in_idx = torch.randperm(shape[1], generator=gen)[: shape[1] // 2].sort().values
    t = torch.randn(shape, generator=gen)
    cpu = ShrinkPlan(out_idx, in_idx, shape, torch.device("cpu"))
    gpu = ShrinkPlan(out_idx, in_idx, shape, torch.device("cuda"))
    c = gpu.compress(t.cuda())
    assert gpu._packer is None  # the native kernel is for CPU tensors only
    assert torch.equal(c.cpu().view(torch.int32), cpu.compress(t).view(torch.int32))
    z = gpu.decompress(c, out=torch.full(shape, math.nan, device="cuda"))
    assert torch.equal(z.cpu(), cpu.decompress(cpu.compress(t)))


def test_bench_prints_the_gpu_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["--device", "cuda", "--repeats", "3"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# cuda: ") and "native compress kernel" not in out
    lines = [line for line in out.splitlines() if line.startswith("# ") and " vs " in line]
    ratios = [[float(x) for x in re.findall(r"\d+\.\d+", line.rsplit(": ", 1)[1])] for line in lines]
    # per-layer and bucket plans, each with launches included and with the GPU's time alone
    assert len(ratios) == 4 and all(len(r) == 2 and min(r) > 0 for r in ratios), out
    ops = [line for line in out.splitlines() if line.startswith(("compress [", "decompress ["))]
    table = {line[:40].strip(): line[40:].split() for line in ops}
    # the device-only column is the GPU's time alone only if the host enqueued every timed call before the GPU
    # reached it: "behind" (the last column) counts the runs where it did not
    assert all(cols[-1] == "0" for cols in table.values()), out
    # and what one launch of the bucket plan costs the host, beside a torch copy's (4 rows, microseconds)
    launch = next(line for line in out.splitlines() if line.startswith("# host time per call"))
    assert len([float(us) for us in re.findall(r" (\d+\.\d+)(?:;|$)", launch) if float(us) > 0]) == 4, launch
    assert ("[bucket-torch]" in out) == bucket_kernels.available()  # the kernels' alternative, where they run
