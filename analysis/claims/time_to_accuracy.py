"""Time to accuracy (Fig. 5, sec. 5.2): the functions that measure the claims on accuracy over wall-clock
time and over inter-node volume (the claims: `analysis.claims.table`).

Fig. 5a (`analysis.fig5a_time_to_accuracy`): the first evaluation at or above the 70% target
(`analysis.accuracy.reach_target`), and the best accuracy of each method within the window all of them
ran. Fig. 5b (`analysis.fig5b_accuracy_vs_volume`): the cumulative inter-node volume at the first
evaluation at DDP's peak accuracy. Minutes are compared only on the paper's hardware; elsewhere each claim
is judged by its ordering (who is first, who is higher), which needs a slow inter-node link to mean
something.
"""

from __future__ import annotations

import math

import pandas as pd

from analysis import fig5a_time_to_accuracy, fig5b_accuracy_vs_volume
from analysis.accuracy import reach_target
from analysis.claims.base import Claim
from analysis.common import TARGET_ACC_PCT
from analysis.measurements import Logs, Measurement, models_note


def _tta(logs: Logs, c: Claim) -> tuple[pd.DataFrame, str]:
    df = logs.data(fig5a_time_to_accuracy.SPEC)
    models = set(df["model"])
    model = c.model if c.model in models else (sorted(models)[0] if models else "")
    return df[df["model"] == model], model


def _by_method(df: pd.DataFrame, values: dict[str, float]) -> dict[str, float]:
    """Per method: the best (min) over its runs of a per-run value."""
    method = df.groupby("run_id")["method"].first()
    out: dict[str, float] = {}
    for run_id, v in values.items():
        m = str(method[run_id])
        v = math.inf if v != v else v
        out[m] = min(out.get(m, math.inf), v)
    return out


def _crossing(g: pd.DataFrame) -> tuple[float, float]:
    """When a method's runs first reached the target, bracketed by their evaluations: (lower, upper) minutes.
    A run that reached it at an evaluation crossed after its evaluation before (or its start); one that never
    did crossed, if ever, after its last evaluation (upper: inf). The earliest over the method's runs."""
    lo, hi = math.inf, math.inf
    for _, r in g.groupby("run_id", sort=False):
        r = r.sort_values("wall_min")
        hit = r[r["test_acc_pct"] >= TARGET_ACC_PCT]
        if len(hit):
            t = float(hit["wall_min"].iloc[0])
            before = r[r["wall_min"] < t]["wall_min"]
            lo, hi = min(lo, float(before.max()) if len(before) else 0.0), min(hi, t)
        else:
            lo = min(lo, float(r["wall_min"].max()))
    return lo, hi


def tta_minutes(c: Claim, logs: Logs) -> Measurement:
    """PruneX's minutes to the 70% target, and the ordering "PruneX reaches it before DDP and Top-K", decided
    only where the evaluations bracket each method's crossing apart (`_crossing`): first for sure when PruneX's
    crossing ends before every rival's begins, not first for sure when a rival's ends before PruneX's begins,
    otherwise too close to call (`Measurement.undecided`)."""
    df, model = _tta(logs, c)
    if df.empty or "hsadmm" not in set(df["method"]):
        return Measurement(missing=f"no evaluated hsadmm run in time_to_accuracy (models: {models_note(df)})")
    df = df[df["method"].isin(["hsadmm", "ddp", "topk"])]  # the paper's Fig. 5a
    hits = _by_method(df, reach_target(df, "wall_min"))
    runs = logs.runs("time_to_accuracy", df["run_id"].unique())
    value = hits["hsadmm"] if math.isfinite(hits["hsadmm"]) else None
    text = ", ".join(f"{m} {v:.3g} min" if math.isfinite(v) else f"{m} never" for m, v in hits.items())
    m = Measurement(value, f"first evaluation >= {TARGET_ACC_PCT:g}%: {text} ({model})", runs)
    if all(not math.isfinite(v) for v in hits.values()):
        m.missing = f"no method reaches {TARGET_ACC_PCT:g}% in this profile ({text})"
    elif len(hits) > 1:
        m.ordering = all(hits["hsadmm"] < v for k, v in hits.items() if k != "hsadmm")
        m.ordering_text = f"expected PruneX first to {TARGET_ACC_PCT:g}%; {text}"
        cross = {k: _crossing(df[df["method"] == k]) for k in hits}
        (lo, hi), rivals = cross["hsadmm"], [v for k, v in cross.items() if k != "hsadmm"]
        first, not_first = all(hi <= r_lo for r_lo, _ in rivals), any(r_hi <= lo for _, r_hi in rivals)
        if not (first or not_first):
            m.undecided = "too close to call: the evaluations bracket the crossings, in minutes, " + ", ".join(
                f"{k} {a:.3g}-{b:.3g}" if math.isfinite(b) else f"{k} after {a:.3g}" for k, (a, b) in cross.items()
            )
    return m


