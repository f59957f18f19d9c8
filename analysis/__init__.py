"""Figures and the claims report of the PruneX paper, from the logs under a results directory.

    python -m analysis.all --results results --out figures      # every figure, then the report
    python -m analysis.fig6b_volume_total --results results --out figures   # one figure
    python -m analysis.report --results results --out figures   # REPORT.md and claims.csv only

One module per figure (fig5a_time_to_accuracy ... fig13_sparsity_patterns); each writes
`<name>.png`, `<name>.pdf` and `<name>.csv` (exactly the plotted data, tidy). Analysis reads only
parquet and json files and never imports training code or torch.
"""
