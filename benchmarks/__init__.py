"""Recipes that measure: each module builds its runs from its own command line and prints a table.

Not part of the library (`prunex/` takes a config and knows nothing of argparse recipes or the
paper's profiles): `python -m benchmarks.methods` (every method's per-iteration cost on one
topology), `python -m benchmarks.checkpoints` (what checkpoints and evaluation cost a profile).
The library's own measuring tools stay in `prunex.bench` (collectives, shrink, inference).
"""
