"""Pruning (Fig. 12, sec. 5.6; Table 1): the functions that measure the claims on the sparsity-accuracy
trade-off, on H-SADMM against pruning after training, and on the pruned model's inference (the claims:
`analysis.claims.table`).

Accuracies are the final test accuracies of `analysis.fig12_pareto`'s hsadmm runs at a pruning ratio (the
mean over seeds); a drop is the unpruned accuracy minus the pruned one. Prune-then-finetune runs are matched
to the hsadmm run whose FLOPs they reach (`matched_run`). Inference is the exported compact model's latency
against the dense one (inference.parquet of a pruned hsadmm run of the pareto experiment).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis import fig12_pareto
from analysis.claims.base import Claim
from analysis.measurements import Logs, Measurement, models_note

# sec. 5.6.1: ResNet-152's accuracy drop (points) from its unpruned 85.96% at a pruning ratio
R152_DROP_POINTS = {0.4: 3.8, 0.5: 4.6}


def _hsadmm_pareto(logs: Logs) -> pd.DataFrame:
    df = logs.data(fig12_pareto.SPEC)
    return df[df["method"] == "hsadmm"]


def _pareto(logs: Logs, model: str) -> pd.DataFrame:
    df = _hsadmm_pareto(logs)
    return df[df["model"] == model]


def _acc_at(df: pd.DataFrame, ratio: float) -> float | None:
    row = df[(df["pruning_ratio_pct"] - 100 * ratio).abs() < 1e-6]
    return float(row["final_test_acc_pct"].mean()) if len(row) else None


def pareto_accuracy(c: Claim, logs: Logs) -> Measurement:
    df = _pareto(logs, str(c.model))
    acc = _acc_at(df, float(c.arg or 0))  # type: ignore[arg-type]
    if acc is None:
        have = _hsadmm_pareto(logs)
        return Measurement(
            missing=f"no {c.model} run at {100 * float(c.arg or 0):g}% pruning in pareto (models: {models_note(have)})"
        )
    return Measurement(acc, "final test accuracy", logs.runs("pareto", df["run_id"]))


def pareto_drop(c: Claim, logs: Logs) -> Measurement:
    df = _pareto(logs, str(c.model))
    base, acc = _acc_at(df, 0.0), _acc_at(df, float(c.arg or 0))  # type: ignore[arg-type]
    if base is None or acc is None:
        return Measurement(missing=f"needs {c.model} runs at 0% and {100 * float(c.arg or 0):g}% pruning in pareto")
    return Measurement(base - acc, f"{base:.2f}% unpruned - {acc:.2f}%", logs.runs("pareto", df["run_id"]))


def pareto_shape(c: Claim, logs: Logs) -> Measurement:
    df = _hsadmm_pareto(logs)
    checks, runs = [], []
    for model, g in df.groupby("model"):
        base, mid = _acc_at(g, 0.0), _acc_at(g, 0.5)
        sparse = g[g["pruning_ratio_pct"] >= fig12_pareto.HYPER_SPARSE_PCT]
        if base is None or mid is None or sparse.empty:
            continue
        last = sparse.sort_values("pruning_ratio_pct").iloc[-1]
        a, b = base - mid, mid - float(last["final_test_acc_pct"])
        checks.append(
            (
                str(model),
                a < b,
                f"{model}: drop 0->50% {a:.1f} points, 50->{last['pruning_ratio_pct']:.0f}% {b:.1f} points",
            )
        )
        runs += logs.runs("pareto", g["run_id"])
    if not checks:
        return Measurement(missing="needs, for a model, runs at 0%, 50% and >= 70% pruning in pareto")
    text = "expected the first drop smaller; " + "; ".join(t for _, _, t in checks)
    return Measurement(None, "", runs, all(ok for _, ok, _ in checks), text)


def pareto_vs_ptf(c: Claim, logs: Logs) -> Measurement:
    df = logs.data(fig12_pareto.SPEC)
    hs = df[df["method"] == "hsadmm"].set_index("run_id")
    ptf = df[(df["method"] == "prune_finetune") & df["matched_run"].isin(hs.index)]
    if ptf.empty:
        return Measurement(missing="no prune_finetune run matched to an hsadmm run in pareto")
    diffs, parts = [], []
    for r in ptf.itertuples():
        h = hs.loc[r.matched_run]
        d = float(h["final_test_acc_pct"] - r.final_test_acc_pct)
        diffs.append(d)
        parts.append(
            f"{h['model']} keep {h['channel_keep']:g}: H-SADMM {h['final_test_acc_pct']:.1f}% at "
            f"{h['flops_fraction_pct']:.0f}% FLOPs vs {r.final_test_acc_pct:.1f}% at {r.flops_fraction_pct:.0f}%"
        )
    runs = logs.runs("pareto", list(ptf["run_id"]) + list(ptf["matched_run"]))
    text = "expected H-SADMM more accurate at every matched point; " + "; ".join(parts)
    return Measurement(
        float(np.mean(diffs)),
        "mean accuracy difference H-SADMM - prune-then-finetune",
        runs,
        all(d > 0 for d in diffs),
        text,
    )


def inference_speedup(c: Claim, logs: Logs) -> Measurement:
    """Dense / compact latency at batch 128 on the claim's device, of the hsadmm run at keep `c.arg`'s
    nominal rate (the paper's primary configuration, channel keep 0.5) or the closest pruned one."""
    device = "cuda" if "gpu" in c.needs else "cpu"
    cands = []
    for run in logs.exp("pareto").by_method("hsadmm"):
        inf = run.table("inference")
        keep = float(run.admm.get("channel_keep", 1.0))
        if inf is None or keep >= 1.0:
            continue
        rows = inf[(inf["variant"] == "compact") & (inf["device"] == device)]
        if len(rows):
            cands.append((run.model != (c.model or run.model), abs(keep - 0.5), run, rows))
    if not cands:
        return Measurement(missing=f"no {device} rows in the inference.parquet of a pruned hsadmm run in pareto")
    _, _, run, rows = min(cands, key=lambda t: (t[0], t[1], t[2].run_id))
    by_batch = rows.set_index("batch")
    if 128 not in by_batch.index:
        return Measurement(missing=f"{run.run_id}: no batch-128 row in inference.parquet")
    b = by_batch.loc[128]
    detail = (
        f"{run.run_id} ({run.model}, nominal channel keep {run.admm.get('channel_keep')}): dense / compact latency "
        + ", ".join(f"batch {k} {v:.2f}x" for k, v in by_batch["speedup"].items())
        + f" on {b['hardware']}"
        + (f", {int(b['threads'])} threads" if device == "cpu" else "")
        + f"; compact model {100 * b['params_ratio']:.0f}% of the parameters, "
        + f"{100 * b['flops_ratio']:.0f}% of the FLOPs"
    )
    ok = bool(b["speedup"] > 1.0)
    text = f"expected the compact model faster than the dense one at batch 128; {b['speedup']:.2f}x"
    return Measurement(float(b["speedup"]), detail, [run], ok, text)
