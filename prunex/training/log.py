"""Run logs: `RESULTS/<experiment>/<run_id>/` with config.json, meta.json and tidy parquet tables.

Every rank appends rows to its own part files (`parts/<table>.rank00003.parquet`), rewritten
atomically at each flush, so nothing needs to be communicated for logging and a killed job
leaves the finished iterations readable. When the run ends, rank 0 merges the parts into:

- `steps.parquet`: one row per iteration; train_loss is the mean over ranks, inter_bytes and
  intra_bytes the sums over ranks of the comm table, comm_s/compute_s/iter_s the means over
  ranks, epoch/wall_s/test_acc from rank 0 (test_acc is NaN where not evaluated);
- `comm.parquet`: one row per collective call and rank;
- any other table a method logs (`residuals`, `masks`, `wire`), concatenated over ranks.

Every row's `link_model` is the first attempt's `meta.json` record of what shaped the inter-node
links (`prunex.minicluster.wire.observed_link_model`), which the run's configuration does not change.

`merge_parts` can also be run on a partial run (analysis does so), and writes the DONE marker
only when asked by the finished run. Every file is written atomically: temp file, fsync, rename.
"""

from __future__ import annotations

import json
import math
import os
import platform
import socket
import subprocess
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

STEPS_COLUMNS = [
    "run_id",
    "method",
    "model",
    "dataset",
    "link_model",
    "iteration",
    "epoch",
    "wall_s",
    "train_loss",
    "test_acc",
    "inter_bytes",
    "intra_bytes",
    "comm_s",
    "compute_s",
    "iter_s",
]
COMM_COLUMNS = [
    "run_id",
    "link_model",
    "iteration",
    "rank",
    "node",
    "level",
    "op",
    "bytes",
    "seconds",
    "inter_bytes",
    "intra_bytes",
]
# comm.parquet columns that older logs lack (analysis requires COMM_COLUMNS only): exclusive_s, the seconds a
# call adds to its rank's union of collective spans (`prunex.comm.Comm.drain`)
COMM_LATER_COLUMNS = ["exclusive_s"]
# inference.parquet (prunex.bench.inference), here so that analysis reads it without importing torch
INFERENCE_COLUMNS = [
    "run_id",
    "arch",
    "variant",
    "device",
    "hardware",
    "threads",
    "load_1min",
    "batch",
    "repeats",
    "latency_ms",
    "latency_p10_ms",
    "latency_p90_ms",
    "throughput_per_s",
    "params",
    "flops",
    "params_ratio",
    "flops_ratio",
    "latency_ratio",
    "speedup",
]
RANK_STEP_COLUMNS = ["iteration", "rank", "epoch", "wall_s", "train_loss", "test_acc", "comm_s", "compute_s", "iter_s"]
DONE = "DONE"
# training finished, its `--export` not yet (`prunex.training.export_step`: the export job marks the run DONE)
TRAINED = "TRAINED"
# a pruning run's final mask (the `final_masks` table: layer, out_keep, in_keep, density), which `--mask-from` reads
FINAL_MASKS = "final_masks.parquet"


