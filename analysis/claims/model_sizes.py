"""Model sizes (Table 2): the function that measures the claims on the models' parameter counts
(the claims: `analysis.claims.table`).

Analysis builds no model (no torch here): the counts are measured once with
`prunex.training.models.count_parameters` and written below (`PARAM_COUNTS`). The paper's numbers are
`prunex.paper.MODELS`.
"""

from __future__ import annotations

from analysis.claims.base import Claim
from analysis.measurements import Logs, Measurement

# Parameter counts measured with prunex.training.models.count_parameters: torchvision 0.29.1 classes with the
# CIFAR stem (3x3 stride-1 first convolution, no max-pool) and 10 classes.
PARAM_COUNTS = {"resnet18": 11_173_962, "resnet152": 58_156_618, "wide_resnet50_2": 66_847_050}
# The paper's Table 2 (~11M, ~69M, ~60M) matches torchvision's ImageNet variants (7x7 stem, 1000
# classes): 11,689,512 / 68,883,240 / 60,192,808, i.e. our CIFAR models (PARAM_COUNTS)
# + (fc 1000 vs 10 classes) + (7x7 vs 3x3 stem, 7,680 weights).
IMAGENET_PARAM_COUNTS = {"resnet18": 11_689_512, "resnet152": 60_192_808, "wide_resnet50_2": 68_883_240}


def param_count(c: Claim, logs: Logs) -> Measurement:
    n = PARAM_COUNTS[str(c.model)]
    return Measurement(
        n / 1e6, f"{n:,} parameters, measured with prunex.training.models.count_parameters (CIFAR stem, 10 classes)"
    )
