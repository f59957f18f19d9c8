"""Numbers of the PruneX paper that the library sets beside its own results (torch-free data).

The paper's claims as a whole, with their tolerances and the logs that measure them, are
`analysis.claims`. The library must not import `analysis`, so the few numbers it prints itself (the
performance model's Fig. 9 projection) live here, and `analysis.claims` reads them from here: each
number is written once. So do numbers that a figure draws beside ours and a claim also checks (Fig. 8's
shares), so that the figure need not import the claims.
"""

from __future__ import annotations

# Fig. 9 / sec. 5.4 / abstract: strong scaling of ResNet-152 on CIFAR-10, batch 128 per GPU, relative to 8 GPUs
FIG9_BASE_GPUS = 8
FIG9_GPUS = 64
FIG9_SPEEDUP = {"hsadmm": 6.75, "ddp": 5.81, "topk": 3.71}  # at 64 GPUs (Fig. 9a)
FIG9_EFFICIENCY_PCT = {"hsadmm": 84.4, "ddp": 72.7}  # at 64 GPUs (Fig. 9b; 5.81 / 8 = 72.6%: the paper rounds)

# Fig. 8 / sec. 5.3.3: shares (%) of PruneX's communication time among its three collectives
# (ResNet-152, 64 V100), read off the figure's bar
FIG8_SHARE_PCT = {"Inter-node AllReduce": 68.4, "Intra-node AllReduce": 17.8, "Broadcast": 13.8}
