"""The refusals before anything is launched or written, and the run directory they end by making.

`preflight` (what `prunex.cluster.launch` and the experiment driver call first for every run): the
dataset is there (digits made once), the configuration trains at least one iteration
(`check_iterations`), `--layers GLOB` matches a convolution (`check_layers`), then a writable run
directory, linked from the asking experiment (`prunex.cluster.rundir.link_run`). `check_start`:
`--init-from RUN` names a finished run. `check_writable`: a command's own outputs (a benchmark's `--results`
folder, its `--out` table) can be written, so that nothing measured is lost at the end. Each refusal is one
`ConfigError` line. (The one-screen check a person runs before spending GPU-hours, over a whole profile, is
`prunex.cluster.doctor`.)
"""

from __future__ import annotations

import errno
import json
import os
import tempfile
from collections.abc import Collection
from pathlib import Path

from prunex.cluster.rundir import link_run, run_dir_for
from prunex.methods.registry import method_info
from prunex.startup import collector_paused, started_as_command
from prunex.training.config import ConfigError, RunConfig
from prunex.training.log import DONE, FINAL_MASKS


def check_iterations(config: RunConfig, sizes: dict[tuple[str, str, int], int] | None = None) -> None:
    """Refuse a configuration that would train nothing: every rank's shard must hold a mini-batch
    (`prunex.training.data.batches_per_epoch`, the sharding `shard_loader` does). `sizes`: a memo of
    training-set sizes shared by the runs of one driver."""
    from prunex.training.data import batches_per_epoch, train_size  # lazy: torchvision, only to check a run

    key = (config.dataset, config.data_root, config.train_subset)
    sizes = {} if sizes is None else sizes
    if key not in sizes:
        sizes[key] = train_size(*key)
    n = sizes[key]
    if batches_per_epoch(n, config.world_size, config.batch_size) == 0:
        used = (
            f"--train-subset {config.train_subset} leaves {n}" if config.train_subset else f"{config.dataset} has {n}"
        )
        raise ConfigError(
            f"run {config.name} would train 0 iterations: {used} training images for {config.world_size} ranks, "
            f"so every rank's shard is empty; use at least {config.world_size} images or fewer ranks"
        )


def check_layers(config: RunConfig, memo: dict | None = None) -> None:
    """Refuse `--layers GLOB` when it matches no convolution weight of the model: nothing would be pruned
    (the model is built on the meta device: no memory, no weights). `memo`: checked (model, glob) pairs."""
    glob = config.admm.layers
    if glob is None or "admm" not in method_info(config.method).reads:
        return
    memo = {} if memo is None else memo
    if (config.model, glob) in memo:
        return
    import fnmatch

    import torch  # the model's layer names: only for a run that names layers

    from prunex.training.models import build_model  # lazy: torchvision, only for a run that names layers

    with torch.device("meta"):
        model = build_model(config.model)
    convs = [f"{n}.weight" for n, m in model.named_modules() if isinstance(m, torch.nn.Conv2d)]
    if not any(fnmatch.fnmatchcase(name, glob) for name in convs):  # the match of prunex.pruning.layers
        raise ConfigError(
            f"--layers {glob!r} matches no convolution weight of {config.model}, so nothing would be pruned; "
            f"its {len(convs)} are named like {', '.join(convs[:3])} (fnmatch, case-sensitive)"
        )
    memo[(config.model, glob)] = True


def check_start(config: RunConfig, names: Collection[str] | None = None) -> None:
    """The runs this one reads when it starts (`RunConfig.depends_on`) are finished runs of the same experiment that
    hold what it reads: `--init-from RUN` a final model (its checksum verified) of this run's model, `--flops-from
    RUN` its export (`export.json`), `--mask-from RUN` its final mask (`final_masks.parquet`) of this run's model.
    Refused in one line otherwise, before anything is made (experiments submit a run after the runs it depends on
    have finished): each of these used to fail in the job, after the launch (a start of another model in
    `load_state_dict`, a run exported or masked by nothing in `prunex.methods.prune_finetune`). `names`: check only
    these of its runs (an experiment's driver, before anything is made, checks those it does not run itself)."""
    if not config.depends_on:
        return
    from prunex.pruning.export import EXPORT_JSON, ExportError, verify_checksum  # torch.export: only here

    pf = config.prune_finetune if "prune_finetune" in method_info(config.method).reads else None
    reads = [
        ("--init-from", config.init_from, "final_model.pt", "", True),
        ("--flops-from", pf.flops_from if pf else "", EXPORT_JSON, "it ran without --export", False),
        ("--mask-from", pf.mask_from if pf else "", FINAL_MASKS, "a run that prunes nothing has none", True),
    ]
    for option, name, needed, why, same_model in reads:
        if not name or (names is not None and name not in names):
            continue
        run = Path(config.results).resolve() / config.experiment / name
        if not (run / DONE).exists():
            raise ConfigError(f"{option} {name}: {run} is not a finished run (no DONE)")
        model = _model_of(run)
        if same_model and model is not None and model != config.model:
            raise ConfigError(f"{option} {name}: a run of {model}, where this run trains {config.model}")
        if not (run / needed).exists():
            raise ConfigError(f"{option} {name}: {run} has no {needed}{f': {why}' if why else ''}")
    if config.init_from and (names is None or config.init_from in names):
        try:
            verify_checksum(Path(config.results).resolve() / config.experiment / config.init_from / "final_model.pt")
        except ExportError as e:
            raise ConfigError(f"--init-from {config.init_from}: {e}") from None


