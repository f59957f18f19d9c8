"""The behaviour pins' machinery: the pinned numerics, the cases, what a run's logs pin, and the comparison.

Used by `tests/test_golden_runs.py` (the pins) and `tests/pin_spread.py` (the measurement their
tolerance comes from). The design, and where it was checked, is the test module's docstring.
"""

from __future__ import annotations

import json
import math
import pickle
import shutil
from pathlib import Path
from typing import Any

from prunex.training.config import ADMMConfig, PacTrainConfig, RunConfig, TopKConfig

GOLDEN = Path(__file__).parent / "golden" / "runs.json"
SPREAD = Path(__file__).parent / "golden" / "spread.json"
TIMES = ("wall_s", "comm_s", "compute_s", "iter_s", "seconds", "exclusive_s")
TABLES = ("steps", "comm", "residuals", "masks", "final_masks")

# Set in the ranks' processes before torch loads (tests/distributed.py's `env`): one ATen kernel set
# (AVX2, on every x86-64 host CI gets), oneDNN's ISA capped the same way, MKL's conditional numerical
# reproducibility on its SSE2 branch (the one Intel documents for the same results on Intel and other
# x86 processors), one thread. `pinned_numerics` adds, in the process: float64 models (inputs, buffers and
# wire follow the parameters' dtype where the engine allows it), oneDNN off (so convolutions are ATen's
# im2col + MKL GEMM, not a oneDNN kernel picked per CPU), one torch thread.
PIN_ENV = {
    "ATEN_CPU_CAPABILITY": "avx2",
    "ONEDNN_MAX_CPU_ISA": "AVX2",
    "MKL_CBWR": "COMPATIBLE",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}

# The learning rate of every case: small enough that training does not amplify a last-bit difference (at
# digits' default 0.05, float64 runs of hsadmm-2x1 whose kernels differed in one rounding moved apart by
# 1e-15, 1e-11, 3e-8 in the loss of iterations 1-3 and 2e-4 in the final model; at 0.005 the model
# moved 3e-13): the pins check the engines' arithmetic, not how well a smoke run learns.
PIN_LR = 0.005
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


# The pins' test split: digits' first 64 test images (its training split is unchanged). A pinned run is evaluated in
# float64 under the pinned numerics, slowly: on the 2-core CI machine hsadmm-2x1 evaluated after each of its 4
# iterations took 49.6 s against 25.6 s evaluated once (the perturbed pin), ~8 s an evaluation, over the whole
# 359-image split; over 64 images, 34.2 s against 20.0 s (~4.7 s: the BatchNorm re-estimation stays). At PIN_LR
# the models are near chance (test_acc 0.10-0.11 over the whole split), and no kernel variant ever moved an
# accuracy (tests/golden/spread.json: every case's largest deviation is in the final model), so the pins lose
# nothing by it; the final model does not depend on the test split (BatchNorm is re-estimated on training batches).
PIN_TEST_IMAGES = 64


def pin_data(data_root: str | Path, into: str | Path) -> Path:
    """A data root for the pins under `into`: the digits dataset of `data_root` with its test split cut to its
    first `PIN_TEST_IMAGES` images (the files `prunex.training.data` reads, so the run loads it as usual)."""
    from prunex.training.data import DIGITS_DIR, make_digits  # torch: in the caller's process only when used

    src = make_digits(data_root)
    dst = Path(into) / DIGITS_DIR
    dst.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src / "data_batch_1", dst / "data_batch_1")
    with open(src / "test_batch", "rb") as f:
        test = pickle.load(f, encoding="latin1")
    test = {**test, "data": test["data"][:PIN_TEST_IMAGES], "labels": test["labels"][:PIN_TEST_IMAGES]}
    with open(dst / "test_batch", "wb") as f:
        pickle.dump(test, f)
    shutil.copyfile(src / "batches.meta", dst / "batches.meta")  # last: make_digits leaves a root with it alone
    return Path(into)


def pinned_numerics(threads: int = 1, mkldnn: bool = False, float64: bool = True) -> None:
    """The in-process half of the pinned numerics (module constant `PIN_ENV` is the other half); the
    arguments other than the defaults are the variants `tests/pin_spread.py` measures."""
    import torch

    torch.set_default_dtype(torch.float64 if float64 else torch.float32)
    torch.backends.mkldnn.enabled = mkldnn
    torch.set_num_threads(threads)


