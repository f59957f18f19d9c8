"""Two sets of runs side by side, run by run: the same trainings made again (another machine, another commit).

    python -m analysis.compare_runs RESULTS/runs saved-logs/regime/runs --out runs.csv

Each run of the first directory is paired with the run of the second that has the same training: the same
`config.json`, read as a `RunConfig` (so a field added after a run was made holds its default, the behaviour the
run had), but for what does not change a run's training (`NOT_TRAINING`: the link, the evaluation cadence (since
4a83fde evaluating draws none of training's random numbers), paths, the experiment that asked for it; a start
`init_from` is compared by the start run's name without its hash). Per pair: the final test
accuracy and training `wall_s` of each, and whether the first logged training loss and all of them are
bitwise equal. Across CPUs of other generations the losses need not
be: oneDNN and MKL pick other kernels, a first loss can differ in its last bits, and training amplifies it
(`tests/test_golden_runs.py`: issue 25). The table says how far the final accuracies then move, which is
how far a single-seed verdict can be trusted. A run without a partner, or without a finished log, is a
one-line error (exit code 2).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd

from analysis.common import last_test_acc
from prunex.cluster.exits import one_line
from prunex.cluster.preflight import check_outputs
from prunex.training.config import ArgumentParser, ConfigError, RunConfig
from prunex.training.log import LogError, read_parquet

NOT_TRAINING = ("results", "data_root", "link", "eval_every", "experiment", "init_from", "name")
STEP_COLUMNS = ("iteration", "test_acc", "train_loss", "wall_s")  # what the comparison reads of steps.parquet


class CompareError(ValueError):
    """A run that cannot be paired or read."""


def training_key(run: Path) -> str:
    """What decides a run's training, from its config.json, as one comparable string."""
    try:  # through RunConfig: a field added after the run was made holds its default (the behaviour it had)
        raw = json.loads((run / "config.json").read_text())
        start = raw.get("init_from") or ""  # compared by name below, whatever form it was written in
        raw["init_from"] = Path(start).name if start else ""
        config = RunConfig.from_dict(raw).to_dict()
    except (ConfigError, json.JSONDecodeError, AttributeError) as e:
        raise CompareError(f"{run}: config.json: {one_line(e)}") from None
    key = {k: v for k, v in config.items() if k not in NOT_TRAINING}
    key["init_from"] = Path(start).name.rsplit("-", 1)[0] if start else ""  # the start's run name, no hash
    return json.dumps(key, sort_keys=True)


def _runs(root: Path) -> list[Path]:
    runs = sorted(p for p in root.iterdir() if (p / "config.json").exists()) if root.is_dir() else []
    if not runs:
        inside = root / "runs"  # a results directory given for its runs/ folder: say where they are
        hint = f"; {inside} holds a results directory's runs" if any(inside.glob("*/config.json")) else ""
        raise CompareError(f"{root}: no run directories (each with a config.json){hint}")
    return runs


def _steps(run: Path) -> pd.DataFrame:
    path = run / "steps.parquet"
    if not (run / "DONE").exists() or not path.exists():
        raise CompareError(f"{run}: not a finished run (no DONE or steps.parquet)")
    try:  # the project's reader: a damaged table or one without these columns is an error naming the file
        return read_parquet(path, STEP_COLUMNS)
    except LogError as e:
        raise CompareError(str(e)) from None


def compare(runs: Path, saved: Path) -> pd.DataFrame:
    """One row per run of ``runs``, beside its partner in ``saved`` (module docstring)."""
    partners: dict[str, Path] = {}
    for run in _runs(saved):
        partners.setdefault(training_key(run), run)
    rows = []
    for run in _runs(runs):
        partner = partners.get(training_key(run))
        if partner is None:
            raise CompareError(f"{run.name}: no run of the same training in {saved}")
        config = json.loads((run / "config.json").read_text())
        new, old = _steps(run), _steps(partner)
        same_length = len(new) == len(old)
        rows.append(
            {
                "run": run.name,
                "saved_run": partner.name,
                "experiment": config.get("experiment", ""),
                "method": config["method"],
                "dataset": config["dataset"],
                "seed": config["seed"],
                "final_test_acc": last_test_acc(new),
                "saved_final_test_acc": last_test_acc(old),
                "wall_s": float(new["wall_s"].max()),
                "saved_wall_s": float(old["wall_s"].max()),
                "first_loss_bitwise_equal": bool(new["train_loss"].iloc[0] == old["train_loss"].iloc[0]),
                "all_losses_equal": same_length and bool((new["train_loss"].values == old["train_loss"].values).all()),
            }
        )
    return pd.DataFrame(rows)


def summary(table: pd.DataFrame) -> list[str]:
    """The lines printed under the table: what is equal, the time ratio, how far the accuracies moved."""
    diff = (table["final_test_acc"] - table["saved_final_test_acc"]) * 100
    lines = [
        f"{len(table)} runs paired; first loss bitwise equal in {int(table['first_loss_bitwise_equal'].sum())}, "
        f"every loss in {int(table['all_losses_equal'].sum())}, the final accuracy in {int((diff == 0).sum())}",
        f"training wall_s summed: {table['wall_s'].sum() / 60:.1f} min against {table['saved_wall_s'].sum() / 60:.1f} "
        f"min ({table['wall_s'].sum() / table['saved_wall_s'].sum():.2f}x)",
        f"final accuracy minus the saved run's, points: median {diff.median():+.1f}, median |.| "
        f"{diff.abs().median():.1f}, from {diff.min():+.1f} to {diff.max():+.1f}",
    ]
    for (method, dataset), group in table.groupby(["method", "dataset"]):
        d = diff[group.index].abs()
        lines.append(
            f"  {method} on {dataset}: {len(group)} runs, |difference| median {d.median():.1f}, max {d.max():.1f}"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(prog="python -m analysis.compare_runs", description=__doc__.splitlines()[0])
    parser.add_argument("runs", type=Path, help="the runs made again (a results directory's runs/)")
    parser.add_argument("saved", type=Path, help="the runs to compare with (e.g. saved-logs/regime/runs)")
    parser.add_argument("--out", type=Path, help="write the table as CSV here")
    args = parser.parse_args(argv)
    try:
        check_outputs(out=args.out)
        table = compare(args.runs, args.saved)
    except (CompareError, ConfigError) as e:
        print(one_line(f"compare_runs: {e}"), file=sys.stderr)
        return 2
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        table.to_csv(args.out, index=False)
    print("\n".join(summary(table)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
