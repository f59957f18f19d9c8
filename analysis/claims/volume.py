"""Communication volume (Fig. 6, sec. 5.3.1): the functions that measure the claims on inter-node bytes (the
claims: `analysis.claims.table`).

Totals (Fig. 6b) are per model and method, `analysis.fig6b_volume_total`'s estimate rows (the sum of
steps.inter_bytes over the run); PruneX's reduction is 1 - PruneX / DDP of those totals. Message sizes
(Fig. 6a) are rank 0's AllReduce payloads (`analysis.fig6a_message_size`): DDP's dense message per step,
and PruneX's last compressed message as a fraction of it. The paper's per-model totals are
`prunex.paper.MODELS` (Fig. 6b's bars), read here for the totals and for the reductions alike.
"""

from __future__ import annotations

import numpy as np

from analysis import fig6a_message_size, fig6b_volume_total
from analysis.claims.base import Claim
from analysis.measurements import Logs, Measurement, models_note

VOLUME_NAMES = {"ddp": "DDP (dense)", "hsadmm": "PruneX"}  # Fig. 6b's two bars per model


def volume_reduction(c: Claim, logs: Logs) -> Measurement:
    df = logs.data(fig6b_volume_total.SPEC)
    est = df[df["source"] == fig6b_volume_total.ESTIMATE]
    red = est.dropna(subset=["reduction_vs_ddp_pct"])
    red = red[red["method"] == "hsadmm"]
    if c.model:
        red = red[red["model"] == c.model]
    if red.empty:
        what = f"{c.model} " if c.model else ""
        return Measurement(missing=f"no {what}hsadmm + ddp pair in volume (models with runs: {models_note(est)})")
    models = list(red["model"])
    runs = logs.runs("volume", est[est["model"].isin(models)]["run_ids"])
    per = ", ".join(f"{m} {r:.1f}%" for m, r in zip(red["model"], red["reduction_vs_ddp_pct"], strict=True))
    return Measurement(float(red["reduction_vs_ddp_pct"].mean()), f"1 - PruneX/DDP total inter-node bytes: {per}", runs)


def volume_total(c: Claim, logs: Logs) -> Measurement:
    df = logs.data(fig6b_volume_total.SPEC)
    row = df[(df["source"] == fig6b_volume_total.ESTIMATE) & (df["model"] == c.model) & (df["method"] == c.method)]
    if row.empty:
        return Measurement(missing=f"no {c.method} run of {c.model} in volume (models: {models_note(df)})")
    return Measurement(
        float(row["inter_gb"].iloc[0]),
        "sum of steps.inter_bytes over iterations / 1e9",
        logs.runs("volume", row["run_ids"]),
    )


def dense_message(c: Claim, logs: Logs) -> Measurement:
    df = logs.data(fig6a_message_size.SPEC)
    dense = df[(df["series"] == fig6a_message_size.DENSE) & (df["model"] == c.model)]
    if dense.empty:
        return Measurement(missing=f"no ddp run of {c.model} in volume (models: {models_note(df)})")
    runs = logs.runs("volume", dense["run_id"].unique())
    mb = float(dense["message_mb"].iloc[0])
    dtypes = {str((r.config.get("ddp") or {}).get("grad_dtype", "fp32")) for r in runs}
    return Measurement(
        mb,
        f"DDP AllReduce payload per step on rank 0 ({mb / 1.048576:.1f} MiB; gradients {'/'.join(sorted(dtypes))})",
        runs,
    )


def compressed_fraction(c: Claim, logs: Logs) -> Measurement:
    df = logs.data(fig6a_message_size.SPEC)
    models = [c.model] if c.model in set(df["model"]) else sorted(set(df["model"]))
    ratios, runs = {}, []
    for model in models:
        sub = df[df["model"] == model]
        r = fig6a_message_size.final_ratio(sub)
        if r == r:
            ratios[model] = r
            runs += logs.runs("volume", sub["run_id"].unique())
    if not ratios:
        return Measurement(
            missing=f"no hsadmm + ddp pair with inter-node messages in volume (models: {models_note(df)})"
        )
    sub_note = "" if c.model in ratios else f" ({c.model} absent: measured on {', '.join(ratios)})"
    per = ", ".join(f"{m} {v:.1f}%" for m, v in ratios.items())
    return Measurement(float(np.mean(list(ratios.values()))), f"last compressed message / dense: {per}{sub_note}", runs)