def run_case(
    rank: int,
    name: str,
    root: str,
    data_root: str,
    fields: dict[str, Any] | None = None,
    threads: int = 1,
    mkldnn: bool = False,
    float64: bool = True,
) -> dict[str, Any] | None:
    """Train case `name` (its `CASES` fields, updated by `fields`) on this rank under the pinned numerics;
    rank 0 returns what the run pins (`pinned`)."""
    import torch

    from prunex.training.topology import discover
    from prunex.training.train import _train

    cfg = RunConfig(
        dataset="digits",
        model="resnet20",
        data_root=data_root,
        train_subset=128,
        epochs=1,
        batch_size=32,
        bn_batches=2,
        executor="local",
        results=root,
        name=name,
        # evaluate the last iteration only (evaluation is most of a smoke run's time) unless `fields` says otherwise
        **{"lr": PIN_LR, "eval_every": 1000, **CASES[name], **(fields or {})},
    )
    run_dir = Path(root) / cfg.experiment / cfg.name
    default = torch.get_default_dtype()
    try:
        pinned_numerics(threads, mkldnn, float64)
        _train(cfg, run_dir, discover(cfg.nodes, cfg.procs_per_node), torch.device("cpu"))
    finally:
        torch.set_default_dtype(default)
        torch.backends.mkldnn.enabled = True
    return pinned(run_dir) if rank == 0 else None


def _value(v: Any) -> Any:
    if isinstance(v, float) or type(v).__name__.startswith("float"):
        return float(v)  # json writes repr(), which reads back to the same double
    if hasattr(v, "item"):  # numpy scalars
        return v.item()
    return v


def _table(df: Any) -> dict[str, Any]:
    """A table as its columns (sorted by name) and rows (sorted): the pin is about values, not about the
    order in which a writer emits columns or ranks' rows. Float columns are compared within the
    tolerance, the others exactly (`compare`)."""
    df = df[sorted(df.columns)]
    floats = [c for c in df.columns if df[c].dtype.kind == "f"]
    rows = [[_value(v) for v in r] for r in df.itertuples(index=False)]
    # sort by the exact columns (a tolerance cannot reorder rows), then by the rest
    exact = [i for i, c in enumerate(df.columns) if c not in floats]
    rows.sort(key=lambda r: (json.dumps([r[i] for i in exact]), json.dumps(r)))
    return {"columns": list(df.columns), "floats": floats, "rows": rows}


def _model(path: Path) -> dict[str, Any]:
    """Per tensor of the model file: dtype, shape, and three floats that move with any of its entries
    (sum, sum of squares, and the dot product with a fixed pseudo-random +-1 vector)."""
    import torch

    state = torch.load(path, weights_only=True)
    out: dict[str, Any] = {}
    for k in sorted(state):
        t = state[k].detach().cpu().reshape(-1)
        if not t.is_floating_point():
            out[k] = {"dtype": str(t.dtype), "shape": list(state[k].shape), "values": t.tolist()}
            continue
        x = t.double()
        g = torch.Generator().manual_seed(len(k) * 7919 + x.numel())
        signs = torch.randint(0, 2, (x.numel(),), generator=g, dtype=torch.float64) * 2 - 1
        out[k] = {
            "dtype": str(t.dtype),
            "shape": list(state[k].shape),
            "stats": [x.sum().item(), x.square().sum().item(), (x * signs).sum().item()],
        }
    return out


def pinned(run_dir: Path) -> dict[str, Any]:
    """What a case pins: its tables (times excluded) and its final model's per-tensor statistics."""
    import pandas as pd

    out: dict[str, Any] = {}
    for table in TABLES:
        path = run_dir / f"{table}.parquet"
        if path.exists():
            df = pd.read_parquet(path)
            out[table] = _table(df.drop(columns=[c for c in TIMES if c in df.columns]))
    out["final_model"] = _model(run_dir / "final_model.pt")
    return out


