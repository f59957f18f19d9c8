"""The norms of a consensus round (Alg. 1 line 28), as `prunex.admm.engine.NormReader` reads them.

A CPU round norms with `_foreach_norm` (its results bitwise those of one norm per layer); a GPU round
sums squares per layer over the engines' flat buffers (`prunex.admm.layer_norms.LayerSquares`; theta
copied into the scratch first, issue 27). Both are run here on the CPU, the GPU's way
forced by giving the reader (or the engine) a `LayerSquares`: the same squared norms to float32 rounding,
in one read. Its Triton kernel runs in Triton's interpreter against `torch.segment_reduce`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from distributed import run_distributed
from interpreted import run_in_triton_interpreter
from torch import nn
from torch.utils.data import TensorDataset

from prunex.admm.engine import NormReader, flat_of, flat_state
from prunex.admm.layer_norms import BLOCK, LayerSquares
from prunex.admm.residuals import FlatNorms
from prunex.training.config import ADMMConfig, RunConfig

SHAPES = [(8, 4, 3, 3), (8,), (16, 8, 1, 1), (10, 16)]


def _columns(gen: torch.Generator) -> dict[str, dict[str, torch.Tensor]]:
    like = {f"p{i}": torch.randn(s, generator=gen) for i, s in enumerate(SHAPES)}
    out = {}
    for name in ("r", "theta", "u", "z", "dz"):
        state = flat_state(like, copy=False)
        for t in state.values():
            t.copy_(torch.randn(t.shape, generator=gen))
        out[name] = state
    return out


def _read(columns: dict[str, dict[str, torch.Tensor]], squares: LayerSquares | None, flat: bool) -> dict:
    names = [f"p{i}" for i in range(len(SHAPES))]
    reader = NormReader(len(names), squares)
    lists = {k: [v[n] for n in names] for k, v in columns.items()}
    flats = {k: flat_of(v) if flat else None for k, v in lists.items()}
    reader.add(("dz",), [lists["dz"]], [flats["dz"]])
    reader.add(
        ("theta", "r", "u", "z"), [lists[k] for k in ("theta", "r", "u", "z")], [None, flats["r"], None, flats["z"]]
    )
    return reader.read(names, FlatNorms)


def test_segmented_squares_are_the_norms_squared() -> None:
    columns = _columns(torch.Generator().manual_seed(0))
    plain = _read(columns, None, flat=True)  # every column by _foreach_norm, as on a CPU
    squares = LayerSquares([torch.Size(s).numel() for s in SHAPES], torch.device("cpu"))
    assert not squares.kernel  # on the CPU: torch.segment_reduce
    mixed = _read(columns, squares, flat=True)  # dz, r and z per layer at once, theta and u by _foreach_norm
    for n, want in plain.items():
        want_d, got_d = vars(want), vars(mixed[n])
        for key, value in want_d.items():
            expected = sum(float(x) ** 2 for x in columns[key][n].reshape(-1))
            assert value == pytest.approx(expected, rel=1e-5), (n, key)
            assert got_d[key] == pytest.approx(value, rel=1e-5), (n, key)
    # a column that is not flat is normed the dense way even with a LayerSquares
    assert _read(columns, squares, flat=False) == plain


def test_a_field_missing_or_a_column_of_the_wrong_length_is_refused() -> None:
    columns = _columns(torch.Generator().manual_seed(1))
    names = [f"p{i}" for i in range(len(SHAPES))]
    reader = NormReader(len(names))
    reader.add(("r",), [[columns["r"][n] for n in names]])
    with pytest.raises(ValueError, match="FlatNorms has"):
        reader.read(names, FlatNorms)
    with pytest.raises(ValueError, match="each of 4 layers"):
        reader.add(("u",), [[columns["u"][n] for n in names[:3]]])


def test_flat_of_finds_the_buffer_only_for_consecutive_pieces() -> None:
    state = flat_state({"a": torch.ones(2, 3), "b": torch.ones(4)}, copy=True)
    flat = flat_of(list(state.values()))
    assert flat is not None and flat.numel() == 10 and flat.data_ptr() == state["a"].data_ptr()
    assert flat_of(list(reversed(state.values()))) is None
    assert flat_of([torch.ones(2), torch.ones(2)]) is None
    assert flat_of([]) is None


def _stack(depth: int) -> nn.Module:
    layers: list[nn.Module] = [nn.Conv2d(3, 4, 3, padding=1)]
    for _ in range(depth - 1):
        layers += [nn.ReLU(), nn.BatchNorm2d(4), nn.Conv2d(4, 4, 3, padding=1)]
    return nn.Sequential(*layers, nn.Flatten(), nn.Linear(4 * 8 * 8, 10))


def _residuals(rank: int, tmp: str, method_name: str, segmented: bool) -> list[dict]:
    from prunex.methods.base import build_method
    from prunex.training.topology import build_groups, discover

    topo = discover(2, 1)
    groups = build_groups(topo, 60)
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(16, 3, 8, 8), torch.randint(0, 10, (16,)))
    admm = ADMMConfig(iterations=3, local_epochs=1, channel_keep=0.5, freeze_iteration=2, retrain_epochs=2)
    cfg = RunConfig(method=method_name, nodes=2, batch_size=8, bn_batches=0, admm=admm)
    method = build_method(cfg, topo, groups, torch.device("cpu"), _stack(3), data, tmp)
    engine = method.engine
    assert all(f is not None for f in (flat_of([engine.u[n] for n in engine.names]), flat_of(engine.scratch)))
    if segmented:  # what the engine does on a GPU
        engine.layer_squares = LayerSquares([t.numel() for t in engine.theta.values()], torch.device("cpu"))
        assert None not in engine.flats("scratch", "u", "z")
    rows = []
    for k in range(3):
        method.train_iteration(k)
        rows += engine.consensus(k, force_frozen=k >= 2).residual_rows
    return rows


@pytest.mark.parametrize("method_name", ["hsadmm", "flat_admm"])
def test_a_round_normed_by_segment_logs_the_same_residuals(method_name: str, tmp_path: Path) -> None:
    dense = run_distributed(_residuals, 2, str(tmp_path / "dense"), method_name, False)
    segmented = run_distributed(_residuals, 2, str(tmp_path / "segmented"), method_name, True)
    for rank_dense, rank_segmented in zip(dense, segmented, strict=True):
        assert len(rank_dense) == len(rank_segmented) > 0
        for a, b in zip(rank_dense, rank_segmented, strict=True):
            assert {k: v for k, v in a.items() if k not in ("primal", "dual", "rho")} == {
                k: v for k, v in b.items() if k not in ("primal", "dual", "rho")
            }
            assert b["primal"] == pytest.approx(a["primal"], rel=1e-5, abs=1e-9)
            assert b["dual"] == pytest.approx(a["dual"], rel=1e-5, abs=1e-9)
            assert b["rho"] == a["rho"]


def check_layer_squares_kernel() -> None:
    """The Triton kernel against `torch.segment_reduce`: layers of 0, 1, BLOCK and around BLOCK elements,
    float32 and float64, twice each (the padded table is reused)."""
    sizes = [5, 0, BLOCK, 1, 3 * BLOCK + 7, BLOCK - 1, 2 * BLOCK]
    gen = torch.Generator().manual_seed(3)
    for dtype in (torch.float32, torch.float64):
        kernel = LayerSquares(sizes, torch.device("cpu"), kernel=True)
        reference = LayerSquares(sizes, torch.device("cpu"), kernel=False)
        for _ in range(2):
            flat = torch.randn(sum(sizes), generator=gen, dtype=dtype)
            got, want = kernel(flat), reference(flat)
            assert got.dtype == dtype and got.shape == (len(sizes),)
            torch.testing.assert_close(got, want, rtol=1e-5 if dtype == torch.float32 else 1e-12, atol=0.0)
            assert got[1] == 0.0


def test_the_layer_squares_kernel_in_tritons_interpreter() -> None:
    run_in_triton_interpreter("test_norm_reader", "check_layer_squares_kernel()")


def test_a_layer_squares_refuses_a_buffer_of_another_size() -> None:
    squares = LayerSquares([3, 4], torch.device("cpu"))
    with pytest.raises(ValueError, match="7 elements"):
        squares(torch.ones(8))
