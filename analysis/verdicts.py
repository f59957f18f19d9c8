"""Verdicts: each claim's measurement (its `measure`, `analysis.claims`) against the paper's value and tolerance.

    python -m analysis.report --results results --out figures   # writes claims.csv and REPORT.md

`claims_table` is claims.csv: one row per claim of `analysis.claims` with the measured value, the
profile, hardware, topology and link model of the runs it was measured on, and the verdict
(`analysis.report`'s docstring says what each verdict means). `projection_table` sets the
performance model's projections of Fig. 9 beside the paper's numbers, with verdicts that say they
are a model's, never a measurement's.

Repeats: where the claim's experiment holds repeats of a measurement (runs differing only in `seed`,
`Logs.repeat_views`), the claim is measured and judged once per repeat. claims.csv gives the median
of the repeats' values with their spread (`measured_min`, `measured_max`, `repeats`); the verdict is
theirs when they agree, and `not decidable here` when repeats fall on both sides of the claim's
boundary (some reproduced, some not). Repeats that cannot be judged (not measurable) are named in
the detail and left out of that decision. One measurement whose function says it cannot be told from its
noise (`Measurement.undecided`: an ordering within its evaluation spacing or the claim's stated seed spread)
is `not decidable here` too, and so are the repeats' verdict where one repeat is. The paper gives one value
per claim, no spread; the median is our choice of the value to show, not part of the verdict.

`regime_table` is the regime check (`regime.csv`, REPORT.md's "Regime" section): the share of DDP's
iteration spent communicating (wait-free, `analysis.claims.latency.ddp_shares`) against the target
of a regime-matched profile's `regime.json`, `within` or `outside` +-25% (relative), or not decidable
when DDP runs (repeats) fall on both sides; `measured_on` names the DDP runs it rests on, `left_out` those
of the experiments looked at that gave no share, and why.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from analysis.claims import CLAIMS, PAPER_COUNTS, Claim, ddp_shares, strong_scaling
from analysis.common import LogError, Run, read_regime
from analysis.measurements import EXPERIMENTS, Logs, Measurement
from analysis.scaling import read_projections

REPRODUCED, NOT_REPRODUCED = "reproduced", "not reproduced"
NOT_MEASURABLE, NO_LOGS, ERROR = "not measurable in this profile", "no logs", "error"
INCOMPLETE = "incomplete logs"
NOT_DECIDABLE = "not decidable here"
DECISIVE = (REPRODUCED, NOT_REPRODUCED)
JUDGED = (*DECISIVE, NOT_DECIDABLE)  # a repeat's verdict that takes part in the repeats' verdict
CSV_COLUMNS = [
    "claim_id",
    "source",
    "claim",
    "paper_value",
    "unit",
    "measured_value",
    "measured_min",
    "measured_max",
    "repeats",
    "ratio",
    "tolerance",
    "tolerance_reason",
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
        return f"+-{100 * c.tolerance:.3g}%"
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
    """The claim's claims.csv row: judged once, or once per repeat (module docstring)."""
    try:
        views = logs.repeat_views(c.experiment) if c.experiment else []
    except LogError:
        views = []
    if len(views) < 2:
        return judge_once(c, logs)
    per_repeat = [(seed, judge_once(c, view)) for seed, view in views]
    decisive = [(seed, r) for seed, r in per_repeat if r["verdict"] in JUDGED]
    if not decisive:
        row = judge_once(c, logs)
        row["detail"] = "; ".join(
            x for x in (str(row["detail"]), f"{len(views)} repeats (seeds), none measurable on its own") if x
        )
        return row
    return combine_repeats(c, decisive, [seed for seed, r in per_repeat if r["verdict"] not in JUDGED])


