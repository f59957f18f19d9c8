"""The residual run and layers shared by Fig. 10 (rank-wise residuals) and Fig. 11 (per-layer totals).

The run is one hsadmm run's `residuals/*/residuals.parquet` (the largest ResNet-152 run if there is
one, else the run with the most ranks); the convolution shown is layer2.5.conv2 (the paper's L2.5.C2)
when the model has it, otherwise the last second convolution of stage 2.
"""

from __future__ import annotations

import math
import re

import pandas as pd

from analysis.common import Experiment, Run

PAPER_CONV = "layer2.5.conv2.weight"


def pick_run(exp: Experiment) -> tuple[Run | None, list[str]]:
    """The hsadmm run whose residuals to show, and notes about the choice."""
    notes = []
    candidates = [r for r in exp.by_method("hsadmm") if r.table("residuals") is not None]
    others = [r.run_id for r in exp.runs if r.method != "hsadmm"]
    if others:
        notes.append(f"only hsadmm runs are shown; left out: {', '.join(others)}")
    if not candidates:
        if exp.by_method("hsadmm"):
            notes.append("the hsadmm runs have no residuals table yet")
        return None, notes
    run = max(candidates, key=lambda r: (r.model == "resnet152", r.world_size, r.done, r.run_id))
    if len(candidates) > 1:
        notes.append(f"showing {run.run_id} ({len(candidates)} hsadmm runs have residuals)")
    return run, notes


def residuals_of(exp: Experiment) -> tuple[Run | None, pd.DataFrame, list[str]]:
    """The chosen run (`pick_run`; None: none has residuals), its residuals table and notes."""
    run, notes = pick_run(exp)
    res = run.table("residuals") if run is not None else None
    return run, res if res is not None else pd.DataFrame(), notes


def pick_fc(layers: list[str]) -> str | None:
    for name in layers:
        head = name.split(".")[0]
        if head in ("fc", "linear", "classifier", "head") and name.endswith("weight"):
            return name
    return None


def is_weight_layer(name: str) -> bool:
    """Convolution and fully connected weights (BatchNorm parameters and biases are not 'layers')."""
    return name.endswith(".weight") and ("conv" in name or "downsample.0" in name or pick_fc([name]) == name)


def pick_conv(layers: list[str]) -> str | None:
    if PAPER_CONV in layers:
        return PAPER_CONV
    convs = [n for n in layers if re.search(r"conv\d*\.weight$", n)]
    stage2 = [n for n in convs if n.startswith("layer2.") and n.endswith("conv2.weight")]
    if stage2:
        return max(stage2, key=lambda n: int(n.split(".")[1]) if n.split(".")[1].isdigit() else -1)
    return convs[len(convs) // 2] if convs else None


def decay_decades(df: pd.DataFrame, level: str = "intra") -> pd.Series:
    """Per (layer, rank): log10(first / last) primal residual at `level`."""
    out = {}
    for (layer, rank), g in df[df["level"] == level].groupby(["layer", "rank"]):
        g = g.sort_values("iteration")
        first, last = float(g["primal"].iloc[0]), float(g["primal"].iloc[-1])
        out[(layer, rank)] = math.log10(first / last) if first > 0 and last > 0 else float("nan")
    return pd.Series(out, dtype=float)
