"""Colours, labels and the plotting theme, defined once for every figure.

Method colours follow the paper's Fig. 5 (PruneX green, DDP blue, Top-K pink); the paper's Fig. 7
uses other colours for the same methods, we keep one colour per method everywhere. Methods' order,
colours and labels are their entries in `prunex.methods.registry`.
"""

from __future__ import annotations

import matplotlib
import seaborn as sns

from prunex.methods.registry import METHOD_NAMES, REGISTRY

matplotlib.use("Agg")  # analysis only writes files; it never needs a display

# Methods: order, colour and label from their one description (`prunex.methods.registry`, torch-free).
METHOD_ORDER = list(METHOD_NAMES)
METHOD_COLORS = {m.name: m.color for m in REGISTRY.values()}
METHOD_LABELS = {m.name: m.label for m in REGISTRY.values()}
MODEL_LABELS = {
    "resnet18": "ResNet-18",
    "resnet20": "ResNet-20",
    "resnet152": "ResNet-152",
    "wide_resnet50_2": "WRN-50-2",
}
MODEL_ORDER = ["resnet18", "wide_resnet50_2", "resnet152", "resnet20"]
# Fig. 12 draws one line per model (all H-SADMM): colours distinct from the method colours.
MODEL_COLORS = {"resnet18": "#6a3d9a", "wide_resnet50_2": "#ff7f00", "resnet152": "#1b9e77", "resnet20": "#636363"}
EXTRA_MODEL_COLORS = ["#a6761d", "#e7298a", "#66a61e", "#386cb0"]
# Fig. 8 categories, in the paper's colours (cyan, purple, orange); "other" and "wait" are ours.
CATEGORY_COLORS = {
    "Inter-node AllReduce": "#17becf",
    "Intra-node AllReduce": "#9467bd",
    "Broadcast": "#ff7f0e",
    "Other (mask sync, residual AllReduce)": "#b0b0b0",
    "Wait for other ranks": "#f2d7d5",  # pale red, hatched in the figure: time not spent transferring
}
WAIT_HATCH = "//"
FALLBACK_COLOR = "#7f7f7f"
FC_LAYER_COLOR = "#1f77b4"  # Fig. 11: the fully connected layer in blue, as in the paper
TARGET_COLOR = "#444444"


def method_color(method: str) -> str:
    return METHOD_COLORS.get(method, FALLBACK_COLOR)


def model_color(model: str) -> str:
    if model in MODEL_COLORS:
        return MODEL_COLORS[model]
    return EXTRA_MODEL_COLORS[sum(map(ord, model)) % len(EXTRA_MODEL_COLORS)]


def method_label(method: str) -> str:
    return METHOD_LABELS.get(method, method)


def model_label(model: str) -> str:
    return MODEL_LABELS.get(model, model)


def method_sort_key(method: str) -> tuple[int, str]:
    return (METHOD_ORDER.index(method) if method in METHOD_ORDER else len(METHOD_ORDER), method)


def model_sort_key(model: str) -> tuple[int, str]:
    return (MODEL_ORDER.index(model) if model in MODEL_ORDER else len(MODEL_ORDER), model)


def apply_theme() -> None:
    sns.set_theme(context="paper", style="whitegrid", font_scale=1.1)
    matplotlib.rcParams.update({"figure.dpi": 110, "savefig.dpi": 150, "axes.titleweight": "bold"})
