"""H-SADMM's pruned models against dense training and prune-then-finetune, from one start and one budget.

Fashion-MNIST (the real set: Debian's `dataset-fashion-mnist`, `prunex.training.data`), ResNet-20, 2 emulated
nodes x 2 processes (local executor, gloo), per seed S:

1. ``start-sS``: dense DDP from random weights (seed S) for `START_EPOCHS` epochs, the common start
   (Alg. 1 line 1: "Random/Pre-trained");
2. from it (`--init-from`), `BUDGET_EPOCHS` epochs each, i.e. the same SGD steps per rank (every method
   draws one pass of its shard per epoch in batches of 64):
   - ``ddp-sS``: dense DDP;
   - ``hsadmm-keepK-sS``: H-SADMM at channel keep K: `ADMM.iterations` outer iterations of one local
     epoch, then `ADMM.retrain_epochs` epochs on the frozen mask. With T_freeze 3 and the default
     `freeze_patience` of 3 the mask freezes after iteration 2 whatever its drift (three drift-free
     iterations cannot come before T_freeze, since iteration 0 always moves off the all-ones start): the
     freeze is logged as "T_freeze", and the table's `drift_zero_from` says from which iteration the mask
     had in fact stopped changing;
   - ``ptf-keepK-sS``: the start pruned once by filter L1 norms to the FLOPs that ``hsadmm-keepK-sS``'s
     exported model achieved, then fine-tuned with DDP.

`--keeps` chooses the channel keeps (default `KEEPS`, the ones with targets). Keep 1 adds two controls without
targets:
- ``hsadmm-keep1-sS``: H-SADMM's schedule (dynamic iterations, the freeze and its reset, retraining) with nothing
  pruned, so its distance to dense DDP is what consensus training costs at this budget before any pruning (no
  prune-then-finetune run: at 100% of the FLOPs it would be the dense DDP run again);
- ``localsgd-sS``: local SGD that averages the ranks' models at each epoch's end only (`examples.local_sgd`'s
  ``local_sgd_epoch``, registered through ``PRUNEX_METHODS=examples.local_sgd``), from the same start for the same
  steps: one round per epoch as H-SADMM's, without its proximal pull, duals and penalties. Its distance to dense
  DDP is what averaging only once per local epoch costs by itself; the rest of H-SADMM's is the consensus's.

`--rho-max R` (another cap of both penalties than the fixed 10, sec. 5.1.5) is a stated variant: only
``start-sS``, ``ddp-sS`` and ``hsadmm-keepK-rhomaxR-sS`` run, and no target is judged, since the targets hold for
the configuration fixed before the runs. The variant the docs report (docs/pruned-models.md) is R = 0.2, the paper's cap
on the step's pull towards the anchor, eta rho_max = 1e-3 x 10 (sec. 5.1.5), at this benchmark's eta = 0.05.

`--method flat_admm` and `--admm FIELD=VALUE` (repeatable: any `ADMMConfig` field but the budget's and the keep's)
are a third stated variant, made to tell apart what the consensus costs: the named method with the named fields
changed runs beside the fixed configuration's ``hsadmm-keepK-sS`` (found done when `--results` holds it) from the
same start, for the same steps (with `--budget-scale N` too), e.g. ``hsadmm-keep1-x2-rho-schedule=balance-sS`` or
``flat-admm-keep1-x2-sS``; it is reported against dense DDP and per seed against the fixed configuration's run, no
target judged. `--rho-max R` stays the same as `--admm rho_max=R` with its own run names.

`--ptf-on-hsadmm-mask` adds, per keep below 1, ``ptfmask-keepK-sS``: prune-then-finetune from the same start for
the same steps, with ``hsadmm-keepK-sS``'s final mask instead of the L1 filters (`--mask-from`): H-SADMM's pruned
network trained with DDP, a diagnostic of whether H-SADMM's distance to prune-then-finetune lies in its mask or in
its training. It is reported beside both, no target judged. `--localsgd-on-hsadmm-mask` adds, beside it,
``lsgdmask-keepK-sS``: the same mask from the same start for the same steps, trained as the local SGD control trains
(`examples.local_sgd`'s ``local_sgd_epoch_on_mask``: one average at each epoch's end, as H-SADMM's rounds, with
none of its proximal pull, duals or penalties), reported against H-SADMM and against prune-then-finetune on the same
mask: what the round length costs on the pruned network, and what H-SADMM's consensus costs beyond it.

Every accuracy is the final model's (the one `final_model.pt` holds and `prunex.pruning.export` exports) on the
whole 10,000-image test split. Targets (issue 26, after the paper's 4.6-point drop at 50% channels): the
median over seeds of H-SADMM's accuracy within `TARGET_GAP[K]` points of dense DDP's, and no seed
collapsed (more than twice that gap below its own seed's dense model). The gap to prune-then-finetune is
reported with its range over seeds, whichever way it falls. Budgets, penalties, seeds and targets were
fixed before any of these runs was made.

`--budget-scale N` is a second stated variant: every epoch count after the start multiplied by N (`BUDGET_EPOCHS`,
H-SADMM's outer iterations, its T_freeze and its retraining epochs), the start, learning rate, batch, penalties and
seeds unchanged; every method runs, with run names ending in ``-xN``. It asks whether H-SADMM's distance to dense
training at the fixed budget is a cost of a short budget (the paper compares trained models, sec. 5) and is
reported the same way, the targets printed beside it but not judged: they hold for the fixed configuration.

Run::

    PYTHONPATH=. python -m benchmarks.pruned [--seeds 0,1,2] [--keeps 0.5,0.25] [--results DIR] \\
        [--out saved-logs/bench/pruned.csv]
    PRUNEX_METHODS=examples.local_sgd PYTHONPATH=. python -m benchmarks.pruned --keeps 1,0.5,0.25  # the controls
    PYTHONPATH=. python -m benchmarks.pruned --keeps 1,0.5 --rho-max 0.2  # a variant: the penalties' cap
    PYTHONPATH=. python -m benchmarks.pruned --keeps 0.5 --budget-scale 2  # a variant: twice the budget
    PYTHONPATH=. python -m benchmarks.pruned --keeps 1 --budget-scale 2 --admm rho_schedule=balance  # the consensus
    PYTHONPATH=. python -m benchmarks.pruned --keeps 1 --budget-scale 2 --method flat_admm
    PYTHONPATH=. python -m benchmarks.pruned --keeps 0.5 --budget-scale 2 --ptf-on-hsadmm-mask  # mask or training?
    PRUNEX_METHODS=examples.local_sgd PYTHONPATH=. python -m benchmarks.pruned --keeps 0.5 --budget-scale 2 \\
        --ptf-on-hsadmm-mask --localsgd-on-hsadmm-mask  # the round length on the pruned network

Exit code 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from analysis.fig12_pareto import drift_zero_from
from prunex.cluster.exits import one_line
from prunex.cluster.launch import launch
from prunex.cluster.options import comma_list
from prunex.cluster.preflight import check_outputs
from prunex.methods.registry import METHOD_NAMES, PLUGINS_ENV
from prunex.training.config import ADMMConfig, PruneFinetuneConfig, RunConfig
from prunex.training.data import load_dataset
from prunex.training.log import hardware_name

DATASET = "fashion-mnist"
TRAIN_SUBSET = 4000  # images (1,000 per rank); the test split is whole
START_EPOCHS = 3
BUDGET_EPOCHS = 8
ADMM = ADMMConfig(iterations=5, local_epochs=1, rho_intra=0.05, rho_inter=0.005, freeze_iteration=3, retrain_epochs=3)
assert ADMM.iterations * ADMM.local_epochs + ADMM.retrain_epochs == BUDGET_EPOCHS
KEEPS = (0.5, 0.25)
TARGET_GAP = {0.5: 5.0, 0.25: 10.0}  # points below dense DDP
LOCAL_SGD = "local_sgd_epoch"  # the keep-1 control's method, registered by examples.local_sgd
LOCAL_SGD_ON_MASK = "local_sgd_epoch_on_mask"  # --localsgd-on-hsadmm-mask's method, registered by examples.local_sgd
ADMM_METHODS = ("hsadmm", "flat_admm")
# `--admm` cannot change these: the budget (SGD steps per rank, the same for every method) and the keep (`--keeps`)
FIXED_FIELDS = ("iterations", "local_epochs", "freeze_iteration", "retrain_epochs", "channel_keep")


@dataclass(frozen=True)
class Variant:
    """A stated variant of the consensus (`--method`, `--admm`): which ADMM method runs, with which `ADMMConfig`
    fields changed from `ADMM`."""

    method: str = "hsadmm"
    overrides: tuple[tuple[str, object], ...] = ()

    def __bool__(self) -> bool:
        return self.method != "hsadmm" or bool(self.overrides)

    def run_name(self, keep: float, tag: str, seed: int) -> str:
        """E.g. ``hsadmm-keep1-x2-rho-schedule=balance-s0``, ``flat-admm-keep1-x2-s0`` (run names have no "_")."""
        changed = "".join(f"-{f.replace('_', '-')}={v}" for f, v in self.overrides)
        return f"{self.method.replace('_', '-')}-keep{keep:g}{tag}{changed}-s{seed}"

    def label(self) -> str:
        return ", ".join([self.method, *(f"{f}={v}" for f, v in self.overrides)])


def parse_variant(method: str, settings: list[str]) -> Variant:
    """`--method` and the `--admm FIELD=VALUE` settings, each value of its field's type; `ValueError` (one line)
    for an unknown method or field, a field of the budget or the keep, or a value `ADMMConfig` refuses."""
    if method not in ADMM_METHODS:
        raise ValueError(f"--method must be one of {', '.join(ADMM_METHODS)}, got {method!r}")
    kinds = {f.name: type(getattr(ADMM, f.name)) for f in dataclasses.fields(ADMMConfig)}
    overrides: dict[str, object] = {}
    for setting in settings:
        name, sep, text = setting.partition("=")
        if not sep or name not in kinds:
            raise ValueError(f"--admm takes FIELD=VALUE with FIELD an ADMMConfig field, got {setting!r}")
        if name in FIXED_FIELDS:
            raise ValueError(f"--admm {name}: the budget and the keep are the benchmark's (--budget-scale, --keeps)")
        kind = kinds[name]
        if kind not in (bool, int, float, str):  # a field whose default is None (`layers`, `average_bn_stats`)
            raise ValueError(f"--admm {name}: not a variant this benchmark runs (its default is {getattr(ADMM, name)})")
        if kind is bool:
            if text not in ("true", "false"):
                raise ValueError(f"--admm {name} takes true or false, got {text!r}")
            overrides[name] = text == "true"
        else:
            try:
                overrides[name] = kind(text)
            except ValueError:
                raise ValueError(f"--admm {name} takes a {kind.__name__}, got {text!r}") from None
    ADMMConfig(**{**ADMM.__dict__, **overrides})  # a value the configuration refuses, refused here
    return Variant(method, tuple(overrides.items()))


def _config(name: str, method: str, seed: int, root: Path, data_root: str, **fields: object) -> RunConfig:
    return RunConfig(
        method=method,
        name=name,
        experiment="pruned",
        dataset=DATASET,
        data_root=data_root,
        nodes=2,
        procs_per_node=2,
        seed=seed,
        train_subset=TRAIN_SUBSET,
        eval_every=1000,  # the final model only: evaluating 10,000 images costs as much as an epoch
        bench_budget_s=0.2,
        results=str(root),
        **fields,
    )


def _final(run_dir: Path) -> dict[str, float]:
    steps = pd.read_parquet(run_dir / "steps.parquet")
    out = {"acc_pct": 100.0 * float(steps["test_acc"].dropna().iloc[-1])}
    export = run_dir / "export.json"
    if export.exists():
        out["flops_pct"] = 100.0 * json.loads(export.read_text())["flops_fraction"]
    freeze = run_dir / "freeze.parquet"
    if freeze.exists():
        row = pd.read_parquet(freeze).iloc[0]
        out["froze_after"] = int(row["last_dynamic"])
        out["freeze_reason"] = str(row["reason"])
        masks = run_dir / "masks.parquet"  # none at keep 1: nothing is masked, so nothing can drift
        zero = drift_zero_from(pd.read_parquet(masks), int(row["last_dynamic"])) if masks.exists() else math.nan
        out["drift_zero_from"] = zero
    residuals = run_dir / "residuals.parquet"
    if residuals.exists():  # the intra-node penalty each iteration ran with, median over the layers
        r = pd.read_parquet(residuals).query("level in ('intra', 'flat') and rank == 0")  # flat_admm: one level
        out["rho1_by_iteration"] = " ".join(f"{v:.3g}" for v in r.groupby("iteration")["rho"].median())
    return out


def scaled_admm(scale: int, **fields: object) -> ADMMConfig:
    """`ADMM` with its outer iterations, T_freeze and retraining epochs multiplied by `scale` (`--budget-scale`)."""
    counts = ("iterations", "freeze_iteration", "retrain_epochs")
    return ADMMConfig(**{**ADMM.__dict__, **{f: getattr(ADMM, f) * scale for f in counts}, **fields})


def run_seed(
    seed: int,
    root: Path,
    data_root: str,
    keeps: tuple[float, ...] = KEEPS,
    rho_max: float = ADMM.rho_max,
    scale: int = 1,
    consensus: Variant = Variant(),
    ptf_on_mask: bool = False,
    localsgd_on_mask: bool = False,
) -> list[dict[str, object]]:
    variant = rho_max != ADMM.rho_max
    budget = BUDGET_EPOCHS * scale
    tag = f"-x{scale}" if scale != 1 else ""
    rows: list[dict[str, object]] = []

    def go(name: str, method: str, epochs_label: int, **fields: object) -> dict[str, object]:
        t0 = time.monotonic()
        run_dir = launch(_config(name, method, seed, root, data_root, **fields), echo=False)
        row = {"seed": seed, "run": name, "method": method, "epochs": epochs_label, **_final(run_dir)}
        if isinstance(admm := fields.get("admm"), ADMMConfig):
            row["rho_max"] = admm.rho_max
        row["minutes"] = (time.monotonic() - t0) / 60
        rows.append(row)
        print(json.dumps(row), flush=True)
        return row

    start = f"start-s{seed}"
    go(start, "ddp", START_EPOCHS, epochs=START_EPOCHS)
    go(f"ddp{tag}-s{seed}", "ddp", budget, epochs=budget, init_from=start, export=True)
    for k in keeps:
        hs = f"hsadmm-keep{k:g}-rhomax{rho_max:g}-s{seed}" if variant else f"hsadmm-keep{k:g}{tag}-s{seed}"
        go(hs, "hsadmm", budget, init_from=start, admm=scaled_admm(scale, channel_keep=k, rho_max=rho_max), export=True)
        if consensus:  # beside the fixed configuration's run of its budget, from the same start
            admm = scaled_admm(scale, channel_keep=k, **dict(consensus.overrides))
            go(consensus.run_name(k, tag, seed), consensus.method, budget, init_from=start, admm=admm, export=True)
            continue
        if variant:  # compared with the dense runs and with the fixed configuration's saved runs
            continue
        if k == 1.0:  # the controls: prune-then-finetune would be the dense DDP run again
            go(f"localsgd{tag}-s{seed}", LOCAL_SGD, budget, epochs=budget, init_from=start, export=True)
            continue
        go(
            f"ptf-keep{k:g}{tag}-s{seed}",
            "prune_finetune",
            budget,
            epochs=budget,
            init_from=start,
            prune_finetune=PruneFinetuneConfig(flops_from=hs),
            export=True,
        )
        if ptf_on_mask:  # H-SADMM's pruned network, trained as prune-then-finetune trains its own
            mask = PruneFinetuneConfig(mask_from=hs)
            go(
                f"ptfmask-keep{k:g}{tag}-s{seed}",
                "prune_finetune",
                budget,
                epochs=budget,
                init_from=start,
                prune_finetune=mask,
                export=True,
            )
        if localsgd_on_mask:  # the same network, averaged once per epoch as H-SADMM's rounds, no consensus
            go(
                f"lsgdmask-keep{k:g}{tag}-s{seed}",
                LOCAL_SGD_ON_MASK,
                budget,
                epochs=budget,
                init_from=start,
                prune_finetune=PruneFinetuneConfig(mask_from=hs),
                export=True,
            )
    return rows


def _dense_acc(df: pd.DataFrame, scale: int = 1) -> pd.Series:
    """Dense DDP's accuracy per seed at the budget of `scale` (the table may hold other budgets' dense runs)."""
    return df[(df["method"] == "ddp") & (df["epochs"] == BUDGET_EPOCHS * scale)].set_index("seed")["acc_pct"]


def _per_seed(values: pd.Series, signed: bool = False) -> str:
    """ "4.0, 2.0" (or "+4.0, -2.0"): one figure per seed, in the table's order."""
    return ", ".join(f"{v:+.1f}" if signed else f"{v:.1f}" for v in values)


