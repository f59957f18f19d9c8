"""Reading run logs, captions, figure output and the command line shared by every figure module.

Analysis reads only `RESULTS/<experiment>/<run_id>/` (config.json, meta.json, parquet tables, the
`export.json` of an exported run) and never imports training code. `<run_id>` is the name the
experiment gives the run: a link to the shared run directory `RESULTS/runs/<shared id>` (a run two
experiments ask for is trained once and found under both names; `shared_runs` lists which
experiments use which run), or, in logs written before runs were shared (e.g. saved-logs/local), the
run directory itself. Tables are read with the experiment's name in their `run_id` column.
`prunex.training.log` is imported for `read_parquet`, `LogError` and the column lists only, and it imports no
torch (tests/test_analysis.py checks that).

A finished run (its `DONE` marker) is read from its merged tables. A run without `DONE` is partial:
its tables are rebuilt in memory from the ranks' `parts/` files the way `prunex.training.log.merge_parts`
does it (nothing is written), and every figure using it says so. A run with no logged iteration at
all (no steps, or DONE without steps.parquet) is *incomplete*: it is left out of every figure, listed
with its path, and the report's verdicts on its experiment say "incomplete logs" rather than
changing silently (`analysis.report`).

Regime-matched profiles (the `regime` profile: the inter-node link rate chosen so that DDP's
communication share of an iteration matches the paper's, sec. 5.3.2) leave `RESULTS/regime.json`,
and their runs' meta.json may carry the same object under "regime" (`read_regime`); every figure's
caption then adds one line saying so (`regime_caption`). Repeats of a run (runs of one experiment
whose configurations differ only in `seed`) are found by `repeat_key`.

`check_results` is what the command lines run first: a missing or empty results directory, or a
run whose config.json/meta.json is damaged, is one line (`InputError`) before anything is written.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import textwrap
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure

from analysis import style  # selects the Agg backend before any figure exists
from prunex.cluster.exits import one_line
from prunex.cluster.preflight import check_writable
from prunex.comm.waitfree import DEFINITION
from prunex.training.config import OPERATIONAL, WHO_ASKED, ConfigError
from prunex.training.log import (
    COMM_COLUMNS,
    COMM_LATER_COLUMNS,
    DONE,
    INFERENCE_COLUMNS,
    RANK_STEP_COLUMNS,
    STEPS_COLUMNS,
    TRAINED,
    LogError,
    read_parquet,
)

RESIDUAL_COLUMNS = ["run_id", "iteration", "rank", "node", "layer", "level", "primal", "dual", "rho"]
MASK_COLUMNS = [
    "run_id",
    "iteration",
    "layer",
    "kind",
    "node",
    "kept_out",
    "total_out",
    "kept_in",
    "total_in",
    "density",
    "drift",
]
WIRE_COLUMNS = ["run_id", "iteration", "node", "tx_bytes", "rx_bytes"]
FINAL_MASK_COLUMNS = ["run_id", "layer", "out_keep", "in_keep"]
TABLE_COLUMNS: dict[str, list[str]] = {
    "steps": STEPS_COLUMNS,
    "comm": COMM_COLUMNS,
    "residuals": RESIDUAL_COLUMNS,
    "masks": MASK_COLUMNS,
    "wire": WIRE_COLUMNS,
    "final_masks": FINAL_MASK_COLUMNS,
    "inference": INFERENCE_COLUMNS,
}
TARGET_ACC_PCT = 70.0  # the paper's time-to-accuracy target (Fig. 5a)


def _part_columns(table: str) -> list[str]:
    """Columns a rank's part file must have: merge_parts adds run_id (and link_model to comm)."""
    if table == "rank_steps":
        return RANK_STEP_COLUMNS
    return [c for c in TABLE_COLUMNS[table] if c not in ("run_id", "link_model")]


class InputError(ValueError):
    """The results directory cannot be drawn from at all; one line naming the path and the fix."""


