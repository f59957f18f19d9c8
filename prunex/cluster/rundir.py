"""Run identity: where a run lives and where each experiment that asks for it finds it.

A run lives in `RESULTS/runs/<shared id>` (`run_dir_for`), named by its resolved training configuration
(`RunConfig.shared_id`), not by the experiment that asks for it. Each experiment refers to it as
`RESULTS/<experiment>/<name>` (`experiment_path`), a relative symbolic link made by
`prunex.cluster.preflight.preflight` (`link_run`), so two experiments asking for the same training share
one run, trained once, and the analysis finds it under either name.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from prunex.training.config import SHARED_RUNS_DIR, ConfigError, RunConfig


def run_dir_for(config: RunConfig) -> Path:
    """The run's directory: one per training configuration, shared by every experiment asking for it."""
    return Path(config.results).resolve() / SHARED_RUNS_DIR / config.shared_id


def experiment_path(config: RunConfig) -> Path:
    """Where the asking experiment finds the run: `RESULTS/<experiment>/<name>`, a link to `run_dir_for`."""
    return Path(config.results).resolve() / config.experiment / config.run_id


def link_run(config: RunConfig) -> Path:
    """Make (or repoint) the experiment's relative link to the run directory; returns the link.

    A link to another run (the experiment now asks for a different training) is replaced
    atomically; the old run stays under RESULTS/runs. A real directory there is a run of the layout
    before shared runs: it is left alone and refused with one line.
    """
    link, target = experiment_path(config), run_dir_for(config)
    rel = Path(os.path.relpath(target, link.parent))
    if link.is_symlink():
        if Path(os.readlink(link)) == rel:
            return link
    elif link.exists():
        raise ConfigError(
            f"{link} is a run directory of the layout before shared runs (RESULTS/{SHARED_RUNS_DIR}/...): "
            "move it away or use another --results"
        )
    link.parent.mkdir(parents=True, exist_ok=True)
    tmp = link.parent / f".{link.name}.{uuid.uuid4().hex[:8]}.link"
    os.symlink(rel, tmp)
    os.replace(tmp, link)
    return link