def _window_bracket(g: pd.DataFrame, window: float) -> tuple[float, float]:
    """A method's best accuracy by the end of the common window, bracketed by its evaluations: (best at its
    evaluations up to the window's end, best up to its first evaluation after it). Between two evaluations the
    model's accuracy is not observed, so its best by the window's end can be anywhere in between."""
    by_end = g[g["wall_min"] <= window + 1e-9]["test_acc_pct"]
    lo = float(by_end.max()) if len(by_end) else -math.inf
    after = g[g["wall_min"] > window + 1e-9]
    if after.empty:
        return lo, lo
    hi = float(g[g["wall_min"] <= after["wall_min"].min() + 1e-9]["test_acc_pct"].max())
    return lo, hi


def tta_window_accuracy(c: Claim, logs: Logs) -> Measurement:
    """The best accuracy of `c.method` within the window every method of Fig. 5a ran, and its ordering against
    the rival the claim names. The ordering is decided only where it holds with room to spare: each side's best
    by the window's end is bracketed by its evaluations before and after that end (`_window_bracket`), and the
    brackets must lie the claim's tolerance apart (its stated seed-to-seed spread, 3 points: one seed's ordering
    inside that spread is noise); otherwise the measurement says why not (`Measurement.undecided`)."""
    df, model = _tta(logs, c)
    methods = set(df["method"])
    if c.method not in methods:
        return Measurement(missing=f"no evaluated {c.method} run in time_to_accuracy")
    main = df[df["method"].isin(["hsadmm", "ddp", "topk"])]
    window = float(main.groupby("run_id")["wall_min"].max().min())
    bracket = {m: _window_bracket(main[main["method"] == m], window) for m in set(main["method"])}
    acc = {m: lo for m, (lo, _) in bracket.items()}
    runs = logs.runs("time_to_accuracy", main["run_id"].unique())
    value = acc[c.method] if math.isfinite(acc[c.method]) else None
    text = ", ".join(f"{m} {v:.1f}%" if math.isfinite(v) else f"{m} not yet evaluated" for m, v in sorted(acc.items()))
    m = Measurement(value, f"best accuracy within the common window of {window:.3g} min: {text} ({model})", runs)
    rival = "hsadmm" if c.method == "ddp" else "ddp"
    if rival in acc:
        m.ordering = acc[c.method] < acc[rival]
        m.ordering_text = f"expected {c.method} below {rival} within {window:.3g} min; {text}"
        (lo, hi), (r_lo, r_hi) = bracket[c.method], bracket[rival]
        below, above = hi + c.tolerance <= r_lo, lo >= r_hi + c.tolerance
        if not (below or above):
            m.undecided = (
                f"too close to call: by the window's end {c.method} has {_span(lo, hi)} and {rival} "
                f"{_span(r_lo, r_hi)} (bracketed by the evaluations before and after it), not "
                f"{c.tolerance:g} points apart (the claim's stated seed spread)"
            )
    return m


def _span(lo: float, hi: float) -> str:
    if not math.isfinite(lo):
        return "no evaluation yet" if lo == hi else f"up to {hi:.1f}%"
    return f"{lo:.1f}%" if lo == hi else f"{lo:.1f}-{hi:.1f}%"


def gb_to_peak(c: Claim, logs: Logs) -> Measurement:
    df = logs.data(fig5b_accuracy_vs_volume.SPEC)
    models = set(df["model"])
    df = df[df["model"] == (c.model if c.model in models else (sorted(models)[0] if models else ""))]
    if "ddp" not in set(df["method"]):
        return Measurement(missing="no evaluated ddp run in time_to_accuracy")

    def gb_to(method: str, target: float) -> float:
        g = df[(df["method"] == method) & (df["test_acc_pct"] >= target - 1e-9)]
        return float(g["cum_inter_gb"].min()) if len(g) else math.inf

    peak = float(df[df["method"] == "ddp"]["test_acc_pct"].max())
    ddp = gb_to("ddp", peak)
    runs = logs.runs("time_to_accuracy", df["run_id"].unique())
    m = Measurement(
        ddp, f"DDP's cumulative inter-node volume at its first evaluation at peak accuracy ({peak:.1f}%)", runs
    )
    if "hsadmm" in set(df["method"]):
        target = min(TARGET_ACC_PCT, peak)
        px = gb_to("hsadmm", target)
        m.ordering = px < ddp
        m.ordering_text = (
            f"expected PruneX to reach {target:.1f}% (the {TARGET_ACC_PCT:g}% target or DDP's peak, "
            f"whichever is lower) with less volume than DDP needs to its peak; PruneX "
            f"{'never' if math.isinf(px) else f'{px:.3g} GB'}, DDP {ddp:.3g} GB"
        )
    return m