# config.json keys analysis reads, and their JSON types
CONFIG_TYPES: dict[str, tuple[type, ...]] = {
    "method": (str,),
    "model": (str,),
    "dataset": (str,),
    "nodes": (int,),
    "procs_per_node": (int,),
    "name": (str,),
    "profile": (str,),
    "admm": (dict,),
    "link": (dict,),
}
REQUIRED = ("method", "model", "dataset", "nodes", "procs_per_node")  # `Run.load` refuses a config without one


class _Required:
    """A `Run` attribute that is the config.json field of its name (one of `REQUIRED`), as its type in
    `CONFIG_TYPES` (str or int): `run.method` is `str(run.config["method"])`."""

    def __set_name__(self, owner: type, name: str) -> None:
        assert name in REQUIRED, f"{name} is not a required config.json field"
        self.key, self.cast = name, CONFIG_TYPES[name][0]

    def __get__(self, run: Run | None, owner: type | None = None) -> Any:
        return self if run is None else self.cast(run.config[self.key])


def _read_json(path: Path) -> dict[str, Any]:
    try:
        obj = json.loads(path.read_text())
    except FileNotFoundError:
        raise LogError(f"{path}: missing") from None
    except (OSError, ValueError) as e:
        raise LogError(f"{path}: not a readable JSON file ({type(e).__name__}: {e})") from None
    if not isinstance(obj, dict):
        raise LogError(f"{path}: not a prunex log (expected a JSON object)")
    return obj


