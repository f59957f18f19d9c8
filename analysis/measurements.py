"""What the logs measure for each claim: one function per kind of claim, held by the claims themselves.

    python -m analysis.report --results results --out figures   # measurements, verdicts and REPORT.md

Each function takes a claim (`analysis.claims.Claim`, which names it as its `measure`) and the logs,
and returns a `Measurement`: the value, the runs it comes from, the qualitative ordering where the
claim has one, or why nothing could be measured. The figures' data are measured once (`Logs.data`,
each figure module's `SPEC.compute`), so a claim and the figure showing it always agree. Verdicts are
`analysis.verdicts`; REPORT.md is `analysis.report`.

Repeats: `Logs.repeat_views(experiment)` gives one view of the logs per seed when the experiment holds
repeats (runs whose configurations differ only in `seed`); the verdicts measure a claim once per view.
A view keeps, of each group of repeats, the run of its seed (a group without that seed is absent from
the view), and every run that has no repeat.

Latency (Fig. 7, sec. 5.3.2) is the wait-free communication time per iteration (`analysis.fig7_latency`),
median over iterations without iteration 0. The paper's "5x faster synchronisation" is measured per
synchronisation: DDP's median per optimizer step over PruneX's median per outer iteration.

The regime check (`ddp_shares`): DDP's measured communication share of an iteration, median over
steps >= 1 of the wait-free communication per step (`prunex.comm.waitfree.last_arriver_comm`) over the
median of steps.parquet's iter_s, from the latency DDP run(s) (the job `prunex.cluster.regime` probed), else
time_to_accuracy's; one value per DDP run there (several when the experiment holds repeats).
"""

from __future__ import annotations

import importlib
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from analysis import (
    fig5a_time_to_accuracy,
    fig5b_accuracy_vs_volume,
    fig6a_message_size,
    fig6b_volume_total,
    fig7_latency,
    fig8_latency_breakdown,
    fig9a_scaling_speedup,
    fig10_residuals_ranks,
    fig12_pareto,
)
from analysis.accuracy import reach_target
from analysis.common import TARGET_ACC_PCT, Experiment, FigureSpec, Run, load_experiment
from analysis.fig7_latency import steady, waitfree_per_iteration
from analysis.residuals import decay_decades
from analysis.scaling import measured_only

if TYPE_CHECKING:
    from analysis.claims import Claim

FIGURE_MODULES = [  # the report's order
    importlib.import_module(f"analysis.{name}")
    for name in (
        "fig5a_time_to_accuracy",
        "fig5b_accuracy_vs_volume",
        "fig6a_message_size",
        "fig6b_volume_total",
        "fig7_latency",
        "fig8_latency_breakdown",
        "fig9a_scaling_speedup",
        "fig9b_scaling_efficiency",
        "fig10_residuals_ranks",
        "fig11_residuals_layers",
        "fig12_pareto",
        "fig13_sparsity_patterns",
    )
]
SPECS: list[FigureSpec] = [m.SPEC for m in FIGURE_MODULES]
EXPERIMENTS = list(dict.fromkeys(s.experiment for s in SPECS))
_SPEC_EXPERIMENT = {s.name: s.experiment for s in SPECS}

# Parameter counts measured with prunex.training.models.count_parameters on the models analysis may not
# build (no torch here): torchvision 0.29.1 classes with the CIFAR stem (3x3 stride-1 first
# convolution, no max-pool) and 10 classes. The paper's Table 2 (~11M, ~69M, ~60M) matches
# torchvision's ImageNet variants (7x7 stem, 1000 classes; analysis.claims.IMAGENET_PARAM_COUNTS).
PARAM_COUNTS = {"resnet18": 11_173_962, "resnet152": 58_156_618, "wide_resnet50_2": 66_847_050}


