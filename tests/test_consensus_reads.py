"""A consensus round reads the device a constant number of times, whatever the number of parameters
(issue 27: one `.item()` per norm was ~4,200 device-to-host synchronisations per round for ResNet-152).

On the CPU nothing synchronises, so the test counts the reads themselves (`Tensor.item`, `Tensor.tolist`)
in a round on a frozen mask, for a model of 4 and one of 12 parameter tensors: the counts must be equal.
On a GPU, `tests/gpu/` would watch `torch.cuda.set_sync_debug_mode`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from distributed import run_distributed
from torch import nn
from torch.utils.data import TensorDataset

from prunex.training.config import ADMMConfig, RunConfig


def _stack(depth: int) -> nn.Module:
    layers: list[nn.Module] = [nn.Conv2d(3, 4, 3, padding=1)]
    for _ in range(depth - 1):
        layers += [nn.ReLU(), nn.Conv2d(4, 4, 3, padding=1)]
    return nn.Sequential(*layers, nn.Flatten(), nn.Linear(4 * 8 * 8, 10))


def _reads(rank: int, tmp: str, method_name: str, depth: int) -> int:
    from prunex.methods.base import build_method
    from prunex.training.topology import build_groups, discover

    topo = discover(2, 1)
    groups = build_groups(topo, 60)
    data = TensorDataset(torch.randn(16, 3, 8, 8), torch.randint(0, 10, (16,)))
    admm = ADMMConfig(iterations=1, local_epochs=1, channel_keep=0.5, freeze_iteration=1, retrain_epochs=2)
    cfg = RunConfig(method=method_name, nodes=2, batch_size=8, bn_batches=0, admm=admm)
    torch.manual_seed(0)
    method = build_method(cfg, topo, groups, torch.device("cpu"), _stack(depth), data, tmp)
    method.train_iteration(0)  # dynamic; the mask freezes
    counts = {"n": 0}
    originals = {name: getattr(torch.Tensor, name) for name in ("item", "tolist")}

    def counting(name: str):
        def read(self, *args, **kwargs):
            counts["n"] += 1
            return originals[name](self, *args, **kwargs)

        return read

    try:
        for name in originals:
            setattr(torch.Tensor, name, counting(name))
        method.engine.consensus(1, force_frozen=True)
    finally:
        for name, fn in originals.items():
            setattr(torch.Tensor, name, fn)
    return counts["n"]


@pytest.mark.parametrize("method_name", ["hsadmm", "flat_admm"])
def test_a_round_reads_the_device_a_constant_number_of_times(method_name: str, tmp_path: Path) -> None:
    shallow = run_distributed(_reads, 2, str(tmp_path), method_name, 1)
    deep = run_distributed(_reads, 2, str(tmp_path), method_name, 5)
    assert shallow == deep, f"reads grow with the parameters: {shallow} (4 tensors) vs {deep} (12 tensors)"
    assert max(deep) <= 4