class LogError(RuntimeError):
    """A log file is missing, corrupt or not one of ours; the message names the file."""


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: str | Path, data: bytes) -> None:
    """Write `data` to `path` so that readers see the old file or the new one, never a torn one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def write_json(path: str | Path, obj: Any) -> None:
    write_atomic(path, (json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n").encode())


def write_parquet(path: str | Path, df: pd.DataFrame) -> None:
    import io

    buf = io.BytesIO()
    df.to_parquet(buf, index=False)
    write_atomic(path, buf.getvalue())


def read_parquet(path: str | Path, columns: Iterable[str] | None = None) -> pd.DataFrame:
    """Read a table and check that it has the expected columns; errors name the file."""
    path = Path(path)
    try:
        df = pd.read_parquet(path)
    except FileNotFoundError:
        raise LogError(f"{path}: missing") from None
    except Exception as e:  # pyarrow raises several types for corrupt files
        raise LogError(f"{path}: not a readable parquet file ({type(e).__name__}: {e})") from None
    if columns is not None:
        missing = [c for c in columns if c not in df.columns]
        if missing:
            raise LogError(f"{path}: not a prunex table, missing columns {missing}")
    return df


class RunLog:
    """Per-rank row buffers, flushed to this rank's part files."""

    def __init__(self, run_dir: str | Path, rank: int) -> None:
        self.run_dir = Path(run_dir)
        self.rank = rank
        self.tables: dict[str, list[dict]] = defaultdict(list)

    def load_existing(self, max_iteration: int) -> None:
        """On resume: take back this rank's flushed rows up to `max_iteration` (later ones are redone)."""
        for part in sorted((self.run_dir / "parts").glob(f"*.rank{self.rank:05d}.parquet")):
            df = read_parquet(part)
            if "iteration" in df.columns:
                df = df[df["iteration"] <= max_iteration]
            self.tables[part.name.split(".rank")[0]] = df.to_dict("records")

    def append(self, table: str, rows: Iterable[dict]) -> None:
        self.tables[table].extend(rows)

    def flush(self) -> None:
        parts = self.run_dir / "parts"
        for table, rows in self.tables.items():
            if rows:
                write_parquet(parts / f"{table}.rank{self.rank:05d}.parquet", pd.DataFrame(rows))


def _read_parts(run_dir: Path, table: str) -> pd.DataFrame | None:
    files = sorted((run_dir / "parts").glob(f"{table}.rank*.parquet"))
    if not files:
        return None
    return pd.concat([read_parquet(f) for f in files], ignore_index=True)


def merge_parts(run_dir: str | Path, *, done: bool = False) -> dict[str, pd.DataFrame]:
    """Merge the ranks' part files into the run's tables (see module docstring)."""
    run_dir = Path(run_dir)
    config = json.loads((run_dir / "config.json").read_text())
    meta_path = run_dir / "meta.json"
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    static = {
        "run_id": config["name"],
        "method": config["method"],
        "model": config["model"],
        "dataset": config["dataset"],
        # what shaped the inter-node links (meta.json: e.g. the mini cluster's tc), else what was asked
        "link_model": meta.get("link_model", config["link"]["model"]),
    }
    out: dict[str, pd.DataFrame] = {}
    comm = _read_parts(run_dir, "comm")
    if comm is None:
        comm = pd.DataFrame(columns=[c for c in COMM_COLUMNS if c not in ("run_id", "link_model")])
    comm.insert(0, "run_id", static["run_id"])
    comm.insert(1, "link_model", static["link_model"])
    out["comm"] = comm[COMM_COLUMNS + [c for c in COMM_LATER_COLUMNS if c in comm.columns]]
    ranks = _read_parts(run_dir, "rank_steps")
    if ranks is not None:
        per_iter = ranks.groupby("iteration")
        steps = pd.DataFrame(
            {
                "train_loss": per_iter["train_loss"].mean(),
                "comm_s": per_iter["comm_s"].mean(),
                "compute_s": per_iter["compute_s"].mean(),
                "iter_s": per_iter["iter_s"].mean(),
            }
        )
        rank0 = ranks[ranks["rank"] == 0].set_index("iteration")
        for col in ("epoch", "wall_s", "test_acc"):
            steps[col] = rank0[col]
        volume = comm.groupby("iteration")[["inter_bytes", "intra_bytes"]].sum()
        steps = steps.join(volume, how="left").fillna({"inter_bytes": 0.0, "intra_bytes": 0.0})
        steps = steps.reset_index()
        for k, v in static.items():
            steps[k] = v
        out["steps"] = steps[STEPS_COLUMNS].sort_values("iteration", ignore_index=True)
    for part in sorted((run_dir / "parts").glob("*.rank*.parquet")):
        table = part.name.split(".rank")[0]
        if table in ("comm", "rank_steps") or table in out:
            continue
        df = _read_parts(run_dir, table)
        if df is not None:
            if "run_id" not in df.columns:
                df.insert(0, "run_id", static["run_id"])
            out[table] = df
    for table, df in out.items():
        write_parquet(run_dir / f"{table}.parquet", df)
    if done:
        write_marker(run_dir / DONE)
    return out


def write_marker(path: Path) -> None:
    """A run's state marker (DONE, TRAINED), written atomically; it holds the time it was written."""
    write_atomic(path, f"{time.strftime('%Y-%m-%dT%H:%M:%S%z')}\n".encode())