class Logs:
    """Experiments and figure data, loaded once per report."""

    def __init__(self, results: Path) -> None:
        self.results = Path(results)
        self._exp: dict[str, Experiment] = {}
        self._data: dict[str, tuple[pd.DataFrame, list[str]]] = {}

    def exp(self, name: str) -> Experiment:
        if name not in self._exp:
            self._exp[name] = load_experiment(self.results, name)
        return self._exp[name]

    def data(self, spec: FigureSpec) -> pd.DataFrame:
        if spec.name not in self._data:
            exp = self.exp(spec.experiment)
            self._data[spec.name] = spec.compute(exp) if exp.runs else (pd.DataFrame(columns=spec.columns), [])
        return self._data[spec.name][0]

    def incomplete(self) -> list[tuple[str, Path, str]]:
        """(experiment, run dir, why) of every incomplete run of the report's experiments."""
        return [(name, path, why) for name in EXPERIMENTS for path, why in self.exp(name).incomplete]

    def runs(self, exp: str, run_ids: object) -> list[Run]:
        ids = set(map(str, run_ids))  # type: ignore[call-overload]
        return [r for r in self.exp(exp).runs if r.run_id in ids or any(r.run_id in i.split() for i in ids)]

    def only(self, experiment: str, runs: list[Run]) -> Logs:
        """A view of these logs in which `experiment` holds only `runs` (its figures' data recomputed)."""
        view = Logs(self.results)
        view._exp = {k: v for k, v in self._exp.items() if k != experiment}
        full = self.exp(experiment)
        view._exp[experiment] = Experiment(full.name, full.results, runs, full.notes, full.incomplete)
        view._data = {k: v for k, v in self._data.items() if _SPEC_EXPERIMENT.get(k) != experiment}
        return view

    def repeat_views(self, experiment: str) -> list[tuple[int, Logs]]:
        """(seed, view) per seed of the experiment's repeats (module docstring); [] without repeats."""
        groups: dict[str, list[Run]] = {}
        for run in self.exp(experiment).runs:
            groups.setdefault(run.repeat_key(), []).append(run)
        repeated = [g for g in groups.values() if len({r.seed for r in g}) > 1]
        if not repeated:
            return []
        seeds = sorted({r.seed for g in repeated for r in g if r.seed is not None})
        views = []
        for seed in seeds:
            keep = [r for g in groups.values() for r in g if g not in repeated or r.seed == seed]
            views.append((seed, self.only(experiment, keep)))
        return views


@dataclass
class Measurement:
    value: float | None = None
    detail: str = ""
    runs: list[Run] = field(default_factory=list)
    ordering: bool | None = None  # the qualitative statement, where there is one
    ordering_text: str = ""
    missing: str = ""  # why nothing could be measured


# -- measurements: one function per kind of claim (analysis.claims holds it) -------------------------
def _models_note(df: pd.DataFrame, col: str = "model") -> str:
    return ", ".join(sorted(map(str, df[col].unique()))) if len(df) else "none"


def volume_reduction(c: Claim, logs: Logs) -> Measurement:
    df = logs.data(fig6b_volume_total.SPEC)
    est = df[df["source"] == fig6b_volume_total.ESTIMATE]
    red = est.dropna(subset=["reduction_vs_ddp_pct"])
    red = red[red["method"] == "hsadmm"]
    if c.model:
        red = red[red["model"] == c.model]
    if red.empty:
        what = f"{c.model} " if c.model else ""
        return Measurement(missing=f"no {what}hsadmm + ddp pair in volume (models with runs: {_models_note(est)})")
    models = list(red["model"])
    runs = logs.runs("volume", est[est["model"].isin(models)]["run_ids"])
    per = ", ".join(f"{m} {r:.1f}%" for m, r in zip(red["model"], red["reduction_vs_ddp_pct"], strict=True))
    return Measurement(float(red["reduction_vs_ddp_pct"].mean()), f"1 - PruneX/DDP total inter-node bytes: {per}", runs)


def volume_total(c: Claim, logs: Logs) -> Measurement:
    df = logs.data(fig6b_volume_total.SPEC)
    row = df[(df["source"] == fig6b_volume_total.ESTIMATE) & (df["model"] == c.model) & (df["method"] == c.method)]
    if row.empty:
        return Measurement(missing=f"no {c.method} run of {c.model} in volume (models: {_models_note(df)})")
    return Measurement(
        float(row["inter_gb"].iloc[0]),
        "sum of steps.inter_bytes over iterations / 1e9",
        logs.runs("volume", row["run_ids"]),
    )


def dense_message(c: Claim, logs: Logs) -> Measurement:
    df = logs.data(fig6a_message_size.SPEC)
    dense = df[(df["series"] == fig6a_message_size.DENSE) & (df["model"] == c.model)]
    if dense.empty:
        return Measurement(missing=f"no ddp run of {c.model} in volume (models: {_models_note(df)})")
    runs = logs.runs("volume", dense["run_id"].unique())
    mb = float(dense["message_mb"].iloc[0])
    dtypes = {str((r.config.get("ddp") or {}).get("grad_dtype", "fp32")) for r in runs}
    return Measurement(
        mb,
        f"DDP AllReduce payload per step on rank 0 ({mb / 1.048576:.1f} MiB; gradients {'/'.join(sorted(dtypes))})",
        runs,
    )