def _model_of(run: Path) -> str | None:
    """The model a run trained (its `config.json`), or None where that cannot be read."""
    try:
        return json.loads((run / "config.json").read_text()).get("model")
    except (OSError, ValueError, AttributeError):
        return None


def check_writable(path: str | Path, option: str, folder: bool = True) -> None:
    """Refuse, before anything is launched, an output that could not be written when the command ends: `path` a
    folder (`--results`; `folder`) or a file (`--out`). The nearest part of `path` that exists must be a folder
    in which a file can be made (probed with a temporary file, removed at once), and a file that exists must be
    writable. Nothing is created: a refusal leaves no folder behind. One `ConfigError` line that names `option`.
    A dangling symbolic link among the folders is refused too (making a folder there fails, `mkdir` finds the link);
    a file that is a dangling link is checked where it points, where writing it makes the file."""
    p = Path(path).expanduser().absolute()
    if not folder and p.is_symlink() and not p.exists():  # a dangling link to a file: writing it makes its target
        target = Path(os.path.realpath(p))
        if not target.parent.is_dir():  # ...in a folder that must exist: the writer makes the link's folder only
            raise ConfigError(
                f"{option} {path} is a link to {os.readlink(p)}, whose folder does not exist; name another"
            )
        p = target
    if p.is_dir() != folder and p.exists():
        raise ConfigError(f"{option} {path} is {'not a directory' if folder else 'a directory'}; name another")
    base = p if folder else p.parent
    dangling = next((a for a in (base, *base.parents) if a.is_symlink() and not a.exists()), None)
    if dangling is not None:
        raise ConfigError(
            f"{option} {path}: {dangling} is a link to {os.readlink(dangling)}, which does not exist; "
            "make its target or name another path"
        )
    existing = next(a for a in (base, *base.parents) if a.exists())
    if not existing.is_dir():
        raise ConfigError(f"{option} {path}: {existing} is a file, not a directory; name another path")
    try:
        fd, probe = tempfile.mkstemp(dir=existing, prefix=".prunex-write-test-")
        os.close(fd)
        os.unlink(probe)
        if not folder and p.exists() and not os.access(p, os.W_OK):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))
    except OSError as e:
        raise ConfigError(
            f"{option} {path} is not writable: {e.strerror or e}; name another or make {existing} writable"
        ) from None


def unwritable_results(path: Path, e: OSError) -> ConfigError:
    """The one line for a results folder (or a run's folder in it) that could not be made or written: a file in
    the way is named (chmod would not help), anything else asks for another --results or write permission."""
    path = Path(path).absolute()
    blocker = next((a for a in (path, *path.parents) if a.exists() and not a.is_dir()), None)
    if blocker is not None:
        return ConfigError(
            f"results path {str(path)!r} is not writable: {blocker} is a file, not a directory; use another --results"
        )
    return ConfigError(
        f"results path {str(path)!r} is not writable: {e.strerror or e}; "
        f"use another --results or make it writable (chmod u+w {path})"
    )


def check_outputs(results: str | Path | None = None, out: str | Path | None = None) -> None:
    """`check_writable` for a command's `--results` folder and its `--out` file, those it was given."""
    if results:
        check_writable(results, "--results")
    if out:
        check_writable(out, "--out", folder=False)


def preflight(config: RunConfig, memo: dict | None = None) -> Path:
    """Checks before anything is launched or written: the dataset (digits made once), a configuration
    that trains at least one iteration, then a writable run directory, linked from the asking
    experiment (`link_run`). Returns the run dir. `memo`:
    shared by the runs of one driver, so that each dataset is checked once."""
    # a launcher's torch and torchvision, loaded cheaper; frozen only in our own commands, not in a user's notebook
    with collector_paused(freeze=started_as_command()):  # (`prunex.startup`)
        from prunex.training.data import DatasetMissing, load_dataset  # lazy: torchvision, only to check a run

    memo = {} if memo is None else memo
    try:
        if (config.dataset, config.data_root) not in memo:
            load_dataset(config.dataset, config.data_root, train=False)  # also makes digits once
            memo[(config.dataset, config.data_root)] = True
        check_iterations(config, memo.setdefault("train_sizes", {}))
        check_layers(config, memo.setdefault("layers", {}))
    except DatasetMissing as e:
        raise ConfigError(str(e)) from None
    run_dir = run_dir_for(config)
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        probe = run_dir / ".write-test"
        probe.write_text("ok")
        probe.unlink()
    except OSError as e:
        raise unwritable_results(Path(config.results), e) from None
    link_run(config)
    return run_dir
