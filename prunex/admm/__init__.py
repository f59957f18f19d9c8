"""ADMM consensus engines (paper sec. 3-4, Alg. 1), written as named steps.

Where each concept lives:

| concept | paper | where |
|---|---|---|
| Alg. 1 phases 2-5, one round | Alg. 1 | `prunex.admm.hsadmm.HSADMM.consensus` |
| flat consensus ("PruneX (AR)") | Fig. 1b | `prunex.admm.flat.FlatADMM.consensus` |
| intra-node sum of theta + u | Alg. 1 lines 6-7 | `prunex.admm.steps.sum_theta_plus_u` |
| z_i step | eq. (9), as derived | `prunex.admm.steps.z_node_step` |
| projection | eq. (10) | `prunex.pruning.project_groups` |
| the frozen mask, all layers at once | Alg. 1 line 11, sec. 4.5 | `prunex.admm.steps.mask_frozen_in_buckets` |
| mask freezing | sec. 4.5, Alg. 1 line 10 | `prunex.admm.freeze.MaskFreeze` |
| mask union | eq. (14) | `prunex.admm.steps.sync_masks` |
| compress, leaders' AllReduce, decompress | eq. (15), sec. 4.4 | `prunex.admm.steps.inter_node_average` |
| dual updates | eqs. (12)-(13) | `prunex.admm.steps.dual_update` |
| residuals, tolerances, penalty balancing | sec. 3.4 | `prunex.admm.residuals` |
| per-layer norms, one read | Alg. 1 line 28 | `prunex.admm.engine.NormReader`, `prunex.admm.layer_norms` |
| state, masks, residual table, checkpoint | sec. 4.1.2 | `prunex.admm.engine.ConsensusEngine` |
| the group mask | sec. 4.4.1 | `prunex.pruning.masks.GroupMask` |
"""
