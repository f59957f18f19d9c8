"""Behaviour pin: one smoke run per method, its logs (times excluded) against `tests/golden/runs.json`.

Each case runs the per-rank training loop (`prunex.train._train`) in two real gloo processes (the
pool of `tests/distributed.py`, one thread each), with a tiny training subset. Rank 0 fingerprints
what the run left: `steps.parquet` without its time columns (kept readable), and, per table and
iteration, a hash of `comm.parquet` without `seconds`, `residuals.parquet`, `masks.parquet` and
`final_masks.parquet`; and a hash of `final_model.pt`. Floats are compared bitwise (`float.hex`).

A change to the numbers is either a bug or deliberate. Deliberate ones regenerate the file with
``PRUNEX_UPDATE_GOLDEN=1 pytest tests/test_golden_runs.py`` and say in the commit message which
change moved which fingerprints. The pins hold on the torch version they were made with, the CPU kernels
fixed to AVX2 by tests/conftest.py (bitwise float results of convolutions depend on the kernels).
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
from pathlib import Path
from typing import Any

import pytest
from distributed import run_distributed

from prunex.config import ADMMConfig, PacTrainConfig, RunConfig, TopKConfig

GOLDEN = Path(__file__).parent / "golden" / "runs.json"
TIMES = ("wall_s", "comm_s", "compute_s", "iter_s", "seconds")
HASHED = ("comm", "residuals", "masks", "final_masks")

pytestmark = pytest.mark.slow

_ADMM = {"iterations": 3, "local_epochs": 1, "rho_intra": 0.05, "rho_inter": 0.005, "freeze_iteration": 2}
# name -> RunConfig fields. Two processes each: 2 x 1 exercises the inter-node level, 1 x 2 the intra-node one.
CASES: dict[str, dict[str, Any]] = {
    "hsadmm-2x1": {"method": "hsadmm", "nodes": 2, "admm": ADMMConfig(**_ADMM, retrain_epochs=1)},
    "hsadmm-1x2-filter-shape": {
        "method": "hsadmm",
        "procs_per_node": 2,
        "admm": ADMMConfig(**_ADMM, filter_keep=0.5, channel_keep=0.75, shape_keep=0.75),
    },
    "flat_admm-2x1": {"method": "flat_admm", "nodes": 2, "admm": ADMMConfig(**_ADMM)},
    "ddp-1x2": {"method": "ddp", "procs_per_node": 2},
    "topk-2x1": {"method": "topk", "nodes": 2, "topk": TopKConfig(ratio=0.05)},
    "pactrain-1x2": {"method": "pactrain", "procs_per_node": 2, "pactrain": PacTrainConfig(density=0.5)},
}


def _value(v: Any) -> Any:
    if isinstance(v, float) or type(v).__name__.startswith("float"):
        f = float(v)
        return "nan" if math.isnan(f) else f.hex()
    if hasattr(v, "item"):  # numpy scalars
        return v.item()
    return v


def _rows(df: Any) -> list[list[Any]]:
    """Rows as exact values, columns by name and rows sorted: the pin is about values, not about the
    order in which a writer happens to emit columns or ranks' rows."""
    df = df[sorted(df.columns)]
    rows = [[_value(v) for v in r] for r in df.itertuples(index=False)]
    return sorted(rows, key=json.dumps)


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:16]


def fingerprint(run_dir: Path) -> dict[str, Any]:
    """What the pin compares: readable steps, per-iteration hashes of the other tables, the model's hash."""
    import pandas as pd
    import torch

    out: dict[str, Any] = {}
    steps = pd.read_parquet(run_dir / "steps.parquet")
    steps = steps.drop(columns=[c for c in TIMES if c in steps.columns])
    out["steps"] = {"columns": sorted(steps.columns), "rows": _rows(steps)}
    for table in HASHED:
        path = run_dir / f"{table}.parquet"
        if not path.exists():
            continue
        df = pd.read_parquet(path)
        df = df.drop(columns=[c for c in TIMES if c in df.columns])
        if "iteration" in df.columns:
            per = {str(int(k)): _digest(_rows(g)) for k, g in df.groupby("iteration")}
        else:
            per = {"all": _digest(_rows(df))}
        out[table] = {"columns": sorted(df.columns), "rows": len(df), "sha256_by_iteration": per}
    state = torch.load(run_dir / "final_model.pt", weights_only=True)
    h = hashlib.sha256()
    for k in sorted(state):
        buf = io.BytesIO()
        t = state[k].detach().cpu().contiguous()
        buf.write(f"{k}:{t.dtype}:{tuple(t.shape)}:".encode())
        buf.write(t.numpy().tobytes())
        h.update(buf.getvalue())
    out["final_model_sha256"] = h.hexdigest()[:16]
    return out


def _run_case(rank: int, name: str, root: str, data_root: str) -> dict[str, Any] | None:
    import torch

    from prunex.topology import discover
    from prunex.train import _train

    fields = dict(CASES[name])
    cfg = RunConfig(
        dataset="digits",
        model="resnet20",
        data_root=data_root,
        train_subset=128,
        epochs=1,
        batch_size=32,
        bn_batches=2,
        eval_every=1000,  # evaluate the last iteration only (evaluation is most of a smoke run's time)
        executor="local",
        results=root,
        name=name,
        **fields,
    )
    run_dir = Path(root) / cfg.experiment / cfg.name
    topo = discover(cfg.nodes, cfg.procs_per_node)
    _train(cfg, run_dir, topo, torch.device("cpu"))
    return fingerprint(run_dir) if rank == 0 else None


@pytest.mark.parametrize("name", list(CASES))
def test_logs_match_the_pinned_run(name: str, data_root: Path, tmp_path: Path) -> None:
    got = run_distributed(_run_case, 2, name, str(tmp_path), str(data_root), timeout_s=240)[0]
    if os.environ.get("PRUNEX_UPDATE_GOLDEN"):
        golden = json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}
        golden[name] = got
        GOLDEN.write_text(json.dumps(dict(sorted(golden.items())), indent=1) + "\n")
        return
    want = json.loads(GOLDEN.read_text())[name]
    assert got["steps"] == want["steps"], "steps.parquet differs (times excluded)"
    for table in HASHED:
        assert got.get(table) == want.get(table), f"{table}.parquet differs: {got.get(table)} != {want.get(table)}"
    assert got["final_model_sha256"] == want["final_model_sha256"], "final_model.pt differs"
