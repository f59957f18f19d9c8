"""Communication latency (Figs. 7, 8; sec. 5.3.2-5.3.3): the functions that measure the claims on communication
time (the claims: `analysis.claims.table`), and the regime check (DDP's communication share of an iteration).

Latency (Fig. 7, sec. 5.3.2) is the wait-free communication time per iteration (`analysis.fig7_latency`),
median over iterations without iteration 0. The paper's "5x faster synchronisation" is measured per
synchronisation: DDP's median per optimizer step over PruneX's median per outer iteration. The paper's
latencies are `prunex.paper.FIG7_LATENCY_S`, its shares of Fig. 8 (`analysis.fig8_latency_breakdown`)
`prunex.paper.FIG8_SHARE_PCT`.

The regime check (`ddp_shares`, not a claim: `analysis.verdicts.regime_table`): DDP's measured
communication share of an iteration, median over steps >= 1 of the wait-free communication per step
(`prunex.comm.waitfree.last_arriver_comm`) over the median of steps.parquet's iter_s, from the latency DDP
run(s) (the job `prunex.cluster.regime` probed), else time_to_accuracy's; one value per DDP run there
(several when the experiment holds repeats). A DDP run that gives no share (no comm table) is named as left
out (regime.csv's `left_out`, REPORT.md), never dropped silently. It says whether the latency claims' regime
(communication dominating an iteration) is the one measured.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from analysis import fig7_latency, fig8_latency_breakdown
from analysis.claims.base import Claim
from analysis.common import Run
from analysis.fig7_latency import steady, waitfree_per_iteration
from analysis.measurements import Logs, Measurement, models_note


def _latency_stats(logs: Logs) -> tuple[pd.DataFrame, pd.Series]:
    """Fig. 7's data without each run's iteration 0, and the median wait-free time per method."""
    df = steady(logs.data(fig7_latency.SPEC))
    return df, df.groupby("method")[fig7_latency.PLOTTED].median() if len(df) else pd.Series(dtype=float)


def latency_median(c: Claim, logs: Logs) -> Measurement:
    df, med = _latency_stats(logs)
    if c.method not in med:
        return Measurement(missing=f"no {c.method} run in latency (methods: {models_note(df, 'method')})")
    runs = logs.runs("latency", df[df["method"] == c.method]["run_id"].unique())
    m = Measurement(
        float(med[c.method]),
        "median over iterations (iteration 0 left out) of the wait-free communication time per iteration",
        runs,
    )
    if "ddp" in med and "hsadmm" in med:
        m.ordering = bool(med["hsadmm"] < med["ddp"])
        m.ordering_text = f"expected PruneX below DDP; medians PruneX {med['hsadmm']:.3g} s, DDP {med['ddp']:.3g} s"
    return m


def latency_per_sync_ratio(c: Claim, logs: Logs) -> Measurement:
    """DDP's median wait-free communication per optimizer step / PruneX's per outer iteration (sec. 5.3.2)."""
    df, med = _latency_stats(logs)
    if not {"ddp", "hsadmm"} <= set(med.index):
        return Measurement(missing=f"needs ddp and hsadmm runs in latency (methods: {models_note(df, 'method')})")
    runs = logs.runs("latency", df[df["method"].isin(["ddp", "hsadmm"])]["run_id"].unique())
    return Measurement(
        float(med["ddp"] / med["hsadmm"]) if med["hsadmm"] > 0 else None,
        f"median wait-free comm per synchronisation (iteration 0 left out): DDP {med['ddp']:.3g} s per step / "
        f"PruneX {med['hsadmm']:.3g} s per outer iteration",
        runs,
    )


def latency_flat_worse(c: Claim, logs: Logs) -> Measurement:
    df, med = _latency_stats(logs)
    if not {"flat_admm", "hsadmm"} <= set(med.index):
        return Measurement(missing=f"needs flat_admm and hsadmm runs in latency (methods: {models_note(df, 'method')})")
    std = df.groupby("method")[fig7_latency.PLOTTED].std(ddof=0)
    runs = logs.runs("latency", df[df["method"].isin(["flat_admm", "hsadmm"])]["run_id"].unique())
    ok = bool(med["flat_admm"] > med["hsadmm"] and std["flat_admm"] > std["hsadmm"])
    text = (
        f"expected flat above PruneX in median and spread (wait-free, iteration 0 left out); median "
        f"{med['flat_admm']:.3g} s (flat) vs {med['hsadmm']:.3g} s (PruneX), std {std['flat_admm']:.3g} vs "
        f"{std['hsadmm']:.3g} s"
    )
    return Measurement(None, "", runs, ok, text)


def breakdown_share(c: Claim, logs: Logs) -> Measurement:
    df = logs.data(fig8_latency_breakdown.SPEC)
    meas = df[(df["source"] == "measured") & (df["category"] == c.arg)]
    if meas.empty:
        return Measurement(missing="no hsadmm comm table in latency_breakdown")
    runs = logs.runs("latency_breakdown", meas["run_id"].unique())
    return Measurement(
        float(meas["share_of_three_pct"].mean()),
        "wait-free seconds per rank averaged over ranks, share among "
        "inter AllReduce + intra AllReduce + Broadcast" + (f" (mean of {len(meas)} runs)" if len(meas) > 1 else ""),
        runs,
    )


# -- the regime check: DDP's communication share of an iteration ---------------------------------------
# where DDP's share is measured, first found wins: latency's runs are the probe's job (the profile's dataset and
# batch); time to accuracy may run on another dataset (the one-machine profiles' Fashion-MNIST, batch 64)
SHARE_EXPERIMENTS = ("latency", "time_to_accuracy")


@dataclass
class Share:
    """DDP's communication share of an iteration in one run (medians over steps >= 1)."""

    experiment: str
    run: Run
    waitfree_s: float  # median wait-free communication per step
    comm_s: float  # median of steps.parquet comm_s (mean over ranks, waiting included)
    iter_s: float  # median of steps.parquet iter_s

    @property
    def share(self) -> float:
        return self.waitfree_s / self.iter_s if self.iter_s > 0 else math.nan

    @property
    def share_with_wait(self) -> float:
        return self.comm_s / self.iter_s if self.iter_s > 0 else math.nan