@dataclass
class Run:
    """One run directory: its config, meta and tables (read lazily, cached)."""

    path: Path
    experiment: str
    config: dict[str, Any]
    meta: dict[str, Any]
    done: bool
    _cache: dict[str, pd.DataFrame | None] = field(default_factory=dict, repr=False)

    @classmethod
    def load(cls, path: Path, experiment: str) -> Run:
        config = _read_json(path / "config.json")
        missing = [k for k in REQUIRED if k not in config]
        if missing:
            raise LogError(f"{path / 'config.json'}: not a prunex run config, missing keys {missing}")
        for key, types in CONFIG_TYPES.items():
            value = config.get(key)
            if key in config and (not isinstance(value, types) or isinstance(value, bool)):
                what = {str: "a string", int: "an integer", dict: "an object"}[types[0]]
                raise LogError(f"{path / 'config.json'}: field {key!r} must be {what}, got {value!r}")
        meta = _read_json(path / "meta.json") if (path / "meta.json").exists() else {}
        return cls(path, experiment, config, meta, (path / DONE).exists())

    # -- identity -------------------------------------------------------------------------------
    @property
    def run_id(self) -> str:
        """The experiment's name for the run (its entry under RESULTS/<experiment>). A shared run's
        config.json names whichever experiment launched it; the entry's name is this experiment's."""
        return self.path.name

    @property
    def shared(self) -> bool:
        """The entry is a link to a run under RESULTS/runs (possibly used by other experiments too)."""
        return self.path.is_symlink()

    # the fields every run's config.json holds (`REQUIRED`), each of the type `CONFIG_TYPES` checks
    method = _Required()
    model = _Required()
    dataset = _Required()
    nodes = _Required()
    procs_per_node = _Required()

    @property
    def world_size(self) -> int:
        return self.nodes * self.procs_per_node

    @property
    def profile(self) -> str:
        return str(self.config.get("profile", "unknown"))

    @property
    def seed(self) -> int | None:
        seed = self.config.get("seed")
        return seed if isinstance(seed, int) and not isinstance(seed, bool) else None

    def repeat_key(self) -> str:
        """The run's configuration without what only says who asked, how it was operated and its seed:
        runs with the same key are repeats of one measurement (they differ only in `seed`). A run named
        after its seed (`NAME-s<seed>`, experiments.pareto) refers to runs of its own seed (`init_from`,
        `prune_finetune.flops_from`): those references are compared without their `-s<seed>` suffix."""
        skip = {*WHO_ASKED, *OPERATIONAL, "seed"}
        config = {k: v for k, v in self.config.items() if k not in skip}
        suffix = f"-s{self.seed}"

        def unseeded(name: object) -> object:
            return name[: -len(suffix)] if isinstance(name, str) and name.endswith(suffix) else name

        if "init_from" in config:
            config["init_from"] = unseeded(config["init_from"])
        if isinstance(config.get("prune_finetune"), dict):
            pf = dict(config["prune_finetune"])
            pf["flops_from"] = unseeded(pf.get("flops_from"))
            config["prune_finetune"] = pf
        return json.dumps(config, sort_keys=True, default=str)

    @property
    def admm(self) -> dict[str, Any]:
        return dict(self.config.get("admm") or {})

    @property
    def device_type(self) -> str:
        return str(self.meta.get("device") or "unknown").split(":")[0]

    @property
    def hardware(self) -> str:
        hw = self.meta.get("hardware") or "unknown hardware (no meta.json)"
        return f"{hw} ({'GPU' if self.device_type == 'cuda' else self.device_type.upper()})"

    @property
    def emulated(self) -> bool:
        topo = self.meta.get("topology") or {}
        return bool(topo.get("emulated", False))

    @property
    def link_model(self) -> str:
        return str(self.meta.get("link_model") or (self.config.get("link") or {}).get("model") or "none")

    @property
    def has_inter_link(self) -> bool:
        """Inter-node collectives cross a real or modelled slow link (not one machine's loopback)."""
        return self.nodes >= 2 and (self.link_model != "none" or not self.emulated)

    def topology(self) -> str:
        unit = ("GPU" if self.device_type == "cuda" else "process") + ("" if self.world_size == 1 else "es")
        unit = unit.replace("GPUes", "GPUs")
        extra = ", nodes emulated on one machine" if self.emulated else ""
        return f"{self.nodes}x{self.procs_per_node} ({self.world_size} {unit}{extra})"

    def link(self) -> str:
        model = self.link_model
        link = self.config.get("link") or {}
        if model == "alpha-beta":
            alpha = float(link.get("alpha_s", float("nan"))) * 1e6
            return f"alpha-beta model (alpha {alpha:g} us, {link.get('bandwidth_gbit', '?')} Gbit/s)"
        if model == "netns-tc":  # the rate tc shaped the inter-node links to, read by the run at its start
            mbit = self.meta.get("link_mbit")
            rate = f" at {float(mbit):.4g} Mbit/s" if mbit else ""
            return f"netns-tc (tc-shaped veth links{rate}, mini cluster)"
        if model == "none":
            return "none = real network" + (" (one machine: loopback)" if self.emulated and self.nodes > 1 else "")
        return model

    @cached_property
    def export(self) -> dict[str, Any] | None:
        """`export.json` written by `python -m prunex.pruning.export` (None when the run was not exported)."""
        path = self.path / "export.json"
        return _read_json(path) if path.exists() else None

    def incomplete(self) -> str | None:
        """Why the run has no logged iteration (it then feeds no figure), or None. A corrupt steps
        table is not "incomplete": the figures reading it name the file (LogError)."""
        try:
            steps = self.table("steps")
        except LogError:
            return None
        if steps is not None and len(steps):
            return None
        if self.done:
            return "DONE but no logged iteration (steps.parquet missing or empty)"
        return "no logged iteration yet (no steps, no DONE)"

    # -- tables ---------------------------------------------------------------------------------
    def _parts(self, table: str) -> list[Path]:
        return sorted((self.path / "parts").glob(f"{table}.rank*.parquet"))

    def _concat_parts(self, table: str) -> pd.DataFrame | None:
        files = self._parts(table)
        if not files:
            return None
        return pd.concat([read_parquet(f, _part_columns(table)) for f in files], ignore_index=True)

    def table(self, name: str) -> pd.DataFrame | None:
        """The run's table `name`, or None when the run has not written it (yet)."""
        if name not in self._cache:
            df = self._load_table(name)
            if df is not None and "run_id" in df.columns:
                df["run_id"] = self.run_id  # a shared run's tables carry the launching experiment's name
            self._cache[name] = df
        df = self._cache[name]
        return None if df is None else df.copy()

    def _load_table(self, name: str) -> pd.DataFrame | None:
        merged = self.path / f"{name}.parquet"
        part_name = "rank_steps" if name == "steps" else name
        use_parts = bool(self._parts(part_name)) and (not self.done or not merged.exists())
        if not use_parts:
            return read_parquet(merged, TABLE_COLUMNS.get(name)) if merged.exists() else None
        if name == "steps":
            return self._steps_from_parts()
        df = self._concat_parts(name)
        assert df is not None
        if "run_id" not in df.columns:
            df.insert(0, "run_id", self.run_id)
        if name == "comm":
            df.insert(1, "link_model", self.link_model)
            df = df[COMM_COLUMNS + [c for c in COMM_LATER_COLUMNS if c in df.columns]]
        return df

    def _steps_from_parts(self) -> pd.DataFrame | None:
        """steps.parquet as merge_parts would write it, without writing anything."""
        ranks = self._concat_parts("rank_steps")
        if ranks is None:
            return None
        per_iter = ranks.groupby("iteration")
        steps = pd.DataFrame({c: per_iter[c].mean() for c in ("train_loss", "comm_s", "compute_s", "iter_s")})
        rank0 = ranks[ranks["rank"] == ranks["rank"].min()].set_index("iteration")
        for col in ("epoch", "wall_s", "test_acc"):
            steps[col] = rank0[col]
        comm = self.table("comm")
        if comm is not None and len(comm):
            volume = comm.groupby("iteration")[["inter_bytes", "intra_bytes"]].sum()
            steps = steps.join(volume, how="left")
        for col in ("inter_bytes", "intra_bytes"):
            steps[col] = steps[col].fillna(0.0) if col in steps else 0.0
        steps = steps.reset_index()
        static = {
            "run_id": self.run_id,
            "method": self.method,
            "model": self.model,
            "dataset": self.dataset,
            "link_model": self.link_model,
        }
        for k, v in static.items():
            steps[k] = v
        return steps[STEPS_COLUMNS].sort_values("iteration", ignore_index=True)


