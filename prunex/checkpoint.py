"""Per-rank checkpoints for preemption and time limits (submitit `Checkpointable` requeues the job).

Each rank saves, atomically, at every evaluation point (epoch end for the SGD methods, every outer
iteration for ADMM): the iteration, the training wall time, its method's full state (model,
optimizer, ADMM state, duals, penalties and masks, Top-K residuals, PacTrain masks) and its RNG
states. A requeued job finds them, checks that they belong to the same configuration, truncates
the part logs to the checkpointed iteration and goes on: on the CPU the final parameters and logs
equal those of an uninterrupted run (times aside). A kill can land between two ranks' saves, so
each rank keeps its last two checkpoints and every rank resumes from the newest iteration that all
ranks saved (found on the shared file system: no communication). Checkpoints are read with
`torch.load(weights_only=True)`, so they hold only tensors and plain containers. They are deleted
when the run finishes.
"""

from __future__ import annotations

import io
import random
from pathlib import Path
from typing import Any

import numpy as np
import torch

from prunex.config import RunConfig
from prunex.log import write_atomic


class CheckpointMismatch(RuntimeError):
    """A checkpoint from another configuration."""


def path_for(run_dir: Path, rank: int, iteration: int) -> Path:
    return run_dir / "checkpoints" / f"rank{rank:05d}-it{iteration:07d}.pt"


def _iterations(run_dir: Path, rank: int) -> list[int]:
    return sorted(int(p.stem.split("-it")[1]) for p in (run_dir / "checkpoints").glob(f"rank{rank:05d}-it*.pt"))


def rng_state() -> dict[str, Any]:
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state = {
        "torch": torch.get_rng_state(),
        "numpy": {
            "keys": torch.from_numpy(keys.astype(np.int64)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached": float(cached),
        },
        "python": [list(x) if isinstance(x, tuple) else x for x in random.getstate()],
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    n = state["numpy"]
    np.random.set_state(("MT19937", n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"], n["cached"]))
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save(run_dir: Path, rank: int, config: RunConfig, iteration: int, wall: float, method_state: dict) -> None:
    buf = io.BytesIO()
    torch.save(
        {"config": config.to_dict(), "iteration": iteration, "wall": wall, "method": method_state, "rng": rng_state()},
        buf,
    )
    write_atomic(path_for(run_dir, rank, iteration), buf.getvalue())
    for old in _iterations(run_dir, rank)[:-2]:
        path_for(run_dir, rank, old).unlink(missing_ok=True)


def newest_common_iteration(run_dir: Path, world_size: int) -> int | None:
    """The newest iteration every rank has a checkpoint of (where a resumed run goes on), or None."""
    common = set(_iterations(run_dir, 0))
    for r in range(1, world_size):
        common &= set(_iterations(run_dir, r))
    return max(common) if common else None


def load(run_dir: Path, rank: int, config: RunConfig, device: torch.device) -> dict[str, Any] | None:
    """This rank's checkpoint of the newest iteration every rank saved, or None; a checkpoint of
    another configuration is refused."""
    newest = newest_common_iteration(run_dir, config.world_size)
    if newest is None:
        return None
    path = path_for(run_dir, rank, newest)
    state = torch.load(path, map_location=device, weights_only=True)
    differ = config.diff(RunConfig.from_dict(state["config"]), ignore=("executor", "results", "link"))
    if differ:
        raise CheckpointMismatch(f"{path} belongs to another configuration: fields {', '.join(differ)} differ")
    return state