def mask_lines(df: pd.DataFrame, keeps: tuple[float, ...]) -> list[str]:
    """`--ptf-on-hsadmm-mask` and `--localsgd-on-hsadmm-mask`: per keep, each diagnostic on H-SADMM's mask that ran,
    against H-SADMM and against prune-then-finetune on its L1 mask (the local SGD one also against
    prune-then-finetune on the same mask), per seed; no target."""
    lines = []
    for k in (k for k in keeps if k < 1):
        runs = {
            p: df[df["run"].str.match(rf"{p}-keep{k:g}(-x\d+)?-s\d+$")].set_index("seed")["acc_pct"]
            for p in ("hsadmm", "ptf", "ptfmask", "lsgdmask")
        }
        for p, what in (("ptfmask", "prune-then-finetune"), ("lsgdmask", "local SGD (one average per epoch)")):
            on_mask = runs[p]
            if on_mask.empty:
                continue
            vs = [("H-SADMM", runs["hsadmm"]), ("prune-then-finetune on its L1 mask", runs["ptf"])]
            if p == "lsgdmask" and not runs["ptfmask"].empty:
                vs.append(("prune-then-finetune on the same mask", runs["ptfmask"]))
            against = "; ".join(
                f"against {name} {statistics.median(d):+.1f} points (per seed {_per_seed(d, signed=True)})"
                for name, other in vs
                for d in [on_mask - other]
            )
            lines.append(
                f"keep {k:g}, {what} on H-SADMM's mask (diagnostic, no target): median {on_mask.median():.1f}% "
                f"(range {on_mask.min():.1f}-{on_mask.max():.1f}); {against}"
            )
    return lines


