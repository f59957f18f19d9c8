"""Fig. 6a: inter-node message size per iteration.

Inter-node message size per iteration, H-SADMM (compressed) vs dense.

    python -m analysis.fig6a_message_size --results results --out figures

Reads `volume/*/comm.parquet`. Compressed: the payload of H-SADMM's inter-node AllReduce calls (all
buckets) of node 0's leader (rank 0) in each outer iteration. Dense reference: the payload of DDP's
gradient AllReduce per optimizer step on rank 0 (median over steps) for the same model.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from analysis import style
from analysis.common import Experiment, Run, cli, facet_axes, figure_spec, fmt

COLUMNS = ["run_id", "method", "model", "series", "iteration", "message_mb"]
CAPTION = (
    "Payload bytes of rank 0's AllReduce calls (1 MB = 1e6 bytes), including BatchNorm buffers for "
    "H-SADMM. Dense line: DDP's gradient AllReduce per optimizer step (median), drawn over the H-SADMM iterations."
)

COMPRESSED, DENSE = "compressed (H-SADMM inter-node AllReduce)", "dense (DDP AllReduce per step, median)"


def payload_per_iteration(comm: pd.DataFrame, level: str) -> pd.Series:
    """Payload bytes of rank 0's AllReduce calls at `level`, summed per iteration."""
    sel = comm[(comm["rank"] == 0) & (comm["level"] == level) & (comm["op"] == "allreduce")]
    return sel.groupby("iteration")["bytes"].sum().sort_index()


def payloads(
    exp: Experiment, method: str, level: str, notes: list[str], missing: str
) -> Iterator[tuple[Run, pd.Series]]:
    """Each run of `method` with its rank 0 AllReduce payload per iteration at `level`; a run without
    any is left out with the note "<run>: <missing>"."""
    for run in exp.by_method(method):
        comm = run.table("comm")
        per_iter = payload_per_iteration(comm, level) if comm is not None else pd.Series(dtype=float)
        if per_iter.empty:
            notes.append(f"{run.run_id}: {missing}")
            continue
        yield run, per_iter


def compute(exp: Experiment) -> tuple[pd.DataFrame, list[str]]:
    rows, notes = [], []
    dense: dict[str, tuple[str, float]] = {}
    for run, per_step in payloads(exp, "ddp", "flat", notes, "no DDP AllReduce logged, no dense reference from it"):
        dense.setdefault(run.model, (run.run_id, float(per_step.median()) / 1e6))
    for run, per_iter in payloads(
        exp, "hsadmm", "inter", notes, "no inter-node AllReduce logged (one node?), left out"
    ):
        for it, b in per_iter.items():
            rows.append(
                {
                    "run_id": run.run_id,
                    "method": "hsadmm",
                    "model": run.model,
                    "series": COMPRESSED,
                    "iteration": int(it),
                    "message_mb": b / 1e6,
                }
            )
        if run.model in dense:
            ddp_id, mb = dense[run.model]
            for it in per_iter.index:
                rows.append(
                    {
                        "run_id": ddp_id,
                        "method": "ddp",
                        "model": run.model,
                        "series": DENSE,
                        "iteration": int(it),
                        "message_mb": mb,
                    }
                )
        else:
            notes.append(f"no DDP run for {run.model}: the dense reference is missing")
    others = sorted({r.method for r in exp.runs} - {"ddp", "hsadmm"})
    if others:
        notes.append(f"methods not shown in this figure: {', '.join(others)}")
    return pd.DataFrame(rows, columns=SPEC.columns), notes


def draw(df: pd.DataFrame, exp: Experiment) -> Figure:
    models = sorted(df["model"].unique(), key=style.model_sort_key)
    fig, axes = facet_axes(len(models), width=5.5, height=3.8)
    for ax, model in zip(axes, models, strict=True):
        sub = df[df["model"] == model]
        for (series, _), g in sub.groupby(["series", "run_id"], sort=False):
            method = g["method"].iloc[0]
            is_dense = series == DENSE
            ax.plot(
                g["iteration"],
                g["message_mb"],
                color=style.method_color(method),
                ls="--" if is_dense else "-",
                marker=None if is_dense else "o",
                ms=3,
                lw=1.6,
                label=f"{style.method_label(method)}: {series.split(' (')[0]}",
            )
        ratio = final_ratio(sub)
        if ratio == ratio:
            ax.text(
                0.98,
                0.04,
                f"last iteration: {ratio:.0f}% of dense",
                transform=ax.transAxes,
                ha="right",
                va="bottom",
                fontsize=9,
                color=style.method_color("hsadmm"),
                bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.8},
            )
        ax.set_ylim(bottom=0)
        ax.set_xlabel("H-SADMM outer iteration")
        ax.set_ylabel("inter-node message per iteration (MB)")
        ax.set_title(style.model_label(model))
        ax.legend(fontsize=8, loc="lower left")
    fig.suptitle("Fig. 6a: inter-node message size per iteration")
    return fig


def final_ratio(sub: pd.DataFrame) -> float:
    comp = sub[sub["series"] == COMPRESSED].sort_values("iteration")
    dense = sub[sub["series"] == DENSE]
    if comp.empty or dense.empty:
        return float("nan")
    return 100.0 * float(comp["message_mb"].iloc[-1]) / float(dense["message_mb"].iloc[0])


def summary(df: pd.DataFrame) -> str:
    parts = []
    for model, sub in df.groupby("model"):
        comp = sub[sub["series"] == COMPRESSED].sort_values("iteration")
        dense = sub[sub["series"] == DENSE]
        d = f"{dense['message_mb'].iloc[0]:.3g} MB dense" if len(dense) else "no dense reference"
        first, last = comp["message_mb"].iloc[0], comp["message_mb"].iloc[-1]
        r = final_ratio(sub)
        parts.append(
            f"{style.model_label(str(model))}: {first:.3g} -> {last:.3g} MB per iteration ({d}"
            + (f", {fmt(r)}%)" if np.isfinite(r) else ")")
        )
    return "; ".join(parts)


SPEC = figure_spec(globals(), "volume", COLUMNS, CAPTION, ("hsadmm", "ddp"))


if __name__ == "__main__":
    sys.exit(cli(SPEC))