def _float_pairs(got: dict[str, Any], want: dict[str, Any]) -> tuple[list[str], list[tuple[str, float, float, float]]]:
    """(exact differences, float pairs): every difference outside the float values, and each float value
    of `want` with its counterpart in `got` and its scale (the largest |value| of its column; for a
    tensor's sum and signed sum, the Cauchy-Schwarz bound sqrt(numel * sum of squares))."""
    exact: list[str] = []
    pairs: list[tuple[str, float, float, float]] = []
    for table in TABLES:
        g, w = got.get(table), want.get(table)
        if g is None or w is None:
            if g is not w:
                exact.append(f"{table}: present in {'the run' if g else 'the pin'} only")
            continue
        if g["columns"] != w["columns"] or g["floats"] != w["floats"] or len(g["rows"]) != len(w["rows"]):
            exact.append(f"{table}: columns or row count differ ({len(g['rows'])} rows vs {len(w['rows'])} pinned)")
            continue
        fcols = [i for i, c in enumerate(w["columns"]) if c in w["floats"]]
        scale = {i: max((abs(r[i]) for r in w["rows"] if not _nan(r[i])), default=0.0) for i in fcols}
        for n, (gr, wr) in enumerate(zip(g["rows"], w["rows"], strict=True)):
            for i, c in enumerate(w["columns"]):
                where = f"{table} row {n} {c}"
                if i not in fcols:
                    if gr[i] != wr[i]:
                        exact.append(f"{where}: {gr[i]!r} != pinned {wr[i]!r}")
                elif _nan(gr[i]) or _nan(wr[i]):
                    if _nan(gr[i]) != _nan(wr[i]):
                        exact.append(f"{where}: {gr[i]!r} != pinned {wr[i]!r}")
                else:
                    pairs.append((where, gr[i], wr[i], scale[i]))
    gm, wm = got["final_model"], want["final_model"]
    if sorted(gm) != sorted(wm):
        exact.append("final_model: tensor names differ")
        return exact, pairs
    for k, w in wm.items():
        g = gm[k]
        if g["dtype"] != w["dtype"] or g["shape"] != w["shape"] or g.get("values") != w.get("values"):
            exact.append(f"final_model {k}: dtype, shape or integer values differ")
            continue
        if "stats" in w:
            bound = math.sqrt(math.prod(w["shape"]) * abs(w["stats"][1]))
            scales = {"sum": bound, "sum of squares": w["stats"][1], "signed sum": bound}
            for j, (label, sc) in enumerate(scales.items()):
                pairs.append((f"final_model {k} {label}", g["stats"][j], w["stats"][j], sc))
    return exact, pairs


def _nan(v: Any) -> bool:
    return isinstance(v, float) and math.isnan(v)


def deviation(got: dict[str, Any], want: dict[str, Any]) -> tuple[list[str], float, str]:
    """(exact differences, the largest scaled float deviation |got - want| / scale, where it is)."""
    exact, pairs = _float_pairs(got, want)
    worst, where = 0.0, ""
    for label, g, w, scale in pairs:
        d = abs(g - w) / scale if scale > 0 else (0.0 if g == w else math.inf)
        if d > worst:
            worst, where = d, label
    return exact, worst, where


def compare(got: dict[str, Any], want: dict[str, Any], tolerance: float) -> list[str]:
    """The differences between a run's pinned values and the pin: every exact value that differs, and the
    worst float value when its scaled deviation exceeds `tolerance`. Empty: the run matches the pin."""
    exact, worst, where = deviation(got, want)
    problems = list(exact)
    if worst > tolerance:
        problems.append(f"{where}: scaled deviation {worst:.3g} > tolerance {tolerance:.3g}")
    return problems


def dump(golden: dict[str, Any]) -> str:
    """The pin file's text: one table row per line, so that a deliberate change shows as a readable diff."""
    lines = ["{"]
    cases = sorted(golden)
    for ci, case in enumerate(cases):
        lines.append(f" {json.dumps(case)}: {{")
        parts = list(golden[case].items())
        for pi, (key, val) in enumerate(parts):
            end = "," if pi + 1 < len(parts) else ""
            if key in TABLES:
                cols, floats = json.dumps(val["columns"]), json.dumps(val["floats"])
                lines.append(f'  "{key}": {{"columns": {cols}, "floats": {floats},')
                lines.append('   "rows": [')
                for ri, row in enumerate(val["rows"]):
                    lines.append(f"    {json.dumps(row)}{',' if ri + 1 < len(val['rows']) else ''}")
                lines.append(f"  ]}}{end}")
            else:
                lines.append(f'  "{key}": {{')
                items = list(val.items())
                for ti, (name, tensor) in enumerate(items):
                    lines.append(f"   {json.dumps(name)}: {json.dumps(tensor)}{',' if ti + 1 < len(items) else ''}")
                lines.append(f"  }}{end}")
        lines.append(f" }}{',' if ci + 1 < len(cases) else ''}")
    lines.append("}")
    return "\n".join(lines) + "\n"
