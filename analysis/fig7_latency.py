"""Fig. 7: per-iteration communication latency.

Per-iteration communication latency of PruneX, DDP and flat PruneX (AR), without waiting (sec. 5.3.2).

    python -m analysis.fig7_latency --results results --out figures

Reads `latency/*/comm.parquet` and `steps.parquet`. An iteration is one optimizer step for DDP (and
Top-K, PacTrain) and one outer iteration for H-SADMM and flat ADMM, as in the paper.

Plotted (`waitfree_comm_s`): the *wait-free* communication time on the critical path
(`prunex.comm.waitfree.last_arriver_comm`): per collective call the seconds of its last-arriving member
(the minimum over the members of its group, who waited for nobody), the maximum over groups running
side by side (the nodes' intra-node AllReduces), summed over the iteration's calls. Time a rank spends
waiting for other ranks, inside a collective or at the `barrier` the ADMM methods pass before their
consensus, is not communication and is left out. Choices where the paper is silent: it does not say
whether its 0.50 s / 0.10 s include waiting; we take the collective's own time, the quantity a link
and a message size determine, because on 4 processes sharing 2 cores the waits measure the CPU
sharing, not the network. Barriers are left out of the wait-free time entirely (they move no data).

Kept in the csv for comparison: `comm_s`, the time a rank spent in collectives (steps.parquet's
comm_s, mean over ranks) minus the barrier, and `wait_s`, the barrier seconds (mean over ranks):
the quantities this figure plotted before waits were separated.

Medians (legend, summary, and the claims in `analysis.claims.latency`) leave out a run's iteration 0
when the run has more: it holds one-off costs (DDP's initial parameter broadcast, connection set-up)
that the paper's steady-state numbers do not; the paper does not say which iterations it plots.
"""

from __future__ import annotations

import sys

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure

from analysis import style
from analysis.common import WAITFREE_CAPTION, Experiment, cli, figure_spec, runs_with
from prunex.comm.waitfree import WAIT_OPS, last_arriver_comm

COLUMNS = ["run_id", "method", "model", "iteration", "waitfree_comm_s", "comm_s", "wait_s"]
CAPTION = (
    "Wait-free communication time per iteration: the slowest of groups running side by side, summed over the "
    f"iteration; waiting is left out. {WAITFREE_CAPTION} The csv keeps comm_s (seconds in collectives, mean "
    "over ranks, barrier excluded) and wait_s (barrier, mean over ranks) for comparison. Medians leave out "
    "iteration 0. Box: median, quartiles, 1.5 IQR whiskers, outliers. Dashed: partial runs."
)
PLOTTED = "waitfree_comm_s"


def waitfree_per_iteration(comm: pd.DataFrame | None, iterations: pd.Series) -> pd.Series:
    """Wait-free critical-path communication seconds for each of `iterations` (0 where none was logged)."""
    idx = pd.Index(iterations.to_numpy(), name="iteration")
    if comm is None or comm.empty:
        return pd.Series(0.0, index=idx)
    return last_arriver_comm(comm, exclude_ops=WAIT_OPS).reindex(idx, fill_value=0.0)


def steady(df: pd.DataFrame) -> pd.DataFrame:
    """Rows without each run's iteration 0, for runs with more than one iteration."""
    first = df.groupby("run_id")["iteration"].transform("min")
    many = df.groupby("run_id")["iteration"].transform("nunique") > 1
    return df[~(many & (df["iteration"] == first) & (first == 0))]


def compute(exp: Experiment) -> tuple[pd.DataFrame, list[str]]:
    frames, notes = [], []
    for run, steps in runs_with(exp, "steps", notes):
        comm = run.table("comm")
        if comm is None or comm.empty:
            notes.append(f"{run.run_id} has no comm table: its wait-free time is unknown, left out")
            continue
        wait = pd.Series(0.0, index=steps["iteration"].to_numpy())
        if (comm["op"].isin(WAIT_OPS)).any():
            barrier = comm[comm["op"].isin(WAIT_OPS)].groupby(["iteration", "rank"])["seconds"].sum()
            ranks = comm["rank"].nunique()
            wait = (barrier.groupby("iteration").sum() / ranks).reindex(wait.index, fill_value=0.0)
        frames.append(
            pd.DataFrame(
                {
                    "run_id": run.run_id,
                    "method": run.method,
                    "model": run.model,
                    "iteration": steps["iteration"].to_numpy(),
                    "waitfree_comm_s": waitfree_per_iteration(comm, steps["iteration"]).to_numpy(),
                    "comm_s": steps["comm_s"].to_numpy() - wait.to_numpy(),
                    "wait_s": wait.to_numpy(),
                }
            )
        )
    df = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=SPEC.columns)
    return df, notes


def medians(df: pd.DataFrame, column: str = PLOTTED) -> pd.Series:
    """Per method: the median over its runs' iterations (iteration 0 left out, `steady`)."""
    return steady(df).groupby("method")[column].median()


def draw(df: pd.DataFrame, exp: Experiment) -> Figure:
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.2), width_ratios=[2.2, 1], layout="constrained")
    methods = sorted(df["method"].unique(), key=style.method_sort_key)
    med = medians(df)
    for run_id, g in df.groupby("run_id", sort=False):
        m = g["method"].iloc[0]
        run = exp.run(str(run_id))
        ax.plot(
            g["iteration"],
            g[PLOTTED],
            lw=1.2,
            color=style.method_color(m),
            ls="-" if run.done else "--",
            label=f"{style.method_label(m)} (median {med[m]:.3g} s)",
        )
    data = [steady(df)[steady(df)["method"] == m][PLOTTED].to_numpy() for m in methods]
    box = bx.boxplot(data, patch_artist=True, showfliers=True, widths=0.6)
    for patch, m in zip(box["boxes"], methods, strict=True):
        patch.set_facecolor(style.method_color(m))
        patch.set_alpha(0.7)
    bx.set_xticks(range(1, len(methods) + 1), [style.method_label(m) for m in methods], rotation=20, ha="right")
    positive = df[PLOTTED][df[PLOTTED] > 0]
    log = len(positive) > 0 and positive.max() / max(positive.min(), 1e-12) > 100
    for a in (ax, bx):
        a.set_ylabel("wait-free communication time per iteration (s)")
        if log:
            a.set_yscale("log")
    ax.set_xlabel("iteration (DDP: optimizer step; ADMM: outer iteration)")
    handles, labels = ax.get_legend_handles_labels()
    uniq = dict(zip(labels, handles, strict=True))
    ax.legend(uniq.values(), uniq.keys(), fontsize=8)
    ax.set_title("per iteration")
    bx.set_title("distribution (iteration 0 left out)")
    fig.suptitle("Fig. 7: per-iteration communication latency, without waiting")
    return fig


def summary(df: pd.DataFrame) -> str:
    med, old = medians(df), medians(df, "comm_s")
    order = sorted(med.index, key=style.method_sort_key)
    text = "median wait-free communication per iteration: " + ", ".join(
        f"{style.method_label(m)} {med[m]:.3g} s" for m in order
    )
    if "ddp" in med and "hsadmm" in med and med["hsadmm"] > 0:
        text += f"; DDP / PruneX = {med['ddp'] / med['hsadmm']:.2f}x"
    text += "; with waiting inside collectives (comm_s, mean over ranks): " + ", ".join(
        f"{style.method_label(m)} {old[m]:.3g} s" for m in order
    )
    return text


SPEC = figure_spec(globals(), "latency", COLUMNS, CAPTION, ("hsadmm", "ddp", "flat_admm"))


if __name__ == "__main__":
    sys.exit(cli(SPEC))
