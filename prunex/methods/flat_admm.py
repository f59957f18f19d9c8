"""`flat_admm`: the paper's "PruneX (AR)" ablation (Fig. 1b, sec. 5.1.4).

The same local proximal SGD, pruning engine, residuals and penalties as `hsadmm`, with every
worker tied directly to the global z (`prunex.admm.flat.FlatADMM`): a dense AllReduce of
theta + u over the flat group each outer iteration, the projection applied to the global z after
synchronisation, no node level and no shrinkage.
"""

from __future__ import annotations

from prunex.admm.flat import FlatADMM
from prunex.methods.hsadmm import ADMMMethod


class FlatADMMMethod(ADMMMethod):
    name = "flat_admm"
    engine_class = FlatADMM