def verdicts(df: pd.DataFrame, keeps: tuple[float, ...] = KEEPS, scale: int = 1) -> tuple[list[str], bool]:
    """The report's lines and whether every target holds. With `scale` != 1 (`--budget-scale`) the targets are
    printed, not judged: each line says "variant, not judged" instead of "met" or "NOT met"."""
    lines, ok = [], True
    dense = _dense_acc(df, scale)
    lines.append(f"dense DDP: median {dense.median():.1f}% (range {dense.min():.1f}-{dense.max():.1f})")
    if 1.0 in keeps:
        hs = df[df["run"].str.startswith("hsadmm-keep1-")].set_index("seed")
        gap = dense - hs["acc_pct"]
        lines.append(
            f"keep 1 (control, nothing pruned): H-SADMM median {hs['acc_pct'].median():.1f}% (range "
            f"{hs['acc_pct'].min():.1f}-{hs['acc_pct'].max():.1f}), {statistics.median(gap):.1f} points below dense "
            f"(per seed {_per_seed(gap)}): consensus training alone, no target"
        )
        local = df[df["run"].str.startswith("localsgd-")].set_index("seed")["acc_pct"]
        gap = dense - local
        lines.append(
            f"keep 1 (control, local SGD averaging once per epoch): median {local.median():.1f}% (range "
            f"{local.min():.1f}-{local.max():.1f}), {statistics.median(gap):.1f} points below dense (per seed "
            f"{_per_seed(gap)}): H-SADMM's round length alone, no target"
        )
    for k in (k for k in keeps if k in TARGET_GAP):
        hs = df[df["run"].str.startswith(f"hsadmm-keep{k:g}-")].set_index("seed")
        ptf = df[df["run"].str.startswith(f"ptf-keep{k:g}-")].set_index("seed")
        gap = dense - hs["acc_pct"]
        vs_ptf = hs["acc_pct"] - ptf["acc_pct"]
        collapsed = [int(s) for s, g in gap.items() if g > 2 * TARGET_GAP[k]] or "none"
        met = statistics.median(gap) <= TARGET_GAP[k] and collapsed == "none"
        ok &= met
        verdict = "variant, not judged" if scale != 1 else "met" if met else "NOT met"
        lines.append(
            f"keep {k:g}: H-SADMM median {hs['acc_pct'].median():.1f}% (range {hs['acc_pct'].min():.1f}-"
            f"{hs['acc_pct'].max():.1f}), {statistics.median(gap):.1f} points below dense (per seed "
            f"{_per_seed(gap)}; target <= {TARGET_GAP[k]:g}, collapsed seeds {collapsed}): "
            f"{verdict}; vs prune-then-finetune {statistics.median(vs_ptf):+.1f} points "
            f"(range {vs_ptf.min():+.1f} to {vs_ptf.max():+.1f}; ptf median {ptf['acc_pct'].median():.1f}%); "
            f"H-SADMM froze after iteration {', '.join(str(int(v)) for v in hs['froze_after'])} "
            f"({', '.join(hs['freeze_reason'])}), its mask unchanged from iteration "
            f"{', '.join('-' if v != v else str(int(v)) for v in hs['drift_zero_from'])}"
        )
    return lines, ok