@dataclass
class Experiment:
    """The runs of one experiment directory, with notes about what is missing or partial."""

    name: str
    results: Path
    runs: list[Run]
    notes: list[str]
    incomplete: list[tuple[Path, str]] = field(default_factory=list)  # (run dir, why), left out of runs

    def by_method(self, *methods: str) -> list[Run]:
        return [r for r in self.runs if r.method in methods]

    def run(self, run_id: str) -> Run:
        for r in self.runs:
            if r.run_id == run_id:
                return r
        raise KeyError(run_id)


def load_experiment(results: Path, name: str) -> Experiment:
    """Every run directory under `results/name`; raises LogError for a corrupt config.json."""
    results = Path(results)
    root = results / name
    if not root.is_dir():
        return Experiment(name, results, [], [f"no logs for {name} under {results}"])
    runs, notes, incomplete = [], [], []
    for d in sorted(p for p in root.iterdir() if p.is_symlink() and not p.exists()):
        notes.append(f"{d}: a link to a missing run directory ({os.readlink(d)}), left out")
    for d in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        if not (d / "config.json").exists():
            if any(d.glob("*.parquet")) or (d / "parts").is_dir():
                notes.append(f"{d}: logs without config.json, left out")
            continue
        run = Run.load(d, name)
        why = run.incomplete()
        if why:
            incomplete.append((d, why))
            notes.append(f"{run.run_id} is incomplete ({why}), left out: {d}")
            continue
        if not run.done and (d / TRAINED).exists():  # prunex.training.export_step: training ended, export not yet
            notes.append(
                f"{run.run_id} is trained but not exported (TRAINED, no DONE; the same command again exports it): "
                "no export.json or inference table"
            )
        elif not run.done:
            notes.append(f"{run.run_id} is partial (no DONE): only its finished iterations are shown")
        if not run.meta:
            notes.append(f"{run.run_id} has no meta.json: hardware unknown")
        runs.append(run)
    if not runs:
        notes.insert(0, f"no logs for {name} under {results}")
    return Experiment(name, results, runs, notes, incomplete)


