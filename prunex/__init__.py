"""prunex: the library of PruneX's paper-artifact suite (the recipes are `experiments/`, `benchmarks/`;
the figures `analysis/`). One folder per concern:

- `training/`: what a run is and how each rank trains it (config, topology, device, models, data, the
  per-rank loop, evaluation, checkpoints, logs);
- `comm/`: what crosses the links, what it costs (`comm.cost`), how long it takes (`comm.waitfree`,
  `comm.clocks`);
- `pruning/`: masks, projections, the channel graph, one-shot L1 pruning, the compact export;
- `admm/`: H-SADMM and flat consensus ADMM as named steps (Algorithm 1);
- `methods/`: every training method (registry, ddp, topk, flat_admm, hsadmm, pactrain, prune_finetune);
- `cluster/`: launching, Slurm, sites, estimates, locks, interrupts, the preflight checks, options;
- `perfmodel/`: the analytic performance model; `minicluster/`: a Slurm cluster on one machine;
- `bench/`: the library's measuring commands (collectives, shrink, exchange, inference);
- `run.py`: `python -m prunex.run`, one training run; `paper.py`: the paper's numbers the library prints.

`data.py`, `export.py`, `regime.py`, `train.py` and `doctor.py` at this level are the command paths users
typed before the folders (`python -m prunex.data download`, ...): they forward to the new modules (the
doctor's names its new command), so that no command line breaks.
"""
