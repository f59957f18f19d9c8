"""The training core: what one run is and how each rank trains it.

`config` (the run configuration, torch-free), `topology` (nodes, ranks, process groups), `device` (the
device of each rank, agreed on before any collective), `models`, `data`, `batch_transforms` (a batch made with
tensor ops, bitwise the images one by one), `train` (the per-rank loop),
`evaluation` (shared by the ranks), `checkpoint` (by owner, on a clock), `log` (the run's tables),
`faults` (the tests' fault injection, one seam). The methods it trains are `prunex.methods`.
"""