def runs_with(exp: Experiment, table: str, notes: list[str], what: str = "") -> Iterator[tuple[Run, pd.DataFrame]]:
    """Each run of `exp` with its `table`, the one loop the figures share: a run without rows in it yet is
    left out, with the note "<run> has no <what, default the table's name> yet: left out"."""
    for run in exp.runs:
        df = run.table(table)
        if df is None or df.empty:
            notes.append(f"{run.run_id} has no {what or table} yet: left out")
            continue
        yield run, df


def check_results(results: Path, experiments: Iterable[str]) -> int:
    """Refuse (InputError, one line) a results directory that cannot be drawn from: missing, holding
    no run of `experiments`, or holding a damaged regime.json or a run whose config.json or meta.json is
    damaged. Returns the number of runs found. Reads only the json files, so it is quick."""
    results = Path(results)
    fix = "train with ./run_all.sh, or point --results at saved logs such as saved-logs/local"
    if not results.is_dir():
        raise InputError(f"results directory {results} does not exist; {fix}")
    if (results / REGIME_FILE).exists():
        try:
            read_regime(results)
        except LogError as e:
            raise InputError(f"{e}; the regime profile writes it before training: restore it") from None
    found = 0
    for name in experiments:
        root = results / name
        for d in sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []:
            if not (d / "config.json").exists() and (any(d.glob("*.parquet")) or (d / "parts").is_dir()):
                # a run that cannot be read whole is an error, never an absent run (issue 29)
                raise InputError(
                    f"{d}: run logs without config.json; restore it, or remove {d} and run its experiment "
                    "again (finished runs are skipped)"
                )
        for config in sorted(root.glob("*/config.json")):
            try:
                Run.load(config.parent, name)
            except LogError as e:
                raise InputError(
                    f"{e}; remove {config.parent} and run its experiment again (finished runs are skipped)"
                ) from None
            found += 1
    if not found:
        names = list(experiments)
        where = results / (names[0] if len(names) == 1 else "<experiment>")
        raise InputError(f"no run logs under {results} (expected {where}/<run>/config.json); {fix}")
    return found


def check_inputs(results: Path, out: Path, experiments: Iterable[str]) -> None:
    """What `analysis.all` and `analysis.report` refuse before they write anything (InputError or ConfigError, one
    line): `results` that cannot be drawn from (`check_results`), and an `out` folder that is a file or cannot be
    made or written. A mistyped `--results` must not overwrite the figures or report already in `out`."""
    check_results(results, experiments)
    if out.exists() and not out.is_dir():  # before anything is drawn (issue 29: 13 lines of failures)
        raise InputError(f"--out {out} is a file, not a directory; name a folder for the figures and report")
    check_writable(out, "--out")  # nor a folder that cannot be made or written (each figure failed there)


def shared_runs(results: Path, experiments: Iterable[str]) -> dict[Path, list[tuple[str, str]]]:
    """Every run directory the experiments link to, with the (experiment, name) pairs that use it."""
    users: dict[Path, list[tuple[str, str]]] = {}
    for name in experiments:
        root = Path(results) / name
        if not root.is_dir():
            continue
        for entry in sorted(root.iterdir()):
            if entry.is_symlink() and entry.is_dir():
                users.setdefault(entry.resolve(), []).append((name, entry.name))
    return users


# -- regime-matched profiles -------------------------------------------------------------------------
REGIME_FILE = "regime.json"


def read_regime(results: Path, runs: Iterable[Run] = ()) -> dict[str, Any] | None:
    """The regime a profile was matched to: `RESULTS/regime.json`, else the "regime" object of the
    first of `runs` whose meta.json has one, else None (the profile is not regime-matched)."""
    path = Path(results) / REGIME_FILE
    if path.exists():
        return _read_json(path)
    for run in runs:
        regime = run.meta.get("regime")
        if isinstance(regime, dict):
            return regime
    return None