def ddp_shares(logs: Logs, notes: list[str] | None = None) -> list[Share]:
    """One `Share` per DDP run of the first of `SHARE_EXPERIMENTS` that has one with both tables.

    A DDP run of an experiment looked at that gives no share (no steps or comm table, or no iteration time to
    divide by) is left out with a note in `notes`, "<experiment>/<run> ...: left out", as the figures' notes
    (`analysis.common.runs_with`): the regime check then says on how many runs it rests and which it could not
    use, also when latency's DDP runs all gave none and time_to_accuracy's were measured instead."""
    notes = [] if notes is None else notes
    for name in SHARE_EXPERIMENTS:
        shares = []
        for run in logs.exp(name).by_method("ddp"):
            steps, comm = run.table("steps"), run.table("comm")
            missing = [t for t, df in (("steps", steps), ("comm", comm)) if df is None or df.empty]
            if missing or steps is None or comm is None:
                notes.append(f"{name}/{run.run_id} has no {' or '.join(missing)} table: its share is unknown, left out")
                continue
            steps = steps.sort_values("iteration", ignore_index=True)
            steps["waitfree_s"] = waitfree_per_iteration(comm, steps["iteration"]).to_numpy()
            if steps["iteration"].nunique() > 1:
                steps = steps[steps["iteration"] >= 1]
            med = steps[["waitfree_s", "comm_s", "iter_s"]].median()
            share = Share(name, run, float(med["waitfree_s"]), float(med["comm_s"]), float(med["iter_s"]))
            if not math.isfinite(share.share):
                notes.append(
                    f"{name}/{run.run_id} has no iteration time (median iter_s {share.iter_s:g}): "
                    "its share is unknown, left out"
                )
                continue
            shares.append(share)
        if shares:
            return shares
    return []
