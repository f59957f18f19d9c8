"""Convergence (Figs. 10, 11; secs. 4.5, 5.5): the functions that measure the claims on the decay of the
ADMM residuals and on the masks settling (the claims: `analysis.claims.table`).

Residuals (`analysis.fig10_residuals_ranks`, `analysis.residuals.decay_decades`): decades of decay of the
intra-node primal residual from the first to the last outer iteration, the worst over ranks and layers.
Mask drift (masks.parquet of every hsadmm run of the report's experiments): the first iteration from which
the global mask no longer changes, over the iterations where the masks are still dynamic (before
T_freeze), the worst over the runs whose masks prune anything. A run whose mask still drifted when a T_freeze
below the paper's 15 forced the freeze cannot say when it would have settled: with such a run the verdict is
withheld (`Measurement.undecided`), and without any run that settled nothing is measured.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from analysis import fig10_residuals_ranks
from analysis.claims.base import Claim
from analysis.measurements import EXPERIMENTS, Logs, Measurement
from analysis.residuals import decay_decades

MIN_RESIDUAL_ITERATIONS = 5


def residual_decay(c: Claim, logs: Logs) -> Measurement:
    df = logs.data(fig10_residuals_ranks.SPEC)
    if df.empty:
        return Measurement(missing="no hsadmm residuals in residuals")
    d = decay_decades(df, "intra")
    runs = logs.runs("residuals", df["run_id"].unique())
    n_iter = int(df["iteration"].nunique())
    if n_iter < MIN_RESIDUAL_ITERATIONS:
        return Measurement(
            missing=f"{n_iter} outer iterations: too few to show a decay over decades (needs "
            f">= {MIN_RESIDUAL_ITERATIONS})",
            runs=runs,
        )
    layers = ", ".join(sorted({str(k[0]).removesuffix(".weight") for k in d.index}))
    return Measurement(
        float(d.min()),
        f"min over ranks and layers ({layers}) of log10(first / last) intra-node "
        f"primal residual over {n_iter} iterations; max {d.max():.2f}",
        runs,
    )


PAPER_DRIFT_WINDOW = 15  # sec. 4.5: "within the first 5-15 iterations"


def _stable_from(masks: pd.DataFrame) -> tuple[float, int, str]:
    """1-based iteration from which the global drift stays zero over the dynamic iterations (inf:
    never), the number of dynamic iterations, and how it ended."""
    glob = masks[masks["kind"] == "global"]
    drift = glob.groupby("iteration")["drift"].sum().sort_index()
    dynamic = set(masks[masks["kind"] == "node"]["iteration"]) or set(drift.index)
    drift = drift[drift.index.isin(dynamic)]
    if drift.empty:
        return math.nan, 0, "no dynamic iteration"
    nonzero = drift[drift > 0]
    n_dynamic = int(drift.index.max()) + 1
    if nonzero.empty:
        return 1.0, n_dynamic, "no drift at all"
    if int(nonzero.index.max()) + 1 == n_dynamic:
        return math.inf, n_dynamic, f"drift still {int(nonzero.iloc[-1])} at the last dynamic iteration {n_dynamic}"
    return float(nonzero.index.max() + 2), n_dynamic, f"mask frozen after iteration {n_dynamic}"


def drift_zero(c: Claim, logs: Logs) -> Measurement:
    per_run, runs, undecided = [], [], []
    seen: set[Path] = set()
    for name in EXPERIMENTS:
        for run in logs.exp(name).by_method("hsadmm"):
            if run.path.resolve() in seen:
                continue
            seen.add(run.path.resolve())
            masks = run.table("masks")
            if masks is None or masks.empty:
                continue
            glob = masks[masks["kind"] == "global"]
            last = glob[glob["iteration"] == glob["iteration"].max()]
            if (last["kept_out"] == last["total_out"]).all() and (last["kept_in"] == last["total_in"]).all():
                continue  # nothing pruned (keep rate 1): drift is trivially zero
            value, n_dynamic, why = _stable_from(masks)
            t_freeze = int(run.admm.get("freeze_iteration", PAPER_DRIFT_WINDOW))
            if value == math.inf and (not run.done or (n_dynamic >= t_freeze and t_freeze < PAPER_DRIFT_WINDOW)):
                # still dynamic, or frozen by T_freeze before the paper's window ended: undecided
                undecided.append(f"{name}/{run.run_id} ({why}, T_freeze = {t_freeze})")
                continue
            if value == value:
                per_run.append((f"{name}/{run.run_id}", value, why))
                runs.append(run)
    if not per_run:
        what = f"; undecided: {', '.join(undecided[:4])}" if undecided else ""
        return Measurement(
            missing="no finished hsadmm run whose pruned masks could settle within "
            f"{PAPER_DRIFT_WINDOW} iterations{what}"
        )
    worst = max(v for _, v, _ in per_run)
    detail = "; ".join(f"{r}: {'never' if v == math.inf else int(v)} ({w})" for r, v, w in per_run[:6])
    if len(per_run) > 6:
        detail += f"; ... {len(per_run)} runs"
    m = Measurement(worst, detail, runs)
    if undecided:  # the worst run is the claim's value: one that cannot say when it settled leaves it open
        m.undecided = (
            f"{len(undecided)} run(s) still drifting when T_freeze forced the freeze, before the paper's "
            f"{PAPER_DRIFT_WINDOW} iterations: {', '.join(undecided[:4])}"
        )
    return m
