"""Strong scaling (Fig. 9, sec. 5.4): the functions that measure the claims on speedup and parallel
efficiency from 8 to 64 GPUs (the claims: `analysis.claims.table`).

Speedup is time per epoch at 8 GPUs over time per epoch at 64 (`PAPER_COUNTS`), efficiency the speedup over
the 8x more GPUs, both of the measured rows of `analysis.fig9a_scaling_speedup` (never the performance
model's projections, which `analysis.verdicts.projection_table` sets apart). The paper's numbers are
`prunex.paper.FIG9_SPEEDUP` and `FIG9_EFFICIENCY_PCT`, which the performance model prints too.
"""

from __future__ import annotations

from analysis import fig9a_scaling_speedup
from analysis.claims.base import Claim
from analysis.measurements import Logs, Measurement
from analysis.scaling import measured_only
from prunex.paper import FIG9_BASE_GPUS, FIG9_GPUS

PAPER_COUNTS = (FIG9_BASE_GPUS, FIG9_GPUS)


def scaling(c: Claim, logs: Logs) -> Measurement:
    df = measured_only(logs.data(fig9a_scaling_speedup.SPEC))
    sub = df[df["method"] == c.method]
    if sub.empty:
        return Measurement(missing=f"no {c.method} runs in strong_scaling")
    model = "resnet152" if "resnet152" in set(sub["model"]) else sorted(sub["model"].unique())[0]
    sub = sub[sub["model"] == model].set_index("gpus")
    counts = sorted(sub.index)
    runs = logs.runs("strong_scaling", sub["run_id"])
    lo, hi = PAPER_COUNTS
    if lo in sub.index and hi in sub.index:
        speedup = float(sub.loc[lo, "time_per_epoch_s"] / sub.loc[hi, "time_per_epoch_s"])
        value = speedup if c.arg == "speedup" else 100 * speedup / (hi / lo)
        return Measurement(value, f"time per epoch at {lo} / at {hi} ({model})", runs)
    have = ""
    if len(counts) >= 2:
        s = float(sub.loc[counts[0], "time_per_epoch_s"] / sub.loc[counts[-1], "time_per_epoch_s"])
        have = (
            f"; available: {s:.2f}x ({100 * s * counts[0] / counts[-1]:.0f}% efficiency) from {counts[0]} to "
            f"{counts[-1]}"
        )
    return Measurement(
        missing=f"needs {c.method} runs at {lo} and {hi} GPUs; found {counts} ({model}){have}", runs=runs
    )


def scaling_ordering(c: Claim, logs: Logs) -> Measurement:
    df = measured_only(logs.data(fig9a_scaling_speedup.SPEC))
    order = ["hsadmm", "ddp", "topk"]
    for model in sorted(df["model"].unique()):
        sub = df[(df["model"] == model) & df["method"].isin(order)]
        present = [m for m in order if m in set(sub["method"])]
        common = set.intersection(*[set(sub[sub["method"] == m]["gpus"]) for m in present]) if present else set()
        if "hsadmm" not in present or len(present) < 2 or len(common) < 2:
            continue
        lo, hi = min(common), max(common)
        t = sub.set_index(["method", "gpus"])["time_per_epoch_s"]
        speed = {m: float(t[(m, lo)] / t[(m, hi)]) for m in present}
        ok = all(speed[a] > speed[b] for a, b in zip(present, present[1:], strict=False))
        text = (
            f"expected {' > '.join(present)}; speedups "
            + ", ".join(f"{m} {speed[m]:.2f}x" for m in present)
            + f" ({lo} -> {hi}, {model})"
        )
        if len(present) < 3:
            text += f"; {', '.join(sorted(set(order) - set(present)))} missing"
        return Measurement(None, "", logs.runs("strong_scaling", sub["run_id"]), ok, text)
    return Measurement(missing="needs hsadmm and another method at two or more common counts in strong_scaling")
