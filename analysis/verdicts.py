"""Verdicts: each claim's measurement (`analysis.measurements`) against the paper's value and tolerance.

    python -m analysis.report --results results --out figures   # writes claims.csv and REPORT.md

`claims_table` is claims.csv: one row per claim of `analysis.claims` with the measured value, the
profile, hardware, topology and link model of the runs it was measured on, and the verdict
(`analysis.report`'s docstring says what each verdict means). `projection_table` sets the
performance model's projections of Fig. 9 beside the paper's numbers, with verdicts that say they
are a model's, never a measurement's.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from analysis import measurements as measure
from analysis.claims import CLAIMS, Claim
from analysis.common import LogError, Run
from analysis.measurements import Logs
from analysis.scaling import read_projections

REPRODUCED, NOT_REPRODUCED = "reproduced", "not reproduced"
NOT_MEASURABLE, NO_LOGS, ERROR = "not measurable in this profile", "no logs", "error"
INCOMPLETE = "incomplete logs"
CSV_COLUMNS = [
    "claim_id",
    "source",
    "claim",
    "paper_value",
    "unit",
    "measured_value",
    "ratio",
    "tolerance",
    "verdict",
    "compared",
    "detail",
    "profile",
    "hardware",
    "topology",
    "link_model",
    "runs",
]


# -- verdicts --------------------------------------------------------------------------------------
def blockers(c: Claim, runs: list[Run], needs: tuple[str, ...] | None = None) -> list[str]:
    """Why the runs' set-up is not the paper's, for the requirements (default: the claim's `needs`)."""
    check_model = needs is None  # the value depends on the model; an ordering of methods does not
    needs = c.needs if needs is None else needs
    out = []
    uniq = lambda xs: ", ".join(sorted(set(map(str, xs))))  # noqa: E731
    if c.model and check_model and any(r.model != c.model for r in runs):
        out.append(f"model {uniq(r.model for r in runs)} (paper: {c.model})")
    if "cifar10" in needs and any(r.dataset != "cifar10" for r in runs):
        out.append(f"dataset {uniq(r.dataset for r in runs)} (paper: cifar10)")
    if "64gpus" in needs and any(r.world_size != 64 for r in runs):
        out.append(f"{uniq(r.world_size for r in runs)} worker(s) (paper: 64 GPUs, 16 x 4)")
    if "gpu" in needs and any(r.device_type != "cuda" for r in runs):
        out.append(f"device {uniq(r.device_type for r in runs)} (paper: GPUs)")
    if "v100" in needs and any("V100" not in r.hardware for r in runs):
        out.append(f"hardware {uniq(r.hardware for r in runs)} (paper: V100)")
    if "multinode" in needs and any(r.nodes < 2 for r in runs):
        out.append("one node (no inter-node traffic)")
    if "inter_link" in needs and any(not r.has_inter_link for r in runs):
        out.append("no slow inter-node link (one node, or nodes emulated on one machine without a link model)")
    return out


def tolerance_text(c: Claim) -> str:
    if c.kind == "rel":
        return f"+-{100 * c.tolerance:g}%"
    if c.kind == "abs":
        return f"+-{c.tolerance:g} {c.unit}".strip()
    if c.kind == "at_least":
        return f">= {c.paper_value - c.tolerance:g} {c.unit}".strip()
    if c.kind == "at_most":
        return f"<= {c.paper_value + c.tolerance:g} {c.unit}".strip()
    return "qualitative"


def within(c: Claim, value: float) -> bool:
    p, t = c.paper_value, c.tolerance
    if c.kind == "rel":
        return abs(value / p - 1) <= t + 1e-12
    if c.kind == "abs":
        return abs(value - p) <= t + 1e-12
    if c.kind == "at_least":
        return value >= p - t - 1e-12
    if c.kind == "at_most":
        return value <= p + t + 1e-12
    raise ValueError(f"claim {c.id}: kind {c.kind!r} has no value tolerance")


def _context(runs: list[Run]) -> dict[str, str]:
    def j(xs: object) -> str:
        return "; ".join(dict.fromkeys(map(str, xs)))  # type: ignore[call-overload]

    return {
        "profile": j(r.profile for r in runs),
        "hardware": j(r.hardware for r in runs),
        "topology": j(r.topology() for r in runs),
        "link_model": j(r.link() for r in runs),
        "runs": " ".join(r.run_id for r in runs),
    }


def judge(c: Claim, logs: Logs) -> dict[str, object]:
    row: dict[str, object] = {
        "claim_id": c.id,
        "source": c.source,
        "claim": c.text,
        "unit": c.unit,
        "paper_value": c.paper_value,
        "measured_value": np.nan,
        "ratio": np.nan,
        "tolerance": tolerance_text(c),
        "compared": "-",
        "detail": "",
    }
    try:
        incomplete = logs.exp(c.experiment).incomplete if c.experiment else []
        if incomplete:  # the runs it would have been measured on are not all there
            paths = "; ".join(f"{path} ({why})" for path, why in incomplete)
            return row | {"verdict": INCOMPLETE, "detail": f"incomplete run(s): {paths}"} | _context([])
        m = c.measure(c, logs)
        no_runs = c.experiment and not logs.exp(c.experiment).runs
    except LogError as e:
        return row | {"verdict": ERROR, "detail": str(e)} | _context([])
    row |= _context(m.runs)
    if m.value is not None and not math.isnan(m.value):
        row["measured_value"] = m.value
    notes = [x for x in (m.detail, c.note) if x]
    if m.ordering is None and m.value is None:
        row["verdict"] = NO_LOGS if no_runs else NOT_MEASURABLE
        row["detail"] = "; ".join([m.missing or f"no logs for {c.experiment} under {logs.results}"] + notes)
        return row
    if c.kind == "ordering":
        block = blockers(c, m.runs)
        if block:
            row["verdict"] = NOT_MEASURABLE
            row["detail"] = "; ".join([f"not comparable: {'; '.join(block)}", m.ordering_text] + notes)
            return row
        row["verdict"] = REPRODUCED if m.ordering else NOT_REPRODUCED
        row["compared"] = "ordering"
        row["detail"] = "; ".join([m.ordering_text] + notes)
        return row
    block = blockers(c, m.runs)
    if m.value is not None and not block:
        row["verdict"] = REPRODUCED if within(c, m.value) else NOT_REPRODUCED
        row["compared"] = "value"
        if c.paper_value and math.isfinite(m.value):
            row["ratio"] = m.value / c.paper_value
        row["detail"] = "; ".join(notes)
    elif c.ordering_fallback and m.ordering is not None and not blockers(c, m.runs, c.ordering_needs):
        row["verdict"] = REPRODUCED if m.ordering else NOT_REPRODUCED
        row["compared"] = "ordering"
        row["detail"] = "; ".join(
            [f"value not comparable ({'; '.join(block)}): ordering {m.ordering_text}"] + ([c.note] if c.note else [])
        )
    else:
        row["verdict"] = NOT_MEASURABLE
        why = "; ".join(block) or m.missing
        if c.ordering_fallback and m.ordering is not None:
            why += "; nor the ordering: " + "; ".join(blockers(c, m.runs, c.ordering_needs))
        row["detail"] = "; ".join([f"not comparable: {why}"] + notes)
    return row


def claims_table(logs: Logs) -> pd.DataFrame:
    return pd.DataFrame([judge(c, logs) for c in CLAIMS], columns=CSV_COLUMNS)


PROJECTION_AGREES = "model agrees (projection, not a measurement)"
PROJECTION_DISAGREES = "model disagrees (projection, not a measurement)"
PROJECTION_COLUMNS = [
    "claim_id",
    "claim",
    "paper_value",
    "unit",
    "projected_value",
    "ratio",
    "tolerance",
    "verdict",
    "cluster",
    "model",
    "dataset",
    "source",
]


def projection_table(results: Path) -> pd.DataFrame:
    """The paper's Fig. 9 claims against every projection table under RESULTS/perfmodel that has the
    paper's 8 and 64 GPU counts (module docstring)."""
    lo, hi = measure.PAPER_COUNTS
    rows = []
    scaling = [c for c in CLAIMS if c.measure is measure.scaling]
    for path, df in read_projections(results):
        for (cluster, model), g in df.groupby(["cluster", "model"], sort=False):
            t = g.set_index(["method", "gpus"])["epoch_s"]
            for c in scaling:
                if (c.method, lo) not in t.index or (c.method, hi) not in t.index:
                    continue
                speedup = float(t[(c.method, lo)] / t[(c.method, hi)])
                value = speedup if c.arg == "speedup" else 100 * speedup / (hi / lo)
                rows.append(
                    {
                        "claim_id": c.id,
                        "claim": c.text,
                        "paper_value": c.paper_value,
                        "unit": c.unit,
                        "projected_value": value,
                        "ratio": value / c.paper_value,
                        "tolerance": tolerance_text(c),
                        "verdict": PROJECTION_AGREES if within(c, value) else PROJECTION_DISAGREES,
                        "cluster": cluster,
                        "model": model,
                        "dataset": str(g["dataset"].iloc[0]) if "dataset" in g.columns else "",
                        "source": str(path),
                    }
                )
    return pd.DataFrame(rows, columns=PROJECTION_COLUMNS)
