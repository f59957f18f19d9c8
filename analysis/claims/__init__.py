"""Every numeric claim of the PruneX paper, encoded once as data, each naming the function that measures it.

A claim (`Claim`, `analysis.claims.base`, written with keyword arguments only) names the experiment whose
logs measure it, the function that measures it (`measure`), the paper's value and unit, and a tolerance
(`analysis.verdicts`):

- `rel`: |measured / paper - 1| <= tolerance;     `abs`: |measured - paper| <= tolerance;
- `at_least`: measured >= paper - tolerance;       `at_most`: measured <= paper + tolerance;
- `ordering`: a qualitative statement (paper_value is NaN), true or false in the logs.

Every tolerance carries its reason (`tolerance_reason`, shown in claims.csv and REPORT.md). A factor
claim (a ratio or speedup, unit "x") is reproduced only within +-25% of the paper's factor (kind `rel`,
tolerance <= 0.25; checked below); tighter where the paper's numbers themselves are closer together.
Where the logs hold repeats of a measurement (seeds), each repeat is judged and repeats on both sides
of the boundary give "not decidable here" (`analysis.verdicts`), as does one measurement that its function
finds too close to call (`Measurement.undecided`).

`needs` lists what a run must share with the paper's set-up for the value to be comparable:
`cifar10` (the dataset), `64gpus` (16 x 4 workers), `gpu` (CUDA devices), `v100` (the paper's GPU),
`inter_link` (inter-node collectives cross a real or modelled slow link, not one machine's
loopback), `multinode` (two nodes or more). A claim whose value is not comparable in the available logs is judged by its
`ordering` fallback when it has one (times in minutes are never comparable across hardware), and
is otherwise `not measurable in this profile`; `ordering_needs` is what the ordering itself needs
(a communication-time ordering means nothing without a slow inter-node link).

The claims are one table in the report's order (`analysis.claims.table`, `CLAIMS`); each names the function
that measures it, in the module of its topic of the paper:

- `volume`: communication volume (Fig. 6, sec. 5.3.1);
- `latency`: communication latency and its breakdown (Figs. 7, 8; sec. 5.3.2-5.3.3), and the regime check;
- `strong_scaling`: speedup and efficiency from 8 to 64 GPUs (Fig. 9, sec. 5.4);
- `time_to_accuracy`: accuracy over time and over volume (Fig. 5, sec. 5.2);
- `convergence`: residuals and mask drift (Figs. 10, 11; secs. 4.5, 5.5);
- `pareto`: the sparsity-accuracy trade-off, H-SADMM against pruning after training, inference (Fig. 12,
  sec. 5.6, Table 1);
- `model_sizes`: parameter counts (Table 2);
- `contradictions`: where the paper contradicts itself (no claims).

What all measure functions share, the logs (`Logs`) and a `Measurement`, is `analysis.measurements`. The
paper's numbers that several claims use (each model's row of Table 2 and Fig. 6b, Fig. 7's latencies) and
those the library or a figure uses too (Figs. 8, 9) are `prunex.paper`.

Paper: "PruneX: A Hierarchical Communication-Efficient System for Distributed CNN Training with
Structured Pruning" (Olama et al., 2025), 64 V100 GPUs (16 nodes x 4) of Puhti, CIFAR-10.
"""

from __future__ import annotations

from analysis.claims.base import FACTOR_TOLERANCE, Claim
from analysis.claims.contradictions import CONTRADICTIONS, Contradiction
from analysis.claims.latency import ddp_shares
from analysis.claims.strong_scaling import PAPER_COUNTS
from analysis.claims.table import CLAIMS
from analysis.measurements import EXPERIMENTS

CLAIMS_BY_ID = {c.id: c for c in CLAIMS}

__all__ = [
    "CLAIMS",
    "CLAIMS_BY_ID",
    "CONTRADICTIONS",
    "FACTOR_TOLERANCE",
    "PAPER_COUNTS",
    "Claim",
    "Contradiction",
    "ddp_shares",
]

assert len(CLAIMS_BY_ID) == len(CLAIMS), "claim ids must be unique"
assert all(c.tolerance_reason for c in CLAIMS), "every tolerance carries its reason"
assert all(
    c.kind == "rel" and c.tolerance <= FACTOR_TOLERANCE for c in CLAIMS if c.unit == "x" and c.kind != "ordering"
), "a factor claim is reproduced only within +-25% of the paper's factor"
assert all(c.experiment in ("", *EXPERIMENTS) for c in CLAIMS), "a claim's logs are an experiment the report loads"
