"""Fig. 13: learned sparsity patterns.

Learned structured sparsity patterns of four convolutions (white = pruned).

    python -m analysis.fig13_sparsity_patterns --results results --out figures

Reads `sparsity_patterns/*/final_masks.parquet` of an hsadmm run: per constrained layer, the kept
output filters (`out_keep`) and kept input channels (`in_keep`) as strings of 0/1. The image of a
layer is out_keep (rows) x in_keep (columns), one pixel per (filter, input channel) kernel: the
support H-SADMM keeps (eq. (15)). The csv holds the two vectors (tidy: axis, index, kept); the image
is their outer product. The four layers are spread evenly over the network's depth.

Without final_masks.parquet, the last global row of each layer in masks.parquet gives only the
kept counts: the figure then draws a schematic (kept groups first) and says so.

With the run's `export.json` (`python -m prunex.pruning.export`, or the run's `--export`), each pixel also
says what the physically compact model did with it: black = kept by the mask and the export,
grey = pruned by the mask but still stored (as zeros) in the exported model, because another
layer reads that channel, white = pruned and physically removed, orange = kept by the mask but
removed, because nothing reads what that filter produces or the input channel is identically
zero (a pruned filter whose BatchNorm output is negative, cut to 0 by the ReLU). The title gives the run's accuracy
and the achieved fractions of the dense model's parameters and FLOPs.
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from analysis.common import Experiment, LogError, Run, cli, figure_spec, final_accuracy

COLUMNS = [
    "run_id",
    "layer",
    "axis",
    "index",
    "kept",
    "exported",
    "schematic",
    "final_test_acc_pct",
    "params_fraction_pct",
    "flops_fraction_pct",
]
CAPTION = (
    "Image = out_keep (rows, output filters) x in_keep (columns, input channels) of the final global "
    "mask; one pixel per k x k kernel; black = kept. A light column is a pruned input channel, a light row a pruned "
    "filter; with export.json, grey = pruned but stored as zeros by the exported model, white = physically removed, "
    "orange = kept by the mask but removed: no layer reads that filter's output, or the input channel is identically "
    "zero (a pruned filter after BatchNorm and ReLU)."
)

N_LAYERS = 4
SCHEMATIC_NOTE = "no final_masks.parquet: schematic from the kept counts in masks.parquet (positions unknown)"


def _pick_run(exp: Experiment) -> Run | None:
    runs = [r for r in exp.by_method("hsadmm") if r.table("final_masks") is not None or r.table("masks") is not None]
    if not runs:
        return None

    # the paper's Fig. 13: ResNet-152 at 75% sparsity (kept fraction filter_keep x channel_keep = 0.25)
    def kept(r: Run) -> float:
        return float(r.admm.get("channel_keep", 1.0)) * float(r.admm.get("filter_keep", 1.0))

    return max(
        runs,
        key=lambda r: (
            r.table("final_masks") is not None,
            r.export is not None,
            r.model == "resnet152",
            -abs(kept(r) - 0.25),
            r.done,
            r.run_id,
        ),
    )


def _vector(text: object, path: Path, layer: str) -> np.ndarray:
    s = str(text)
    if not s or set(s) - {"0", "1"}:
        raise LogError(f"{path}: layer {layer}: mask is not a string of 0/1 characters")
    return np.frombuffer(s.encode(), dtype=np.uint8) - ord("0")


def _masks(run: Run) -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], bool]:
    final = run.table("final_masks")
    if final is not None and len(final):
        path = run.path / "final_masks.parquet"
        return {
            str(r.layer): (_vector(r.out_keep, path, r.layer), _vector(r.in_keep, path, r.layer))
            for r in final.itertuples()
        }, False
    masks = run.table("masks")
    assert masks is not None
    glob = masks[masks["kind"] == "global"]
    last = glob[glob["iteration"] == glob["iteration"].max()]
    out = {}
    for r in last.itertuples():
        o = np.zeros(int(r.total_out), dtype=np.uint8)
        i = np.zeros(int(r.total_in), dtype=np.uint8)
        o[: int(r.kept_out)] = 1
        i[: int(r.kept_in)] = 1
        out[str(r.layer)] = (o, i)
    return out, True


def choose_layers(masks: dict[str, tuple[np.ndarray, np.ndarray]], n: int = N_LAYERS) -> list[str]:
    """n layers evenly spread over depth, preferring ones with pruned groups and both dimensions >= 8."""
    names = [k for k, (o, i) in masks.items() if len(o) > 1 and len(i) > 1]
    wide = [k for k in names if min(len(masks[k][0]), len(masks[k][1])) >= 8]  # not the 3-channel stem
    names = wide if len(wide) >= n else names
    pruned = [k for k in names if masks[k][0].min() == 0 or masks[k][1].min() == 0]
    pool = pruned if len(pruned) >= n else names
    if len(pool) <= n:
        return pool
    idx = np.linspace(0, len(pool) - 1, n).round().astype(int)
    return [pool[i] for i in idx]


def compute(exp: Experiment) -> tuple[pd.DataFrame, list[str]]:
    notes = []
    run = _pick_run(exp)
    if run is None:
        notes.append("no hsadmm run with final_masks.parquet or masks.parquet")
        return pd.DataFrame(columns=SPEC.columns), notes
    masks, schematic = _masks(run)
    if schematic:
        notes.append(SCHEMATIC_NOTE)
    layers = choose_layers(masks)
    ex = run.export
    exported = {}
    if ex is None:
        notes.append(
            f"{run.run_id}: no export.json, so no physical removal shown (python -m prunex.pruning.export {run.path})"
        )
    else:
        path = run.path / "export.json"
        exported = {
            str(x["layer"]): (_vector(x["out_keep"], path, x["layer"]), _vector(x["in_keep"], path, x["layer"]))
            for x in ex.get("layers", [])
        }
    steps = run.table("steps")
    acc = final_accuracy(steps) if steps is not None and len(steps) else float("nan")
    rows = []
    for layer in layers:
        o, i = masks[layer]
        eo, ei = exported.get(layer, (None, None))
        for axis, vec, evec in (("out", o, eo), ("in", i, ei)):
            rows.extend(
                {
                    "run_id": run.run_id,
                    "layer": layer,
                    "axis": axis,
                    "index": k,
                    "kept": int(v),
                    "exported": int(evec[k]) if evec is not None and len(evec) == len(vec) else -1,
                    "schematic": schematic,
                    "final_test_acc_pct": acc,
                    "params_fraction_pct": 100 * float((ex or {}).get("params_fraction", float("nan"))),
                    "flops_fraction_pct": 100 * float((ex or {}).get("flops_fraction", float("nan"))),
                }
                for k, v in enumerate(vec)
            )
    keep = run.admm.get("channel_keep", float("nan"))
    notes.append(f"{run.run_id}: channel keep {keep}, filter keep {run.admm.get('filter_keep', 1.0)}")
    return pd.DataFrame(rows, columns=SPEC.columns), notes


# pixel categories: mask x export
KEPT, STORED_ZERO, REMOVED, DEAD = 3, 2, 0, 1
PIXEL_COLORS = ["#ffffff", "#ff7f0e", "#b5b5b5", "#000000"]  # removed, dead (removed though kept), stored zero, kept


def _image(sub: pd.DataFrame) -> tuple[np.ndarray, bool]:
    def vec(axis: str, col: str) -> np.ndarray:
        return sub[sub["axis"] == axis].sort_values("index")[col].to_numpy()

    mask = np.outer(vec("out", "kept"), vec("in", "kept")).astype(bool)
    eo, ei = vec("out", "exported"), vec("in", "exported")
    if (eo < 0).any() or (ei < 0).any():
        return np.where(mask, KEPT, REMOVED), False
    gone = ~np.outer(eo, ei).astype(bool)
    img = np.where(mask, np.where(gone, DEAD, KEPT), np.where(gone, REMOVED, STORED_ZERO))
    return img, True


def draw(df: pd.DataFrame, exp: Experiment) -> Figure:
    layers = list(dict.fromkeys(df["layer"]))
    fig, axes = plt.subplots(1, len(layers), figsize=(4.4 * len(layers), 4.2), squeeze=False, layout="constrained")
    any_export = False
    for ax, layer in zip(axes.flat, layers, strict=True):
        sub = df[df["layer"] == layer]
        o = sub[sub["axis"] == "out"].sort_values("index")["kept"].to_numpy()
        i = sub[sub["axis"] == "in"].sort_values("index")["kept"].to_numpy()
        img, has_export = _image(sub)
        any_export |= has_export
        ax.imshow(img, cmap=ListedColormap(PIXEL_COLORS), vmin=0, vmax=3, interpolation="nearest", aspect="auto")
        title = f"{layer.removesuffix('.weight')}\n{o.sum()}/{len(o)} filters x {i.sum()}/{len(i)} channels"
        title += f", density {100 * np.outer(o, i).mean():.0f}%"
        if has_export:
            title += f"\nexported: {100 * np.isin(img, (KEPT, STORED_ZERO)).mean():.0f}% of the weights stored"
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("input channel")
        ax.set_ylabel("output filter")
        ax.grid(False)
    schematic = bool(df["schematic"].astype(bool).any())
    title = "Fig. 13: learned (channel + filter) sparsity patterns"
    if any_export:
        first = df.iloc[0]
        title += (
            f"; exported model: {first['params_fraction_pct']:.0f}% of the parameters, "
            f"{first['flops_fraction_pct']:.0f}% of the FLOPs, accuracy {first['final_test_acc_pct']:.1f}%"
        )
        handles = [
            Patch(facecolor=PIXEL_COLORS[KEPT], label="kept"),
            Patch(facecolor=PIXEL_COLORS[STORED_ZERO], label="pruned, still stored\n(channel read elsewhere)"),
            Patch(facecolor=PIXEL_COLORS[REMOVED], edgecolor="#888888", label="pruned and removed"),
            Patch(facecolor=PIXEL_COLORS[DEAD], label="kept by the mask, removed\n(unread, or identically zero)"),
        ]
        axes.flat[len(layers) - 1].legend(handles=handles, loc="upper left", bbox_to_anchor=(1.03, 1.0), fontsize=8)
    else:
        title += ", black = kept, white = pruned"
    fig.suptitle(title + (" (SCHEMATIC: counts only)" if schematic else ""))
    return fig


def summary(df: pd.DataFrame) -> str:
    parts = []
    for layer, sub in df.groupby("layer", sort=False):
        o = sub[sub["axis"] == "out"]["kept"]
        i = sub[sub["axis"] == "in"]["kept"]
        parts.append(f"{str(layer).removesuffix('.weight')} {o.mean() * i.mean() * 100:.0f}% kept")
    kind = "schematic, " if df["schematic"].astype(bool).any() else ""
    text = f"{kind}density of the shown layers: " + ", ".join(parts)
    first = df.iloc[0]
    if (df["exported"] >= 0).all():
        text += (
            f"; exported model {first['params_fraction_pct']:.0f}% of the parameters, "
            f"{first['flops_fraction_pct']:.0f}% of the FLOPs, accuracy {first['final_test_acc_pct']:.1f}%"
        )
    return text


SPEC = figure_spec(globals(), "sparsity_patterns", COLUMNS, CAPTION, ("hsadmm",))


if __name__ == "__main__":
    sys.exit(cli(SPEC))