def _num(regime: dict[str, Any], key: str) -> float:
    try:
        return float(regime[key])
    except (KeyError, TypeError, ValueError):
        return math.nan


def regime_caption(regime: dict[str, Any] | None, runs: Iterable[Run] = ()) -> str:
    """The caption line of a regime-matched profile ("" when not regime-matched). Where `runs` (those of the
    figure) had links of another rate than the regime's (meta.json `link_mbit`: the regime profile runs its
    link-free experiments, experiments/common.py LINK_FREE, at the local profile's rate), it says so."""
    if not regime:
        return ""
    status = str(regime.get("paper_compute_status") or "")
    status = f", {status}" if status and status != "paper" else ""
    probe = regime.get("probe") if isinstance(regime.get("probe"), dict) else {}
    comm, compute = _num(regime, "paper_ddp_comm_s"), _num(regime, "paper_compute_s")
    where = regime.get("oversubscription") or "oversubscription unknown"
    if probe.get("nodes") and probe.get("procs_per_node"):  # the probed topology; strong scaling runs 1 per node
        where = f"{probe['nodes']} x {probe['procs_per_node']} runs: {where}; 1 process per node: one core each"
    line = (
        f"regime: DDP comm share target {fmt_pct(_num(regime, 'target_share'))} (paper: {comm:.2f} s comm / "
        f"{compute:.2f} s V100 compute{status}), probe compute {fmt(_num(probe, 'compute_s'))} s/iteration, "
        f"inter-node link {fmt(_num(regime, 'bandwidth_mbit'))} Mbit/s (tc), {where}"
    )
    rates = sorted({float(r.meta["link_mbit"]) for r in runs if isinstance(r.meta.get("link_mbit"), int | float)})
    if any(not math.isclose(x, _num(regime, "bandwidth_mbit"), rel_tol=0.01) for x in rates):
        line += f"; the runs shown had {' and '.join(f'{x:.4g}' for x in rates)} Mbit/s links instead"
    return line


def fmt_pct(share: float) -> str:
    """A fraction as a whole percentage ("60%"), "n/a" when unknown."""
    return "n/a" if share != share else f"{100 * share:.0f}%"


# -- captions -------------------------------------------------------------------------------------
# Figs. 7 and 8 show wait-free communication time (`prunex.comm.waitfree`) with waiting apart: one definition
# of both for their captions
WAITFREE_CAPTION = (
    f"Wait-free: {DEFINITION} (the minimum over the members of its group). Waiting for other ranks: a rank's "
    "time in collectives beyond the wait-free time, and the whole pre-consensus barrier."
)


def _join(values: Iterable[str], limit: int = 4) -> str:
    uniq = list(dict.fromkeys(values))
    if len(uniq) <= limit:
        return ", ".join(uniq)
    return ", ".join(uniq[:limit]) + f" (+{len(uniq) - limit} more)"


def describe_runs(runs: list[Run]) -> str:
    """One line naming profile, hardware, dataset, model, topology and link model of `runs`."""
    if not runs:
        return "no runs"
    runs = sorted(runs, key=lambda r: (r.world_size, r.run_id))
    parts = [
        f"profile: {_join(r.profile for r in runs)}",
        f"hardware: {_join(r.hardware for r in runs)}",
        f"data: {_join(r.dataset for r in runs)}",
        f"model: {_join(r.model for r in runs)}",
        f"topology M x P: {_join((r.topology() for r in runs), 6)}",
        f"link: {_join(r.link() for r in runs)}",
    ]
    n_partial = sum(not r.done for r in runs)
    parts.append(f"{len(runs)} run(s)" + (f", {n_partial} partial" if n_partial else ""))
    return " | ".join(parts)


# -- figure output --------------------------------------------------------------------------------
@dataclass
class FigureResult:
    name: str
    png: Path
    pdf: Path
    csv: Path
    data: pd.DataFrame
    notes: list[str]
    placeholder: bool
    summary: str


