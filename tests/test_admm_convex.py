"""H-SADMM and flat consensus ADMM on a convex problem, with real process groups.

Ridge least squares split over 4 ranks: f_r(x) = 1/(2 n) ||A_r x - b_r||^2. Both implementations
solve min_x sum_r f_r(x) + (N + 1) lambda / 2 ||x||^2 (see the docstrings of prunex.admm.hsadmm
and prunex.admm.flat); with exact local solves and no sparsity they must reach its minimiser.
"""

import functools

import numpy as np
import pytest
import torch
from distributed import run_distributed

from prunex.admm.flat import FlatADMM
from prunex.admm.hsadmm import HSADMM
from prunex.comm import Comm
from prunex.training.config import ADMMConfig
from prunex.training.topology import build_groups, discover

D, N_SAMPLES, LAM, ITERATIONS = 6, 30, 0.05, 150


def ridge_data(rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(100 + rank)
    a = torch.randn(N_SAMPLES, D, generator=g, dtype=torch.float64) * (1 + rank)  # heterogeneous shards
    x_true = torch.arange(1.0, D + 1, dtype=torch.float64)
    b = a @ x_true + torch.randn(N_SAMPLES, generator=g, dtype=torch.float64) * (rank + 1)
    return a, b


def centralised_minimiser(world: int) -> np.ndarray:
    h = sum(ridge_data(r)[0].T @ ridge_data(r)[0] / N_SAMPLES for r in range(world))
    g = sum(ridge_data(r)[0].T @ ridge_data(r)[1] / N_SAMPLES for r in range(world))
    return torch.linalg.solve(h + (world + 1) * LAM * torch.eye(D, dtype=torch.float64), g).numpy()


def _solve(rank: int, engine_name: str, nodes: int, procs: int, iterations: int) -> dict:
    topo = discover(nodes, procs)
    comm = Comm(topo, build_groups(topo, 60), torch.device("cpu"))
    a, b = ridge_data(rank)
    theta = torch.zeros(D, dtype=torch.float64)
    cfg = ADMMConfig(
        rho_intra=0.5, rho_inter=0.5, freeze_iteration=10**6, stop_on_convergence=False, eps_abs=1e-6, eps_rel=1e-5
    )
    cls = {"hsadmm": HSADMM, "flat": FlatADMM}[engine_name]
    engine = cls({"w": theta}, {}, {}, cfg, comm, LAM)
    hessian = a.T @ a / N_SAMPLES
    for k in range(iterations):
        # phase 1 solved exactly: argmin f_r + lambda/2 ||x||^2 + rho_1/2 ||x - (z_i - u)||^2
        rho = engine.rho_intra["w"]
        anchor = engine.anchors()["w"]
        theta.copy_(
            torch.linalg.solve(
                hessian + (LAM + rho) * torch.eye(D, dtype=torch.float64), a.T @ b / N_SAMPLES + rho * anchor
            )
        )
        result = engine.consensus(k)
    return {
        "z": engine.z["w"].numpy(),
        "theta": theta.numpy(),
        "converged": result.converged,
        "rows": result.residual_rows,
    }


@functools.cache
def solved(engine_name: str, nodes: int, procs: int) -> list[dict]:
    return run_distributed(_solve, 4, engine_name, nodes, procs, ITERATIONS)


@pytest.mark.parametrize("engine_name, nodes, procs", [("hsadmm", 2, 2), ("hsadmm", 4, 1), ("flat", 4, 1)])
def test_reaches_the_centralised_minimiser(engine_name: str, nodes: int, procs: int) -> None:
    results = solved(engine_name, nodes, procs)
    x_star = centralised_minimiser(4)
    for r in results:
        rel = np.linalg.norm(r["z"] - x_star) / np.linalg.norm(x_star)
        assert rel < 1e-3, (engine_name, nodes, procs, rel)
        assert np.linalg.norm(r["theta"] - x_star) / np.linalg.norm(x_star) < 1e-3
        assert r["converged"]
    np.testing.assert_array_equal(results[0]["z"], results[3]["z"])  # one global z on every rank


def test_p1_hsadmm_equals_flat_admm() -> None:
    hier, flat = solved("hsadmm", 4, 1), solved("flat", 4, 1)
    np.testing.assert_allclose(hier[0]["z"], flat[0]["z"], rtol=1e-6, atol=1e-6)
