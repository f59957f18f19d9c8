"""Fig. 13: learned structured sparsity patterns of four convolutions (white = pruned).

    python -m analysis.fig13_sparsity_patterns --results results --out figures

Reads `sparsity_patterns/*/final_masks.parquet` of an hsadmm run: per constrained layer, the kept
output filters (`out_keep`) and kept input channels (`in_keep`) as strings of 0/1. The image of a
layer is out_keep (rows) x in_keep (columns), one pixel per (filter, input channel) kernel: the
support H-SADMM keeps (eq. (15)). The csv holds the two vectors (tidy: axis, index, kept); the image
is their outer product. The four layers are spread evenly over the network's depth.

Without final_masks.parquet, the last global row of each layer in masks.parquet gives only the
kept counts: the figure then draws a schematic (kept groups first) and says so.
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from analysis.common import Experiment, FigureResult, FigureSpec, LogError, Run, cli, render

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
    rows = []
    for layer in layers:
        o, i = masks[layer]
        for axis, vec in (("out", o), ("in", i)):
            rows.extend(
                {"run_id": run.run_id, "layer": layer, "axis": axis, "index": k, "kept": int(v), "schematic": schematic}
                for k, v in enumerate(vec)
            )
    keep = run.admm.get("channel_keep", float("nan"))
    notes.append(f"{run.run_id}: channel keep {keep}, filter keep {run.admm.get('filter_keep', 1.0)}")
    return pd.DataFrame(rows, columns=SPEC.columns), notes


def draw(df: pd.DataFrame, exp: Experiment) -> Figure:
    layers = list(dict.fromkeys(df["layer"]))
    fig, axes = plt.subplots(1, len(layers), figsize=(3.6 * len(layers), 4.0), squeeze=False, layout="constrained")
    for ax, layer in zip(axes.flat, layers, strict=True):
        sub = df[df["layer"] == layer]
        o = sub[sub["axis"] == "out"].sort_values("index")["kept"].to_numpy()
        i = sub[sub["axis"] == "in"].sort_values("index")["kept"].to_numpy()
        img = np.outer(o, i)
        ax.imshow(img, cmap="gray_r", vmin=0, vmax=1, interpolation="nearest", aspect="auto")
        ax.set_title(
            f"{layer.removesuffix('.weight')}\n{o.sum()}/{len(o)} filters x {i.sum()}/{len(i)} channels, "
            f"density {100 * img.mean():.0f}%",
            fontsize=9,
        )
        ax.set_xlabel("input channel")
        ax.set_ylabel("output filter")
        ax.grid(False)
    schematic = bool(df["schematic"].astype(bool).any())
    title = "Fig. 13: learned (channel + filter) sparsity patterns, white = pruned"
    fig.suptitle(title + (" (SCHEMATIC: counts only)" if schematic else ""))
    return fig


def summary(df: pd.DataFrame) -> str:
    parts = []
    for layer, sub in df.groupby("layer", sort=False):
        o = sub[sub["axis"] == "out"]["kept"]
        i = sub[sub["axis"] == "in"]["kept"]
        parts.append(f"{str(layer).removesuffix('.weight')} {o.mean() * i.mean() * 100:.0f}% kept")
    kind = "schematic, " if df["schematic"].astype(bool).any() else ""
    return f"{kind}density of the shown layers: " + ", ".join(parts)


SPEC = FigureSpec(
    name="fig13_sparsity_patterns",
    experiment="sparsity_patterns",
    title="Fig. 13: learned sparsity patterns",
    columns=["run_id", "layer", "axis", "index", "kept", "schematic"],
    compute=compute,
    draw=draw,
    summary=summary,
    caption_extra="Image = out_keep (rows, output filters) x in_keep (columns, input channels) of the final global "
    "mask; one pixel per k x k kernel; black = kept, white = pruned. A white column is a pruned input channel, a "
    "white row a pruned filter.",
    methods=("hsadmm",),
)


def make(results: str | Path, out: str | Path) -> FigureResult:
    return render(SPEC, Path(results), Path(out))


if __name__ == "__main__":
    sys.exit(cli(SPEC))