def _git_state() -> dict[str, Any]:
    repo = Path(__file__).resolve().parents[2]
    try:
        sha = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        dirty = (
            subprocess.run(
                ["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"],
                capture_output=True,
                text=True,
                timeout=10,
                check=True,
            ).stdout.strip()
            != ""
        )
        return {"git_sha": sha, "git_dirty": dirty}
    except (OSError, subprocess.SubprocessError):
        return {"git_sha": None, "git_dirty": None}


def hardware_name(device_type: str) -> str:
    """The GPU's name, or the CPU model."""
    if device_type == "cuda":
        import torch

        return torch.cuda.get_device_name()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def collect_meta(topology: dict[str, Any], device: str, backend: str, link_model: str) -> dict[str, Any]:
    """What produced a run: code version, packages, machine, topology, device, Slurm job."""
    from importlib.metadata import PackageNotFoundError, version

    versions = {}
    for pkg in ("torch", "torchvision", "submitit", "pandas", "pyarrow", "numpy"):
        try:
            versions[pkg] = version(pkg)
        except PackageNotFoundError:
            versions[pkg] = None
    import torch

    return {
        **_git_state(),
        "python": platform.python_version(),
        "packages": versions,
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "topology": topology,
        "device": device,
        "hardware": hardware_name(device.split(":")[0]),
        "cpu_threads": torch.get_num_threads(),
        "backend": backend,
        "cuda": torch.version.cuda if torch.cuda.is_available() else None,
        "nccl": ".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else None,
        "link_model": link_model,
        "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
        "slurm_restart_count": os.environ.get("SLURM_RESTART_COUNT"),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def write_meta(run_dir: str | Path, meta: dict[str, Any]) -> Path:
    """Write this attempt's meta without overwriting an earlier attempt's: ``meta.json`` for the first,
    ``meta.attempt<k>.json`` (k = 2, 3, ...) for each later one (a requeued or relaunched run). Each
    records its ``attempt`` number. Returns the path written."""
    run_dir = Path(run_dir)
    path, attempt = run_dir / "meta.json", 1
    while path.exists():
        attempt += 1
        path = run_dir / f"meta.attempt{attempt}.json"
    write_json(path, {**meta, "attempt": attempt})
    return path


def finite_or_nan(x: float) -> float:
    return float(x) if x is not None and math.isfinite(x) else float("nan")


# export.json: the achieved sizes of an exported run (--export), which Fig. 12 and Fig. 13 place runs by
SAVED_FILES = ("config.json", "meta.json", "export.json", DONE)


def export_logs(src: str | Path, dst: str | Path) -> int:
    """Copy the finished logs of every run under `src` (json, merged parquet tables, DONE; not the
    per-rank parts, checkpoints or submitit files) to `dst`, and the experiments' links to them
    (`RESULTS/<experiment>/<name>` -> `../runs/<shared id>`). Returns the number of runs copied."""
    import shutil

    src, dst = Path(src), Path(dst)
    count = 0
    for done in sorted(src.rglob(DONE)):  # rglob does not follow the experiments' links: each run once
        run = done.parent
        target = dst / run.relative_to(src)
        target.mkdir(parents=True, exist_ok=True)
        for f in [
            *(run / n for n in SAVED_FILES),
            *sorted(run.glob("meta.attempt*.json")),
            *sorted(run.glob("*.parquet")),
        ]:
            if f.exists():
                shutil.copy2(f, target / f.name)
        count += 1
    for link in sorted(p for p in src.glob("*/*") if p.is_symlink()):
        if (link / DONE).exists():
            new = dst / link.relative_to(src)
            new.parent.mkdir(parents=True, exist_ok=True)
            if new.is_symlink():
                new.unlink()
            os.symlink(os.readlink(link), new)
    return count


if __name__ == "__main__":
    import sys

    if len(sys.argv) != 4 or sys.argv[1] != "export":
        sys.exit("usage: python -m prunex.training.log export RESULTS_DIR SAVED_DIR")
    print(f"exported {export_logs(sys.argv[2], sys.argv[3])} runs to {sys.argv[3]}")
