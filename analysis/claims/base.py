"""The claim record `analysis.claims.table` writes every claim with, and what they share.

A `Claim` is written with keyword arguments only (`kw_only`): each field says what it is where the
claim is written. The fields, and how a claim is judged (`kind`, `tolerance`, `needs`), are described in
`analysis.claims`; the verdicts are `analysis.verdicts`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from analysis.measurements import Logs, Measurement

NAN = math.nan
QUALITATIVE = "qualitative: the statement holds or it does not, no tolerance"
FACTOR_TOLERANCE = 0.25  # the most a factor claim (unit "x") may be off and still be reproduced
PAPER_SETUP = ("cifar10", "64gpus", "gpu")


@dataclass(frozen=True, kw_only=True)
class Claim:
    id: str
    source: str  # where the paper states it
    text: str  # the claim in words
    paper_value: float  # NaN for qualitative claims
    unit: str
    experiment: str  # the results/<experiment> directory that measures it ("" = no logs needed)
    measure: Callable[[Claim, Logs], Measurement]  # what measures it (the topic module's function)
    tolerance: float = 0.0
    kind: str = "rel"  # rel | abs | at_least | at_most | ordering
    method: str | None = None
    model: str | None = None
    arg: str | float | None = None  # measure-specific (a category, a pruning ratio, ...)
    needs: tuple[str, ...] = ()
    ordering_fallback: bool = False  # judge by the qualitative ordering when the value is not comparable
    ordering_needs: tuple[str, ...] = ()  # what the ordering itself needs to mean something
    note: str = ""
    tolerance_reason: str = ""  # why this tolerance (every claim has one; qualitative claims say so)