def combine_repeats(c: Claim, decisive: list[tuple[int, dict[str, object]]], undecided: list[int]) -> dict[str, object]:
    """One row from the rows of the repeats (seed, row) judged reproduced, not reproduced or not decidable (a
    repeat too close to call makes the repeats' verdict not decidable too)."""
    rows = [r for _, r in decisive]
    row = dict(rows[0])
    verdicts = {r["verdict"] for r in rows}
    row["verdict"] = verdicts.pop() if len(verdicts) == 1 else NOT_DECIDABLE
    values = [float(r["measured_value"]) for r in rows if r["measured_value"] == r["measured_value"]]
    row["repeats"] = len(rows)
    if values:
        mid = statistics.median(values)
        row["measured_value"], row["measured_min"], row["measured_max"] = mid, min(values), max(values)
        # a ratio to the paper's value only where values were compared: an ordering's value is not its reading
        compared = row["compared"] == "value" and c.paper_value and math.isfinite(c.paper_value)
        row["ratio"] = mid / c.paper_value if compared else np.nan
    for key in ("profile", "hardware", "topology", "link_model"):
        row[key] = "; ".join(dict.fromkeys(str(r[key]) for r in rows))
    row["runs"] = " ".join(dict.fromkeys(x for r in rows for x in str(r["runs"]).split()))
    each = ", ".join(f"seed {seed}: {_repeat_value(r)}{r['verdict']}" for seed, r in decisive)
    spread = f"spread {min(values):.4g}-{max(values):.4g}, n={len(values)}; " if values else ""
    head = f"{len(rows)} repeats ({spread}{each})"
    if row["verdict"] == NOT_DECIDABLE:
        head += ": they fall on both sides of the boundary"
    if undecided:
        head += f"; seed(s) {', '.join(map(str, undecided))} not measurable on their own, left out"
    first = f"seed {decisive[0][0]}: {rows[0]['detail']}" if rows[0]["detail"] else ""
    row["detail"] = "; ".join(x for x in (head, first) if x)
    return row


def _repeat_value(r: dict[str, Any]) -> str:
    v = r["measured_value"]
    return f"{v:.4g} " if isinstance(v, float) and v == v else ""


