"""What every claim's measurement shares: the logs (`Logs`), loaded once per report, and the `Measurement`.

    python -m analysis.report --results results --out figures   # measurements, verdicts and REPORT.md

The functions that measure are in `analysis.claims`, one module per topic of the paper, and the claims that
name them are one table (`analysis.claims.table`): each takes a claim (`analysis.claims.Claim`, which names it
as its `measure`) and the logs, and returns a `Measurement`: the value, the runs it comes from, the
qualitative ordering where the claim has one, or why nothing could be measured.
The figures' data are measured once (`Logs.data`,
each figure module's `SPEC.compute`), so a claim and the figure showing it always agree. `SPECS` are
the figures in the report's order and `EXPERIMENTS` the experiments they read. Verdicts are
`analysis.verdicts`; REPORT.md is `analysis.report`.

Repeats: `Logs.repeat_views(experiment)` gives one view of the logs per seed when the experiment holds
repeats (runs whose configurations differ only in `seed`); the verdicts measure a claim once per view.
A view keeps, of each group of repeats, the run of its seed (a group without that seed is absent from
the view), and every run that has no repeat.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from analysis.common import Experiment, FigureSpec, Run, load_experiment

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
    # why the ordering, measured once, cannot be told apart from its noise (the evaluation spacing, a claim's
    # stated seed spread): the verdict is then `not decidable here`, as for repeats on both sides
    undecided: str = ""


def models_note(df: pd.DataFrame, col: str = "model") -> str:
    """The models (or `col`'s values) of a figure's data, for a claim's "not measurable" line."""
    return ", ".join(sorted(map(str, df[col].unique()))) if len(df) else "none"