def compressed_fraction(c: Claim, logs: Logs) -> Measurement:
    df = logs.data(fig6a_message_size.SPEC)
    models = [c.model] if c.model in set(df["model"]) else sorted(set(df["model"]))
    ratios, runs = {}, []
    for model in models:
        sub = df[df["model"] == model]
        r = fig6a_message_size.final_ratio(sub)
        if r == r:
            ratios[model] = r
            runs += logs.runs("volume", sub["run_id"].unique())
    if not ratios:
        return Measurement(
            missing=f"no hsadmm + ddp pair with inter-node messages in volume (models: {_models_note(df)})"
        )
    sub_note = "" if c.model in ratios else f" ({c.model} absent: measured on {', '.join(ratios)})"
    per = ", ".join(f"{m} {v:.1f}%" for m, v in ratios.items())
    return Measurement(float(np.mean(list(ratios.values()))), f"last compressed message / dense: {per}{sub_note}", runs)


def _latency_stats(logs: Logs) -> tuple[pd.DataFrame, pd.Series]:
    """Fig. 7's data without each run's iteration 0, and the median wait-free time per method."""
    df = steady(logs.data(fig7_latency.SPEC))
    return df, df.groupby("method")[fig7_latency.PLOTTED].median() if len(df) else pd.Series(dtype=float)


def latency_median(c: Claim, logs: Logs) -> Measurement:
    df, med = _latency_stats(logs)
    if c.method not in med:
        return Measurement(missing=f"no {c.method} run in latency (methods: {_models_note(df, 'method')})")
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
        return Measurement(missing=f"needs ddp and hsadmm runs in latency (methods: {_models_note(df, 'method')})")
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
        return Measurement(
            missing=f"needs flat_admm and hsadmm runs in latency (methods: {_models_note(df, 'method')})"
        )
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


PAPER_COUNTS = (8, 64)


def scaling(c: Claim, logs: Logs) -> Measurement:
    df = measured_only(logs.data(fig9a_scaling_speedup.SPEC))
    sub = df[df["method"] == c.method]
    if sub.empty:
        return Measurement(missing=f"no {c.method} runs in strong_scaling")
    model = "resnet152" if "resnet152" in set(sub["model"]) else sorted(sub["model"].unique())[0]
    sub = sub[sub["model"] == model].set_index("gpus")
    counts = sorted(sub.index)
    runs = logs.runs("strong_scaling", sub["run_id"])
    lo, hi = PAPER_COUNTS
    if lo in sub.index and hi in sub.index:
        speedup = float(sub.loc[lo, "time_per_epoch_s"] / sub.loc[hi, "time_per_epoch_s"])
        value = speedup if c.arg == "speedup" else 100 * speedup / (hi / lo)
        return Measurement(value, f"time per epoch at {lo} / at {hi} ({model})", runs)
    have = ""
    if len(counts) >= 2:
        s = float(sub.loc[counts[0], "time_per_epoch_s"] / sub.loc[counts[-1], "time_per_epoch_s"])
        have = (
            f"; available: {s:.2f}x ({100 * s * counts[0] / counts[-1]:.0f}% efficiency) from {counts[0]} to "
            f"{counts[-1]}"
        )
    return Measurement(
        missing=f"needs {c.method} runs at {lo} and {hi} GPUs; found {counts} ({model}){have}", runs=runs
    )


def scaling_ordering(c: Claim, logs: Logs) -> Measurement:
    df = measured_only(logs.data(fig9a_scaling_speedup.SPEC))
    order = ["hsadmm", "ddp", "topk"]
    for model in sorted(df["model"].unique()):
        sub = df[(df["model"] == model) & df["method"].isin(order)]
        present = [m for m in order if m in set(sub["method"])]
        common = set.intersection(*[set(sub[sub["method"] == m]["gpus"]) for m in present]) if present else set()
        if "hsadmm" not in present or len(present) < 2 or len(common) < 2:
            continue
        lo, hi = min(common), max(common)
        t = sub.set_index(["method", "gpus"])["time_per_epoch_s"]
        speed = {m: float(t[(m, lo)] / t[(m, hi)]) for m in present}
        ok = all(speed[a] > speed[b] for a, b in zip(present, present[1:], strict=False))
        text = (
            f"expected {' > '.join(present)}; speedups "
            + ", ".join(f"{m} {speed[m]:.2f}x" for m in present)
            + f" ({lo} -> {hi}, {model})"
        )
        if len(present) < 3:
            text += f"; {', '.join(sorted(set(order) - set(present)))} missing"
        return Measurement(None, "", logs.runs("strong_scaling", sub["run_id"]), ok, text)
    return Measurement(missing="needs hsadmm and another method at two or more common counts in strong_scaling")


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