def judge_once(c: Claim, logs: Logs) -> dict[str, object]:
    """The claim judged on the logs as they are (one measurement)."""
    row: dict[str, object] = {
        "claim_id": c.id,
        "source": c.source,
        "claim": c.text,
        "unit": c.unit,
        "paper_value": c.paper_value,
        "measured_value": np.nan,
        "measured_min": np.nan,
        "measured_max": np.nan,
        "repeats": "",
        "ratio": np.nan,
        "tolerance": tolerance_text(c),
        "tolerance_reason": c.tolerance_reason,
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
        row["verdict"] = _ordering_verdict(m)
        row["compared"] = "ordering"
        row["detail"] = "; ".join([m.ordering_text] + ([m.undecided] if m.undecided else []) + notes)
        return row
    block = blockers(c, m.runs)
    if m.value is not None and not block:
        row["verdict"] = NOT_DECIDABLE if m.undecided else REPRODUCED if within(c, m.value) else NOT_REPRODUCED
        row["compared"] = "value"
        if c.paper_value and math.isfinite(m.value):
            row["ratio"] = m.value / c.paper_value
        row["detail"] = "; ".join(([m.undecided] if m.undecided else []) + notes)
    elif c.ordering_fallback and m.ordering is not None and not blockers(c, m.runs, c.ordering_needs):
        row["verdict"] = _ordering_verdict(m)
        row["compared"] = "ordering"
        row["detail"] = "; ".join(
            [f"value not comparable ({'; '.join(block)}): ordering {m.ordering_text}"]
            + ([m.undecided] if m.undecided else [])
            + ([c.note] if c.note else [])
        )
    else:
        row["verdict"] = NOT_MEASURABLE
        why = "; ".join(block) or m.missing
        if c.ordering_fallback and m.ordering is not None:
            why += "; nor the ordering: " + "; ".join(blockers(c, m.runs, c.ordering_needs))
        row["detail"] = "; ".join([f"not comparable: {why}"] + notes)
    return row


def _ordering_verdict(m: Measurement) -> str:
    """An ordering's verdict: whether it holds, unless the measurement says it cannot be told from its noise."""
    if m.undecided:
        return NOT_DECIDABLE
    return REPRODUCED if m.ordering else NOT_REPRODUCED


def claims_table(logs: Logs) -> pd.DataFrame:
    rows = [judge(c, logs) for c in CLAIMS]
    for r in rows:
        if r["repeats"] == "" and r["verdict"] in DECISIVE:
            r["repeats"] = 1
    return pd.DataFrame(rows, columns=CSV_COLUMNS)


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
    lo, hi = PAPER_COUNTS
    rows = []
    scaling = [c for c in CLAIMS if c.measure is strong_scaling.scaling]
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


# -- the regime check ---------------------------------------------------------------------------------
WITHIN, OUTSIDE = "within", "outside"
REGIME_TOLERANCE = 0.25
REGIME_TOLERANCE_REASON = (
    "the factor claims' band: the target rests on the paper's approximate 0.50 s DDP latency (read off "
    "Fig. 7) and an estimated V100 compute time, neither known more closely"
)
NOT_REGIME_MATCHED = "not regime-matched"
REGIME_COLUMNS = [
    "regime_matched",
    "target_share",
    "derivation",
    "paper_ddp_comm_s",
    "paper_compute_s",
    "paper_compute_status",
    "probe_compute_s",
    "probe_iterations",
    "bandwidth_mbit",
    "tc_rate",
    "oversubscription",
    "binding",
    "measured_share",
    "measured_min",
    "measured_max",
    "repeats",
    "share_with_wait",
    "measured_on",
    "left_out",
    "tolerance",
    "tolerance_reason",
    "verdict",
]


def regime_verdict(target: float, shares: list[float], tolerance: float = REGIME_TOLERANCE) -> str:
    """`within` / `outside` +-tolerance (relative) of the target, `not decidable here` when the shares fall
    on both sides, `not regime-matched` without a target (no regime.json, or one without target_share),
    `no logs` without a share."""
    if not target or target != target:
        return NOT_REGIME_MATCHED
    if not shares:
        return NO_LOGS
    return per_repeat([abs(s / target - 1) <= tolerance + 1e-12 for s in shares], WITHIN, OUTSIDE)


def per_repeat(inside: list[bool], yes: str, no: str) -> str:
    """The verdict over repeats (seeds) each judged on its own: `yes` when every one is inside the
    boundary, `no` when none is, `not decidable here` when they fall on both sides."""
    if all(inside):
        return yes
    return no if not any(inside) else NOT_DECIDABLE


def _float(d: dict[str, Any], key: str) -> float:
    try:
        return float(d[key])
    except (KeyError, TypeError, ValueError):
        return math.nan


def regime_table(logs: Logs) -> pd.DataFrame:
    """One row: the regime a profile was matched to (if any) and DDP's measured communication share."""
    runs = [r for name in EXPERIMENTS for r in logs.exp(name).runs]
    regime = read_regime(logs.results, runs) or {}
    probe = regime.get("probe") if isinstance(regime.get("probe"), dict) else {}
    left_out: list[str] = []
    shares = ddp_shares(logs, left_out)
    values = [s.share for s in shares]  # finite: ddp_shares leaves a run without a share out, in left_out
    target = _float(regime, "target_share")
    row: dict[str, object] = {
        "regime_matched": bool(regime),
        "target_share": target,
        "derivation": str(regime.get("derivation", "")),
        "paper_ddp_comm_s": _float(regime, "paper_ddp_comm_s"),
        "paper_compute_s": _float(regime, "paper_compute_s"),
        "paper_compute_status": str(regime.get("paper_compute_status", "")),
        "probe_compute_s": _float(probe, "compute_s"),
        "probe_iterations": probe.get("iterations", ""),
        "bandwidth_mbit": _float(regime, "bandwidth_mbit"),
        "tc_rate": str(regime.get("tc_rate", "")),
        "oversubscription": str(regime.get("oversubscription", "")),
        "binding": str(regime.get("binding", "")),
        "measured_share": statistics.median(values) if values else math.nan,
        "measured_min": min(values) if values else math.nan,
        "measured_max": max(values) if values else math.nan,
        "repeats": len(values),
        "share_with_wait": statistics.median([s.share_with_wait for s in shares]) if shares else math.nan,
        "measured_on": " ".join(f"{s.experiment}/{s.run.run_id}" for s in shares),
        "left_out": "; ".join(left_out),
        "tolerance": f"+-{100 * REGIME_TOLERANCE:g}%",
        "tolerance_reason": REGIME_TOLERANCE_REASON,
        "verdict": regime_verdict(target, values),
    }
    return pd.DataFrame([row], columns=REGIME_COLUMNS)
