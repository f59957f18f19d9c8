"""Where the paper contradicts itself (or its equations their derivation), and what the suite does about it.

Not claims: nothing here is measured. REPORT.md lists them (`analysis.report`); where both sides are
numbers, both are claims (`analysis.claims`) and each is measured.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class Contradiction:
    id: str
    first: str  # where and what
    second: str
    consequence: str  # what we do about it


CONTRADICTIONS: list[Contradiction] = [
    Contradiction(
        id="ddp_volume",
        first="sec. 5.2.2: DDP accumulates over 60 GB of inter-node traffic to reach its peak accuracy "
        "(ResNet-152, Fig. 5b)",
        second="sec. 5.3.1 / Fig. 6b: DDP's total inter-node traffic on ResNet-152 is 13.00 GB",
        consequence="both are claims; we measure both (gb_ddp_to_peak, volume_r152_ddp)",
    ),
    Contradiction(
        id="r152_50pct",
        first="sec. 5.6.1: ResNet-152 retains 81.39% at 50% pruning (a 4.6-point drop from 85.96%)",
        second="Fig. 12 caption: 82.8% at 50% structured (channel) sparsity",
        consequence="we compare with the text's 81.39% (it is consistent with its own 4.6-point drop)",
    ),
    Contradiction(
        id="eq9",
        first="eq. (9): z~_i = [rho_1 sum_j (theta_ij + u_ij) + rho_2 (z_i - v_i)] / gamma with "
        "gamma = lambda/M + rho_1 + rho_2",
        second="the minimiser of the augmented Lagrangian eq. (6) in z_i: "
        "rho_2 (z - v_i) in the numerator and gamma = lambda/M + P rho_1 + rho_2 (P intra-node terms)",
        consequence="prunex implements the derivation (prunex/admm/hsadmm.py), not eq. (9) as printed",
    ),
    Contradiction(
        id="eq6_eq7",
        first="eq. (6) scales the data term by 1/N",
        second="eq. (7), the theta step of the same Lagrangian, has f_ij without 1/N",
        consequence="prunex follows eq. (7) (see prunex/admm/hsadmm.py)",
    ),
    Contradiction(
        id="table2",
        first="Table 2: ~11M, ~69M, ~60M parameters for ResNet-18, WRN-50-2, ResNet-152 trained on CIFAR-10",
        second="the CIFAR-10 models (3x3 stem, 10 classes) have 11.17M, 66.85M, 58.16M; the "
        "table's numbers are torchvision's ImageNet variants (11.69M, 68.88M, 60.19M)",
        consequence="we report the measured CIFAR-10 counts",
    ),
    Contradiction(
        id="colours",
        first="Fig. 5 caption: PruneX green, DDP blue, Top-K pink",
        second="Fig. 7 caption: PruneX blue, DDP red, PruneX (AR) yellow",
        consequence="one colour per method in every figure (analysis/style.py)",
    ),
    Contradiction(
        id="drift_figure",
        first='sec. 4.5: mask drift converges to zero within 5-15 iterations "(see Figure 6)"',
        second="Figure 6 shows data volume, no figure shows mask drift",
        consequence="we measure drift from masks.parquet (claim mask_drift_zero)",
    ),
    Contradiction(
        id="fig10_panels",
        first="sec. 5.5.1: Fig. 10 (a),(b) intra-node residuals of fc and conv, (c),(d) inter-node",
        second="Fig. 10 caption: (a) intra-node and (b) inter-node residuals",
        consequence="fig10 follows the text: four panels (a)-(d)",
    ),
    Contradiction(
        id="baselines",
        first='sec. 5.1.4: "two distinct baselines"',
        second="it then lists three: DDP, Top-K and PruneX (AR)",
        consequence="the suite runs ddp, topk and flat_admm (and pactrain)",
    ),
    Contradiction(
        id="scaling_efficiency",
        first="sec. 5.4: DDP 5.81x speedup",
        second="sec. 5.4: 72.7% efficiency, but 5.81/8 = 72.6%",
        consequence="minor rounding; tolerances absorb it",
    ),
]