def variant_lines(df: pd.DataFrame, keeps: tuple[float, ...], rho_max: float) -> list[str]:
    """The report of a `--rho-max` variant: H-SADMM against dense DDP per keep, no target judged."""
    dense = _dense_acc(df)
    lines = [f"dense DDP: median {dense.median():.1f}% (range {dense.min():.1f}-{dense.max():.1f})"]
    for k in keeps:
        hs = df[df["run"].str.startswith(f"hsadmm-keep{k:g}-rhomax")].set_index("seed")
        gap = dense - hs["acc_pct"]
        lines.append(
            f"keep {k:g}, rho_max {rho_max:g} (variant, no target): H-SADMM median {hs['acc_pct'].median():.1f}% "
            f"(range {hs['acc_pct'].min():.1f}-{hs['acc_pct'].max():.1f}), {statistics.median(gap):.1f} points below "
            f"dense (per seed {_per_seed(gap)}); rho_1 per iteration (median over layers, seed "
            f"{int(hs.index[0])}) {hs['rho1_by_iteration'].iloc[0]}; froze after iteration "
            f"{', '.join(str(int(v)) for v in hs['froze_after'])} ({', '.join(hs['freeze_reason'])}), its mask "
            f"unchanged from iteration {', '.join('-' if v != v else str(int(v)) for v in hs['drift_zero_from'])}"
        )
    return lines


