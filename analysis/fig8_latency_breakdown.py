"""Fig. 8: breakdown of communication latency.

Breakdown of PruneX's communication time by collective, averaged over ranks.

    python -m analysis.fig8_latency_breakdown --results results --out figures

Reads `latency_breakdown/*/comm.parquet` of the hsadmm runs. Every collective call of a rank is
put in one category: inter-node AllReduce (level inter, the compressed consensus), intra-node
AllReduce (level intra), Broadcast (the compact z to the node's workers), or other (mask sync,
the small flat AllReduce of the residual norms, which the paper does not show). The barrier before
phase 2, which absorbs the wait for ranks still in local training, is not a transfer: it is left
out and its seconds are named in a note. Seconds are summed
per rank and category over the run, then averaged over all ranks (followers contribute zero inter-
node time), as the paper averages over its 64 GPUs. The paper's shares are drawn for reference.
"""

from __future__ import annotations

import sys

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure

from analysis import style
from analysis.common import Experiment, cli, figure_spec

COLUMNS = ["source", "run_id", "model", "category", "seconds_per_rank", "share_pct", "share_of_three_pct"]
CAPTION = (
    "Seconds per collective summed per rank, averaged over all ranks; bars: share of all "
    "communication time. share_of_three_pct in the csv leaves 'other' out, as the paper's three categories do."
)

CATEGORIES = list(style.CATEGORY_COLORS)
PAPER_THREE = CATEGORIES[:3]
PAPER_LABEL = "paper (64 V100, ResNet-152)"


def category(level: str, op: str) -> str:
    if op == "allreduce" and level == "inter":
        return CATEGORIES[0]
    if op == "allreduce" and level == "intra":
        return CATEGORIES[1]
    if op == "broadcast":
        return CATEGORIES[2]
    return CATEGORIES[3]


def paper_shares() -> dict[str, float]:
    """Fig. 8's shares, from analysis.claims (encoded once; imported here, not above: the claims hold the
    measurements, which read this figure's data)."""
    from analysis.claims import CLAIMS
    from analysis.measurements import breakdown_share

    return {c.arg: c.paper_value for c in CLAIMS if c.measure is breakdown_share}  # type: ignore[misc]


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
        waiting = comm["op"] == "barrier"
        if waiting.any():  # waiting for stragglers before the consensus: not a transfer
            wait = comm[waiting].groupby("rank")["seconds"].sum().mean()
            notes.append(f"{run.run_id}: {wait:.3g} s per rank of waiting at the pre-consensus barrier left out")
            comm = comm[~waiting].copy()
        comm["category"] = [category(lv, op) for lv, op in zip(comm["level"], comm["op"], strict=True)]
        per_rank = comm.pivot_table(index="rank", columns="category", values="seconds", aggfunc="sum", fill_value=0.0)
        per_rank = per_rank.reindex(columns=CATEGORIES, fill_value=0.0)
        mean = per_rank.mean(axis=0)  # over ranks, followers included
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


def draw(df: pd.DataFrame, exp: Experiment) -> Figure:
    bars = list(dict.fromkeys(df["run_id"]))
    fig, ax = plt.subplots(figsize=(10, 1.2 + 0.8 * len(bars)), layout="constrained")
    for i, bar in enumerate(bars):
        sub = df[df["run_id"] == bar].set_index("category")
        left = 0.0
        for cat in CATEGORIES:
            if cat not in sub.index or not sub.loc[cat, "share_pct"] == sub.loc[cat, "share_pct"]:
                continue
            w = float(sub.loc[cat, "share_pct"])
            ax.barh(i, w, left=left, color=style.CATEGORY_COLORS[cat], edgecolor="white", label=cat)
            if w >= 4:
                ax.text(left + w / 2, i, f"{w:.1f}%", ha="center", va="center", fontsize=8)
            left += w
    ax.set_yticks(range(len(bars)), [b if b == PAPER_LABEL else f"measured: {b}" for b in bars], fontsize=8)
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
        bbox_to_anchor=(0.5, -0.35 if len(bars) < 3 else -0.2),
        ncol=4,
    )
    ax.set_title("Fig. 8: breakdown of communication latency (PruneX)")
    return fig


def summary(df: pd.DataFrame) -> str:
    meas = df[df["source"] == "measured"]
    paper = paper_shares()
    parts = []
    for run_id, sub in meas.groupby("run_id", sort=False):
        s = sub.set_index("category")
        three = ", ".join(f"{c} {s.loc[c, 'share_of_three_pct']:.1f}% (paper {paper[c]:g}%)" for c in PAPER_THREE)
        parts.append(f"{run_id}: {three}; other {s.loc[CATEGORIES[3], 'share_pct']:.1f}% of all")
    return " | ".join(parts)


SPEC = figure_spec(globals(), "latency_breakdown", COLUMNS, CAPTION, ("hsadmm",))


if __name__ == "__main__":
    sys.exit(cli(SPEC))