@dataclass(frozen=True)
class FigureSpec:
    """What one figure module provides.

    compute(exp) -> (tidy data, notes); draw(data, exp) -> Figure; summary(data) -> one line;
    methods: the methods the paper's figure compares (a missing one is noted).
    """

    name: str
    experiment: str
    title: str
    columns: list[str]
    compute: Callable[[Experiment], tuple[pd.DataFrame, list[str]]]
    draw: Callable[[pd.DataFrame, Experiment], Figure]
    summary: Callable[[pd.DataFrame], str]
    caption_extra: str = ""
    methods: tuple[str, ...] = ()  # the methods the paper's figure shows; a missing one gets a note


def figure_spec(
    module: dict[str, Any], experiment: str, columns: list[str], caption: str = "", methods: tuple[str, ...] = ()
) -> FigureSpec:
    """The spec of a figure module, from its `globals()`: its name is the module's file name, its title
    the first line of its docstring, its compute, draw and summary its functions of these names.
    `caption` is added below the runs in the caption; `methods` are the methods the paper's figure shows."""
    title = str(module["__doc__"]).split("\n")[0].rstrip(".")
    name = Path(str(module["__file__"])).stem
    compute, draw, summary = module["compute"], module["draw"], module["summary"]
    return FigureSpec(name, experiment, title, columns, compute, draw, summary, caption, methods)


def _caption_text(fig: Figure, lines: list[str]) -> str:
    width = max(60, int(fig.get_size_inches()[0] * 17))
    return "\n".join(textwrap.fill(line, width=width, subsequent_indent="    ") for line in lines if line)


def add_caption(fig: Figure, lines: list[str]) -> None:
    """The caption below the axes (saved with bbox_inches='tight', so it is never clipped)."""
    fig.text(0.01, -0.01, _caption_text(fig, lines), ha="left", va="top", fontsize=7, color="#222222")


def _save(fig: Figure, out: Path, name: str) -> tuple[Path, Path]:
    out.mkdir(parents=True, exist_ok=True)
    png, pdf = out / f"{name}.png", out / f"{name}.pdf"
    # No creation date in the PDF (a PNG has none): the same logs give the same bytes, so drawing the committed
    # figures again from saved-logs/ leaves `git status` clean unless a number moved.
    fig.savefig(png, bbox_inches="tight")
    fig.savefig(pdf, bbox_inches="tight", metadata={"CreationDate": None})
    plt.close(fig)
    return png, pdf


def placeholder(
    spec: FigureSpec, out: Path, message: str, notes: list[str], regime: dict[str, Any] | None = None
) -> FigureResult:
    """A figure saying what is missing, and a csv with the header only."""
    style.apply_theme()
    fig, ax = plt.subplots(figsize=(7, 2.6))
    ax.axis("off")
    ax.set_title(spec.title)
    ax.text(
        0.5,
        0.5,
        textwrap.fill(message, 70),
        ha="center",
        va="center",
        fontsize=11,
        color="#b00000",
        transform=ax.transAxes,
    )
    add_caption(fig, [regime_caption(regime)] + [f"Note: {n}" for n in notes if n != message])
    png, pdf = _save(fig, out, spec.name)
    csv = out / f"{spec.name}.csv"
    pd.DataFrame(columns=spec.columns).to_csv(csv, index=False)
    return FigureResult(spec.name, png, pdf, csv, pd.DataFrame(columns=spec.columns), notes, True, message)


