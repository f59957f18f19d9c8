"""Fig. 8: breakdown of communication latency.

Breakdown of PruneX's communication time by collective, without waiting, averaged over ranks (sec. 5.3.3).

    python -m analysis.fig8_latency_breakdown --results results --out figures

Reads `latency_breakdown/*/comm.parquet` of the hsadmm runs. Every collective call of a rank is split
(`prunex.comm.waitfree.wait_split`) into the call's own, *wait-free* seconds (the seconds of its last-arriving
member: the minimum over the members of its group, who waited for nobody) and the rank's wait for the
other members (its seconds minus the wait-free seconds). The wait-free seconds go to the call's
category: inter-node AllReduce (level inter, the compressed consensus), intra-node AllReduce (level
intra), Broadcast (the compact z to the node's workers), or other (mask sync, the small flat AllReduce
of the residual norms, which the paper does not show). Every rank's waits form a fifth category, "wait
for other ranks", together with the whole of the `barrier` before phase 2 (it moves no data: it
absorbs the wait for ranks still in local training). Seconds are summed per rank and category over the
run, then averaged over all ranks (followers contribute zero inter-node time), as the paper averages
over its 64 GPUs. `share_pct` is the share of all five; `share_of_three_pct` the share among the
paper's three categories only (the number compared with the paper's 68/18/14).

Choices where the paper is silent: it does not say whether its shares include waiting; with 4
processes on 2 cores the waits measure the CPU sharing, so they are shown apart and left out of the
three shares compared with the paper. A broadcast's wait-free time is its fastest member's, which
may be the root's send alone (`prunex.comm.waitfree`).
"""

from __future__ import annotations

import sys

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure

from analysis import style
from analysis.common import WAITFREE_CAPTION, Experiment, cli, figure_spec
from prunex.comm.waitfree import WAIT_OPS, wait_split
from prunex.paper import FIG8_SHARE_PCT

COLUMNS = ["source", "run_id", "model", "category", "seconds_per_rank", "share_pct", "share_of_three_pct"]
CAPTION = (
    f"Seconds per collective and rank, averaged over all ranks. {WAITFREE_CAPTION} Upper bar of a run: share of "
    "all communication time, waiting included; lower bar: share of the wait-free time among the paper's three "
    "categories (share_of_three_pct in the csv), the one compared with the paper."
)

CATEGORIES = list(style.CATEGORY_COLORS)
PAPER_THREE = CATEGORIES[:3]
OTHER, WAIT = CATEGORIES[3], CATEGORIES[4]
PAPER_LABEL = "paper (64 V100, ResNet-152)"


def category(level: str, op: str) -> str:
    if op in WAIT_OPS:
        return WAIT
    if op == "allreduce" and level == "inter":
        return CATEGORIES[0]
    if op == "allreduce" and level == "intra":
        return CATEGORIES[1]
    if op == "broadcast":
        return CATEGORIES[2]
    return OTHER


def paper_shares() -> dict[str, float]:
    """Fig. 8's shares (`prunex.paper.FIG8_SHARE_PCT`, which `analysis.claims.latency` checks too)."""
    return dict(FIG8_SHARE_PCT)


def seconds_per_rank(comm: pd.DataFrame) -> pd.DataFrame:
    """Per rank (rows) and category (columns, `CATEGORIES`): wait-free seconds of the calls of each
    category, and in `WAIT` the rank's wait (in collectives beyond their wait-free time, and barriers)."""
    c = wait_split(comm)
    c["category"] = [category(lv, op) for lv, op in zip(c["level"], c["op"], strict=True)]
    own = c[c["category"] != WAIT].pivot_table(
        index="rank", columns="category", values="own_s", aggfunc="sum", fill_value=0.0
    )
    per_rank = own.reindex(index=sorted(c["rank"].unique()), columns=CATEGORIES, fill_value=0.0)
    per_rank[WAIT] = c.groupby("rank")["wait_s"].sum().reindex(per_rank.index, fill_value=0.0)
    return per_rank