def tta_minutes(c: Claim, logs: Logs) -> Measurement:
    df, model = _tta(logs, c)
    if df.empty or "hsadmm" not in set(df["method"]):
        return Measurement(missing=f"no evaluated hsadmm run in time_to_accuracy (models: {_models_note(df)})")
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
    return m


def tta_window_accuracy(c: Claim, logs: Logs) -> Measurement:
    df, model = _tta(logs, c)
    methods = set(df["method"])
    if c.method not in methods:
        return Measurement(missing=f"no evaluated {c.method} run in time_to_accuracy")
    main = df[df["method"].isin(["hsadmm", "ddp", "topk"])]
    window = float(main.groupby("run_id")["wall_min"].max().min())
    within = main[main["wall_min"] <= window + 1e-9]
    acc = {
        m: float(within[within["method"] == m]["test_acc_pct"].max()) if (within["method"] == m).any() else -math.inf
        for m in set(main["method"])
    }
    runs = logs.runs("time_to_accuracy", main["run_id"].unique())
    value = acc[c.method] if math.isfinite(acc[c.method]) else None
    text = ", ".join(f"{m} {v:.1f}%" if math.isfinite(v) else f"{m} not yet evaluated" for m, v in sorted(acc.items()))
    m = Measurement(value, f"best accuracy within the common window of {window:.3g} min: {text} ({model})", runs)
    rival = "hsadmm" if c.method == "ddp" else "ddp"
    if rival in acc:
        m.ordering = acc[c.method] < acc[rival]
        m.ordering_text = f"expected {c.method} below {rival} within {window:.3g} min; {text}"
    return m


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
    return Measurement(worst, detail, runs)


def _hsadmm_pareto(logs: Logs) -> pd.DataFrame:
    df = logs.data(fig12_pareto.SPEC)
    return df[df["method"] == "hsadmm"]


def _pareto(logs: Logs, model: str) -> pd.DataFrame:
    df = _hsadmm_pareto(logs)
    return df[df["model"] == model]


def _acc_at(df: pd.DataFrame, ratio: float) -> float | None:
    row = df[(df["pruning_ratio_pct"] - 100 * ratio).abs() < 1e-6]
    return float(row["final_test_acc_pct"].mean()) if len(row) else None


def pareto_accuracy(c: Claim, logs: Logs) -> Measurement:
    df = _pareto(logs, str(c.model))
    acc = _acc_at(df, float(c.arg or 0))  # type: ignore[arg-type]
    if acc is None:
        have = _hsadmm_pareto(logs)
        return Measurement(
            missing=f"no {c.model} run at {100 * float(c.arg or 0):g}% pruning in pareto (models: {_models_note(have)})"
        )
    return Measurement(acc, "final test accuracy", logs.runs("pareto", df["run_id"]))


def pareto_drop(c: Claim, logs: Logs) -> Measurement:
    df = _pareto(logs, str(c.model))
    base, acc = _acc_at(df, 0.0), _acc_at(df, float(c.arg or 0))  # type: ignore[arg-type]
    if base is None or acc is None:
        return Measurement(missing=f"needs {c.model} runs at 0% and {100 * float(c.arg or 0):g}% pruning in pareto")
    return Measurement(base - acc, f"{base:.2f}% unpruned - {acc:.2f}%", logs.runs("pareto", df["run_id"]))


def pareto_shape(c: Claim, logs: Logs) -> Measurement:
    df = _hsadmm_pareto(logs)
    checks, runs = [], []
    for model, g in df.groupby("model"):
        base, mid = _acc_at(g, 0.0), _acc_at(g, 0.5)
        sparse = g[g["pruning_ratio_pct"] >= fig12_pareto.HYPER_SPARSE_PCT]
        if base is None or mid is None or sparse.empty:
            continue
        last = sparse.sort_values("pruning_ratio_pct").iloc[-1]
        a, b = base - mid, mid - float(last["final_test_acc_pct"])
        checks.append(
            (
                str(model),
                a < b,
                f"{model}: drop 0->50% {a:.1f} points, 50->{last['pruning_ratio_pct']:.0f}% {b:.1f} points",
            )
        )
        runs += logs.runs("pareto", g["run_id"])
    if not checks:
        return Measurement(missing="needs, for a model, runs at 0%, 50% and >= 70% pruning in pareto")
    text = "expected the first drop smaller; " + "; ".join(t for _, _, t in checks)
    return Measurement(None, "", runs, all(ok for _, ok, _ in checks), text)


