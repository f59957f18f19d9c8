"""Numbers of the PruneX paper that the library sets beside its own results (torch-free data).

The paper's claims as a whole, with their tolerances and the logs that measure them, are
`analysis.claims`. The library must not import `analysis`, so the few numbers it prints itself (the
performance model's Fig. 9 projection) live here, and `analysis.claims` reads them from here: each
number is written once. So do numbers that a figure draws beside ours and a claim also checks (Fig. 8's
shares), so that the figure need not import the claims, and numbers that several claims use (each model's
row of Table 2 and Fig. 6b, Fig. 7's latencies), so that they are named once rather than repeated in tuples.
"""

from __future__ import annotations

from dataclasses import dataclass

# Fig. 9 / sec. 5.4 / abstract: strong scaling of ResNet-152 on CIFAR-10, batch 128 per GPU, relative to 8 GPUs
FIG9_BASE_GPUS = 8
FIG9_GPUS = 64
FIG9_SPEEDUP = {"hsadmm": 6.75, "ddp": 5.81, "topk": 3.71}  # at 64 GPUs (Fig. 9a)
FIG9_EFFICIENCY_PCT = {"hsadmm": 84.4, "ddp": 72.7}  # at 64 GPUs (Fig. 9b; 5.81 / 8 = 72.6%: the paper rounds)

# Fig. 8 / sec. 5.3.3: shares (%) of PruneX's communication time among its three collectives
# (ResNet-152, 64 V100), read off the figure's bar
FIG8_SHARE_PCT = {"Inter-node AllReduce": 68.4, "Intra-node AllReduce": 17.8, "Broadcast": 13.8}

# Fig. 7 / sec. 5.3.2: per-iteration communication latency (s), read off the figure, and the "~5x faster
# synchronisation" the text states (0.50 s / 0.10 s)
FIG7_LATENCY_S = {"ddp": 0.50, "hsadmm": 0.10}
FIG7_PER_SYNC_X = 5.0


@dataclass(frozen=True, kw_only=True)
class PaperModel:
    """One of the paper's three CIFAR-10 models: its name in the paper and its numbers."""

    tag: str  # the short name in the claims' ids (volume_r18_ddp, ...)
    label: str  # the paper's name for it
    params_m: float  # Table 2: ~ millions of parameters (torchvision's ImageNet variant, see analysis.claims)
    volume_gb: dict[str, float]  # Fig. 6b: total inter-node volume (GB) per method: DDP (dense), PruneX


# Table 2 and Fig. 6b / sec. 5.3.1, in the paper's order
MODELS = {
    "resnet18": PaperModel(tag="r18", label="ResNet-18", params_m=11.0, volume_gb={"ddp": 2.53, "hsadmm": 1.01}),
    "wide_resnet50_2": PaperModel(tag="wrn", label="WRN-50-2", params_m=69.0, volume_gb={"ddp": 14.88, "hsadmm": 5.97}),
    "resnet152": PaperModel(tag="r152", label="ResNet-152", params_m=60.0, volume_gb={"ddp": 13.00, "hsadmm": 5.21}),
}