def render(spec: FigureSpec, results: Path, out: Path) -> FigureResult:
    """Load the experiment, compute, draw, caption and save png, pdf and csv of `spec`."""
    results, out = Path(results), Path(out)
    exp = load_experiment(results, spec.experiment)
    regime = read_regime(results, exp.runs)
    if not exp.runs:
        what = "only incomplete runs" if exp.incomplete else "no logs"
        return placeholder(spec, out, f"{what} for {spec.experiment} under {results}", exp.notes, regime)
    data, notes = spec.compute(exp)
    missing = [m for m in spec.methods if m not in {r.method for r in exp.runs}]
    if missing:
        notes.append(f"no runs of {', '.join(missing)} under {exp.results / exp.name}")
    notes = exp.notes + notes
    if data.empty:
        msg = f"the logs of {spec.experiment} under {results} hold no data for this figure"
        return placeholder(spec, out, msg, notes, regime)
    data = data[spec.columns].reset_index(drop=True)
    style.apply_theme()
    fig = spec.draw(data, exp)
    used = [r for r in exp.runs if r.run_id in set(data["run_id"])] if "run_id" in data else exp.runs
    lines = [f"Runs: {describe_runs(used or exp.runs)}"]
    if spec.caption_extra:
        lines.append(spec.caption_extra)
    lines.append(regime_caption(regime, used or exp.runs))
    lines += [f"Note: {n}" for n in notes]
    add_caption(fig, lines)
    png, pdf = _save(fig, out, spec.name)
    csv = out / f"{spec.name}.csv"
    data.to_csv(csv, index=False)
    return FigureResult(spec.name, png, pdf, csv, data, notes, False, spec.summary(data))


def cli(spec: FigureSpec, argv: list[str] | None = None) -> int:
    """`python -m analysis.<module> --results DIR --out DIR`: 0 on success, 1 on a bad log file, 2 (one line,
    nothing written) on `--results` that hold no run of the figure's experiment or an `--out` that cannot be written
    (`check_inputs`). `analysis.all` draws a placeholder for an experiment that has not run; the one figure asked
    for by name is refused instead, so that a mistyped `--results` does not overwrite it with a placeholder."""
    parser = argparse.ArgumentParser(prog=f"python -m analysis.{spec.name}", description=spec.title)
    parser.add_argument("--results", default="results", help="results directory (default: results)")
    parser.add_argument("--out", default="figures", help="output directory (default: figures)")
    args = parser.parse_args(argv)
    try:
        check_inputs(Path(args.results), Path(args.out), [spec.experiment])
    except (InputError, ConfigError) as e:
        print(f"error: {spec.name}: {one_line(e)}", file=sys.stderr)
        return 2
    try:
        result = render(spec, Path(args.results), Path(args.out))
    except LogError as e:
        print(f"error: {spec.name}: {one_line(e)}", file=sys.stderr)
        return 1
    report_result(result)
    return 0


def report_result(result: FigureResult) -> None:
    kind = "placeholder" if result.placeholder else "figure"
    print(f"{result.name}: wrote {kind} {result.png}, .pdf and {result.csv.name}")
    if not result.placeholder:
        print(f"  {result.summary}")
    for note in result.notes:
        print(f"  note: {note}")


# -- small helpers used by several figures ----------------------------------------------------------
def facet_axes(n: int, width: float = 5.0, height: float = 3.6, sharey: bool = False) -> tuple[Figure, list[Any]]:
    """n side-by-side axes (at most 3 per row)."""
    cols = min(n, 3)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(
        rows, cols, figsize=(width * cols, height * rows), squeeze=False, sharey=sharey, layout="constrained"
    )
    flat = list(axes.flat)
    for ax in flat[n:]:
        ax.remove()
    return fig, flat[:n]


def run_label(run: Run, duplicates: bool) -> str:
    return f"{style.method_label(run.method)}" + (f" [{run.run_id}]" if duplicates else "")


def last_test_acc(steps: pd.DataFrame) -> float:
    """The last evaluated test accuracy as logged (a fraction), NaN if never evaluated."""
    acc = steps.sort_values("iteration")["test_acc"].dropna()
    return float(acc.iloc[-1]) if len(acc) else float("nan")


def final_accuracy(steps: pd.DataFrame) -> float:
    """The last evaluated test accuracy (in %), NaN if never evaluated."""
    return last_test_acc(steps) * 100


def fmt(x: float, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "n/a"
    return f"{x:.{digits}g}"