def pareto_vs_ptf(c: Claim, logs: Logs) -> Measurement:
    df = logs.data(fig12_pareto.SPEC)
    hs = df[df["method"] == "hsadmm"].set_index("run_id")
    ptf = df[(df["method"] == "prune_finetune") & df["matched_run"].isin(hs.index)]
    if ptf.empty:
        return Measurement(missing="no prune_finetune run matched to an hsadmm run in pareto")
    diffs, parts = [], []
    for r in ptf.itertuples():
        h = hs.loc[r.matched_run]
        d = float(h["final_test_acc_pct"] - r.final_test_acc_pct)
        diffs.append(d)
        parts.append(
            f"{h['model']} keep {h['channel_keep']:g}: H-SADMM {h['final_test_acc_pct']:.1f}% at "
            f"{h['flops_fraction_pct']:.0f}% FLOPs vs {r.final_test_acc_pct:.1f}% at {r.flops_fraction_pct:.0f}%"
        )
    runs = logs.runs("pareto", list(ptf["run_id"]) + list(ptf["matched_run"]))
    text = "expected H-SADMM more accurate at every matched point; " + "; ".join(parts)
    return Measurement(
        float(np.mean(diffs)),
        "mean accuracy difference H-SADMM - prune-then-finetune",
        runs,
        all(d > 0 for d in diffs),
        text,
    )


def inference_speedup(c: Claim, logs: Logs) -> Measurement:
    """Dense / compact latency at batch 128 on the claim's device, of the hsadmm run at keep `c.arg`'s
    nominal rate (the paper's primary configuration, channel keep 0.5) or the closest pruned one."""
    device = "cuda" if "gpu" in c.needs else "cpu"
    cands = []
    for run in logs.exp("pareto").by_method("hsadmm"):
        inf = run.table("inference")
        keep = float(run.admm.get("channel_keep", 1.0))
        if inf is None or keep >= 1.0:
            continue
        rows = inf[(inf["variant"] == "compact") & (inf["device"] == device)]
        if len(rows):
            cands.append((run.model != (c.model or run.model), abs(keep - 0.5), run, rows))
    if not cands:
        return Measurement(missing=f"no {device} rows in the inference.parquet of a pruned hsadmm run in pareto")
    _, _, run, rows = min(cands, key=lambda t: (t[0], t[1], t[2].run_id))
    by_batch = rows.set_index("batch")
    if 128 not in by_batch.index:
        return Measurement(missing=f"{run.run_id}: no batch-128 row in inference.parquet")
    b = by_batch.loc[128]
    detail = (
        f"{run.run_id} ({run.model}, nominal channel keep {run.admm.get('channel_keep')}): dense / compact latency "
        + ", ".join(f"batch {k} {v:.2f}x" for k, v in by_batch["speedup"].items())
        + f" on {b['hardware']}"
        + (f", {int(b['threads'])} threads" if device == "cpu" else "")
        + f"; compact model {100 * b['params_ratio']:.0f}% of the parameters, "
        + f"{100 * b['flops_ratio']:.0f}% of the FLOPs"
    )
    ok = bool(b["speedup"] > 1.0)
    text = f"expected the compact model faster than the dense one at batch 128; {b['speedup']:.2f}x"
    return Measurement(float(b["speedup"]), detail, [run], ok, text)


def param_count(c: Claim, logs: Logs) -> Measurement:
    n = PARAM_COUNTS[str(c.model)]
    return Measurement(
        n / 1e6, f"{n:,} parameters, measured with prunex.training.models.count_parameters (CIFAR stem, 10 classes)"
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


def ddp_shares(logs: Logs) -> list[Share]:
    """One `Share` per DDP run of the first of `SHARE_EXPERIMENTS` that has one with both tables."""
    for name in SHARE_EXPERIMENTS:
        shares = []
        for run in logs.exp(name).by_method("ddp"):
            steps, comm = run.table("steps"), run.table("comm")
            if steps is None or steps.empty or comm is None or comm.empty:
                continue
            steps = steps.sort_values("iteration", ignore_index=True)
            steps["waitfree_s"] = waitfree_per_iteration(comm, steps["iteration"]).to_numpy()
            if steps["iteration"].nunique() > 1:
                steps = steps[steps["iteration"] >= 1]
            med = steps[["waitfree_s", "comm_s", "iter_s"]].median()
            shares.append(Share(name, run, float(med["waitfree_s"]), float(med["comm_s"]), float(med["iter_s"])))
        if shares:
            return shares
    return []