def compute(exp: Experiment) -> tuple[pd.DataFrame, list[str]]:
    rows, notes = [], []
    for run in exp.runs:
        if run.method != "hsadmm":
            notes.append(f"{run.run_id} ({run.method}) left out: the breakdown is of PruneX's hierarchy")
            continue
        comm = run.table("comm")
        if comm is None or comm.empty:
            notes.append(f"{run.run_id} has no comm table yet: left out")
            continue
        per_rank = seconds_per_rank(comm)
        mean = per_rank.mean(axis=0)  # over ranks, followers included
        barrier = comm[comm["op"].isin(WAIT_OPS)].groupby("rank")["seconds"].sum().reindex(per_rank.index)
        barrier_s = float(barrier.fillna(0.0).mean())
        notes.append(
            f"{run.run_id}: {mean[WAIT]:.3g} s per rank of waiting for other ranks ({barrier_s:.3g} s of it at the "
            f"pre-consensus barrier), against {float(mean[CATEGORIES[:4]].sum()):.3g} s of wait-free communication"
        )
        total, three = float(mean.sum()), float(mean[PAPER_THREE].sum())
        for cat in CATEGORIES:
            rows.append(
                {
                    "source": "measured",
                    "run_id": run.run_id,
                    "model": run.model,
                    "category": cat,
                    "seconds_per_rank": float(mean[cat]),
                    "share_pct": 100.0 * float(mean[cat]) / total if total > 0 else float("nan"),
                    "share_of_three_pct": 100.0 * float(mean[cat]) / three
                    if cat in PAPER_THREE and three > 0
                    else float("nan"),
                }
            )
        if run.nodes < 2:
            notes.append(f"{run.run_id} runs on one node: its 'inter-node' collectives have one member, no link")
    if rows:
        for cat, share in paper_shares().items():
            rows.append(
                {
                    "source": "paper",
                    "run_id": PAPER_LABEL,
                    "model": "resnet152",
                    "category": cat,
                    "seconds_per_rank": float("nan"),
                    "share_pct": share,
                    "share_of_three_pct": share,
                }
            )
    return pd.DataFrame(rows, columns=SPEC.columns), notes


def _bars(df: pd.DataFrame) -> list[tuple[str, str, str]]:
    """(label, run_id, share column) of each bar: two per measured run, then the paper's."""
    bars = []
    for run_id in dict.fromkeys(df["run_id"]):
        if run_id == PAPER_LABEL:
            bars.append((PAPER_LABEL, run_id, "share_pct"))
        else:
            bars.append((f"measured: {run_id}\n(all, waiting included)", run_id, "share_pct"))
            bars.append((f"measured: {run_id}\n(paper's three categories)", run_id, "share_of_three_pct"))
    return bars


def draw(df: pd.DataFrame, exp: Experiment) -> Figure:
    bars = _bars(df)
    fig, ax = plt.subplots(figsize=(10, 1.2 + 0.8 * len(bars)), layout="constrained")
    for i, (_, run_id, col) in enumerate(bars):
        sub = df[df["run_id"] == run_id].set_index("category")
        left = 0.0
        for cat in CATEGORIES:
            if cat not in sub.index or not sub.loc[cat, col] == sub.loc[cat, col]:
                continue
            w = float(sub.loc[cat, col])
            ax.barh(
                i,
                w,
                left=left,
                color=style.CATEGORY_COLORS[cat],
                edgecolor="white" if cat != WAIT else "#b03a2e",
                hatch=style.WAIT_HATCH if cat == WAIT else None,
                label=cat,
            )
            if w >= 4:
                ax.text(left + w / 2, i, f"{w:.1f}%", ha="center", va="center", fontsize=8)
            left += w
    ax.set_yticks(range(len(bars)), [label for label, _, _ in bars], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 100)
    ax.set_xlabel("share of communication time, mean over ranks (%)")
    handles, labels = ax.get_legend_handles_labels()
    uniq = dict(zip(labels, handles, strict=True))
    ax.legend(
        uniq.values(),
        uniq.keys(),
        fontsize=8,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.35 if len(bars) < 3 else -0.15),
        ncol=3,
    )
    ax.set_title("Fig. 8: breakdown of communication latency (PruneX), waiting apart")
    return fig


def summary(df: pd.DataFrame) -> str:
    meas = df[df["source"] == "measured"]
    paper = paper_shares()
    parts = []
    for run_id, sub in meas.groupby("run_id", sort=False):
        s = sub.set_index("category")
        three = ", ".join(f"{c} {s.loc[c, 'share_of_three_pct']:.1f}% (paper {paper[c]:g}%)" for c in PAPER_THREE)
        every = ", ".join(f"{c} {s.loc[c, 'share_pct']:.1f}%" for c in CATEGORIES)
        parts.append(f"{run_id}: wait-free, among the three: {three}; of all time: {every}")
    return " | ".join(parts)


SPEC = figure_spec(globals(), "latency_breakdown", COLUMNS, CAPTION, ("hsadmm",))


if __name__ == "__main__":
    sys.exit(cli(SPEC))