def consensus_lines(df: pd.DataFrame, keeps: tuple[float, ...], scale: int, consensus: Variant) -> list[str]:
    """The report of a `--method` / `--admm` variant: per keep, the fixed configuration's H-SADMM and the variant
    against dense DDP of the same budget, and the variant against the fixed configuration per seed; no target."""
    dense = _dense_acc(df, scale)
    lines = [f"dense DDP: median {dense.median():.1f}% (range {dense.min():.1f}-{dense.max():.1f})"]
    tag = f"-x{scale}" if scale != 1 else ""
    for k in keeps:
        names = {s: (f"hsadmm-keep{k:g}{tag}-s{s}", consensus.run_name(k, tag, s)) for s in dense.index}
        fixed = df[df["run"].isin([a for a, _ in names.values()])].set_index("seed")
        var = df[df["run"].isin([b for _, b in names.values()])].set_index("seed")
        below = dense - fixed["acc_pct"]
        lines.append(
            f"keep {k:g}, the fixed configuration: H-SADMM median {fixed['acc_pct'].median():.1f}% (range "
            f"{fixed['acc_pct'].min():.1f}-{fixed['acc_pct'].max():.1f}), {statistics.median(below):.1f} points below "
            f"dense (per seed {_per_seed(below)})"
        )
        gap, gain = dense - var["acc_pct"], var["acc_pct"] - fixed["acc_pct"]
        frozen = var.dropna(subset=["froze_after"]) if "froze_after" in var else var.iloc[:0]
        lines.append(
            f"keep {k:g}, {consensus.label()} (variant, no target): median {var['acc_pct'].median():.1f}% (range "
            f"{var['acc_pct'].min():.1f}-{var['acc_pct'].max():.1f}), {statistics.median(gap):.1f} points below dense "
            f"(per seed {_per_seed(gap)}); against the fixed configuration "
            f"{statistics.median(gain):+.1f} points (per seed {_per_seed(gain, signed=True)}); rho_1 per "
            f"iteration (median over layers, seed {int(var.index[0])}) {var['rho1_by_iteration'].iloc[0]}; froze after "
            f"iteration {', '.join(str(int(v)) for v in frozen['froze_after']) or '-'} "
            f"({', '.join(frozen['freeze_reason']) or '-'})"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.pruned", description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--keeps", default=",".join(f"{k:g}" for k in KEEPS), help="channel keeps; 1 adds the control")
    ap.add_argument("--results", default=None, help="keep the runs here (default: a temporary directory)")
    ap.add_argument("--data-root", default="", help="data root ('' : $PRUNEX_DATA or ./data)")
    ap.add_argument("--out", default=None, help="write the per-run table here (csv)")
    ap.add_argument(
        "--rho-max", type=float, default=ADMM.rho_max, help="cap of both penalties; another value is a stated variant"
    )
    ap.add_argument(
        "--budget-scale", type=int, default=1, help="every epoch count after the start times N: a stated variant"
    )
    ap.add_argument(
        "--ptf-on-hsadmm-mask", action="store_true", help="add prune-then-finetune on H-SADMM's mask (a diagnostic)"
    )
    ap.add_argument(
        "--localsgd-on-hsadmm-mask",
        action="store_true",
        help=f"add local SGD on H-SADMM's mask (a diagnostic; {PLUGINS_ENV}=examples.local_sgd)",
    )
    ap.add_argument("--method", default="hsadmm", help=f"the consensus method, one of {', '.join(ADMM_METHODS)}")
    ap.add_argument(
        "--admm", action="append", default=[], metavar="FIELD=VALUE", help="an ADMMConfig field changed (repeatable)"
    )
    args = ap.parse_args(argv)
    try:
        consensus = parse_variant(args.method, args.admm)
        if consensus and args.rho_max != ADMM.rho_max:
            raise ValueError("--rho-max and --method/--admm are variants of their own: give --admm rho_max=R instead")
        if args.budget_scale < 1:
            raise ValueError(f"--budget-scale must be a whole number >= 1, got {args.budget_scale}")
        for flag, on in (("ptf", args.ptf_on_hsadmm_mask), ("localsgd", args.localsgd_on_hsadmm_mask)):
            if on and (consensus or args.rho_max != ADMM.rho_max):
                raise ValueError(
                    f"--{flag}-on-hsadmm-mask goes with the fixed configuration's H-SADMM runs, not a variant"
                )
        if args.localsgd_on_hsadmm_mask and LOCAL_SGD_ON_MASK not in METHOD_NAMES:
            raise ValueError(
                f"--localsgd-on-hsadmm-mask runs {LOCAL_SGD_ON_MASK}: set {PLUGINS_ENV}=examples.local_sgd"
            )
        if args.budget_scale != 1 and args.rho_max != ADMM.rho_max:
            raise ValueError("--budget-scale and --rho-max are variants of their own: give one of them")
        seeds = comma_list(args.seeds, "--seeds", int)
        keeps = tuple(comma_list(args.keeps, "--keeps", float))
        if unknown := [k for k in keeps if k not in (1.0, *KEEPS)]:
            raise ValueError(
                f"--keeps: {unknown} (the benchmark's keeps are 1 and {', '.join(f'{k:g}' for k in KEEPS)})"
            )
        variant = args.rho_max != ADMM.rho_max
        ADMMConfig(**{**ADMM.__dict__, "rho_max": args.rho_max})  # a cap below the initial penalties is refused here
        if 1.0 in keeps and LOCAL_SGD not in METHOD_NAMES and not (variant or consensus):
            raise ValueError(f"--keeps 1 runs the local SGD control: set {PLUGINS_ENV}=examples.local_sgd")
        # hours of runs, then a table that cannot be written: refused now
        check_outputs(args.results, args.out)
        load_dataset(DATASET, args.data_root or None, train=False)  # present (or unpacked) before any launch
    except (ValueError, OSError) as e:
        print(f"error: {one_line(e)}", file=sys.stderr)
        return 2
    root = Path(args.results or tempfile.mkdtemp(prefix="prunex-pruned-"))
    steps = -(-(TRAIN_SUBSET // 4) // 64)
    budget = BUDGET_EPOCHS * args.budget_scale
    print(
        f"{DATASET} ({TRAIN_SUBSET} training images, 10,000 test), resnet20, 2 nodes x 2 processes (local executor), "
        f"{hardware_name('cpu')}; start: DDP {START_EPOCHS} epochs; then {budget} epochs = "
        f"{budget * steps} SGD steps per rank for every method; seeds {seeds}\n"
        f"runs in {root} (stopped or failed, the same command with --results {root} finds the finished ones)",
        flush=True,
    )
    rows = [
        row
        for s in seeds
        for row in run_seed(
            s,
            root,
            args.data_root,
            keeps,
            args.rho_max,
            args.budget_scale,
            consensus,
            args.ptf_on_hsadmm_mask,
            args.localsgd_on_hsadmm_mask,
        )
    ]
    df = pd.DataFrame(rows)
    df["sgd_steps_per_rank"] = df["epochs"] * steps
    df["hardware"] = hardware_name("cpu")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        df.to_csv(args.out, index=False)
    if consensus:
        print("\n".join(consensus_lines(df, keeps, args.budget_scale, consensus)))
        print(f"runs in {root}")
        return 0
    if variant:
        print("\n".join(variant_lines(df, keeps, args.rho_max)))
        print(f"runs in {root}")
        return 0
    lines, ok = verdicts(df, keeps, args.budget_scale)
    on_mask = args.ptf_on_hsadmm_mask or args.localsgd_on_hsadmm_mask
    print("\n".join(lines + (mask_lines(df, keeps) if on_mask else [])))
    print(f"runs in {root}")
    return 0 if ok or args.budget_scale != 1 else 1


if __name__ == "__main__":
    sys.exit(main())
