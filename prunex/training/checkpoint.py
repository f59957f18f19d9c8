"""Checkpoints of a run's unique state: each piece written once, by its owner, on a wall-clock cadence.

Layout of one checkpoint set, `RUN/checkpoints/it<iteration:07d>/`:

- `replicated.pt`: state that is identical on every rank, written by rank 0;
- `node<m:05d>.pt`: state identical on the ranks of node m, written by its leader;
- `rank<r:05d>.pt`: rank r's own state, with its RNG states and training wall time, written by rank r;
- `<file>.sha256`: the SHA-256 of each file, computed by its owner from the bytes it wrote;
- `COMPLETE`: the manifest (iteration, reason, every file's size and SHA-256), written by rank 0 once all
  are on disk.

Which state is whose is each method's `state_dict()` (`prunex.methods`): the model and optimizer of
ddp, topk and pactrain and the global z of the ADMM methods are replicated; z_i (`z_node`) and v are
the node's; theta, u, momentum, Top-K's error-feedback residuals, BatchNorm statistics and the RNG
states are each rank's. At 16 x 4 this writes one copy of the replicated state instead of 64
(`python -m benchmarks.checkpoints` prints the bytes per method).

When (`prunex.training.train`): at an evaluation point, once a rank's clock says `checkpoint_every_min`
minutes have passed since the last set (0: at every evaluation point, for tests), or once a rank
has received submitit's preemption or time-limit signal (`Preemption`). The ranks agree through the
evaluation's AllReduce, so all of them save or none. Saving is outside the timed region: each
owner writes its files (temp file, fsync, rename), a barrier, rank 0 writes `COMPLETE` and removes
every other set, a second barrier; no rank's save is charged to another rank's next collective or
`wall_s`, and only the newest complete set is kept (a kill between `COMPLETE` and the removal leaves
two; the next save removes the older one).

Resuming: the newest set whose manifest exists and whose files are all there; every rank reads
`replicated.pt`, its node's file and its own with `torch.load(weights_only=True)` (tensors and plain
containers only), after checking the size and SHA-256 the manifest holds for it: a damaged file is
`CheckpointCorrupt`, one line naming it and what to do (issue 29). A set of another training
configuration is refused, naming the fields. On the CPU
the resumed run ends bitwise like an uninterrupted one. The checkpoints are deleted when the run
finishes.
"""

from __future__ import annotations

import hashlib
import io
import json
import random
import re
import shutil
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prunex.training.config import OPERATIONAL, WHO_ASKED, RunConfig
from prunex.training.log import write_atomic, write_json
from prunex.training.topology import Topology

if TYPE_CHECKING:
    import torch
# numpy and torch are imported where a checkpoint is written or read: the launcher imports this module for the
# paths and markers only (`newest_complete`, `Preempted`), and one that refuses, waits or reattaches needs no torch

ROLES = ("replicated", "node", "rank")
MANIFEST = "COMPLETE"
COMMIT_WAIT_S = 30.0  # how long rank 0 waits for the other ranks' files to appear before failing
_SET_RE = re.compile(r"^it(\d{7})$")
# fields that may differ between the run that wrote a checkpoint and the one resuming it: who asked,
# how the job is operated, the executor, and the link model (rewritten at run time on a mini cluster)
RESUME_IGNORES = WHO_ASKED + OPERATIONAL + ("executor", "link")


class CheckpointMismatch(RuntimeError):
    """A checkpoint from another configuration."""


class CheckpointCorrupt(RuntimeError):
    """A committed checkpoint file that is not what was written: its size or SHA-256 differs from the
    manifest's, or it cannot be read. The message names the file and what to do."""


class Preempted(Exception):
    """Raised by the trainer on every rank after the checkpoint that a preemption signal asked for."""


# -- layout -----------------------------------------------------------------------------------------
def root(run_dir: Path) -> Path:
    return Path(run_dir) / "checkpoints"


def set_dir(run_dir: Path, iteration: int) -> Path:
    return root(run_dir) / f"it{iteration:07d}"


def file_name(role: str, topo: Topology) -> str:
    """The file `topo`'s rank writes for `role`."""
    return {"replicated": "replicated.pt", "node": f"node{topo.node:05d}.pt", "rank": f"rank{topo.rank:05d}.pt"}[role]


def owned_roles(topo: Topology) -> list[str]:
    """The roles whose file this rank writes: replicated on rank 0, node on leaders, rank everywhere."""
    return [r for r, mine in zip(ROLES, (topo.rank == 0, topo.is_leader, True), strict=True) if mine]


def checksum_name(name: str) -> str:
    """The file beside checkpoint file `name` that holds its SHA-256 (hex)."""
    return f"{name}.sha256"


def expected_files(nodes: int, procs_per_node: int) -> list[str]:
    """Every file of a complete set of an M x P run."""
    return (
        ["replicated.pt"]
        + [f"node{m:05d}.pt" for m in range(nodes)]
        + [f"rank{r:05d}.pt" for r in range(nodes * procs_per_node)]
    )


def newest_complete(run_dir: Path) -> Path | None:
    """The newest checkpoint set with a manifest whose files are all present, or None.

    Read while a run commits a newer set (`commit`: its manifest, then the older sets removed), the newer set
    may still lack its manifest when it is read and the older one be gone when it is: a set that vanished
    while it was read means the sets changed, so they are listed again."""
    base = root(run_dir)
    while base.is_dir():
        sets = sorted((p for p in base.iterdir() if _SET_RE.match(p.name)), key=lambda p: p.name, reverse=True)
        for d in sets:
            try:
                manifest = json.loads((d / MANIFEST).read_text())
                if all((d / name).is_file() for name in manifest.get("files", {})):
                    return d
            except (OSError, ValueError):
                pass
            if not d.is_dir():  # removed meanwhile: a newer set was committed
                break
        else:
            return None
    return None


# -- RNG --------------------------------------------------------------------------------------------
def rng_state() -> dict[str, Any]:
    import numpy as np
    import torch

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
    import numpy as np
    import torch

    torch.set_rng_state(state["torch"])
    n = state["numpy"]
    np.random.set_state(("MT19937", n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"], n["cached"]))
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


# -- saving -----------------------------------------------------------------------------------------
@dataclass
class SaveStats:
    """What this rank wrote for one checkpoint set (logged to the run's `checkpoints` table)."""

    iteration: int
    reason: str
    files: int
    bytes: int
    write_s: float


def _serialise(obj: dict[str, Any]) -> bytes:
    import torch

    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def write_own(
    run_dir: Path, topo: Topology, config: RunConfig, iteration: int, wall: float, state: dict[str, dict], reason: str
) -> SaveStats:
    """Write this rank's files of the set of `iteration` (no communication).

    `state` maps each role to its part of the method's state (`Method.state_dict()`); the rank file
    also holds the RNG states and this rank's training wall time.
    """
    t0 = time.perf_counter()
    missing = set(ROLES) - set(state)
    if missing:
        raise ValueError(f"method state without the roles {sorted(missing)}")
    d = set_dir(run_dir, iteration)
    head = {"config": config.to_dict(), "iteration": iteration, "reason": reason}
    written = 0
    roles = owned_roles(topo)
    for role in roles:
        obj = {**head, "role": role, "state": state[role]}
        if role == "rank":
            obj.update(wall=wall, rng=rng_state())
        data = _serialise(obj)
        name = file_name(role, topo)
        write_atomic(d / name, data)
        write_atomic(d / checksum_name(name), hashlib.sha256(data).hexdigest().encode())  # of the bytes written
        written += len(data)
    return SaveStats(iteration, reason, len(roles), written, time.perf_counter() - t0)


def commit(run_dir: Path, topo: Topology, iteration: int, reason: str) -> dict[str, Any]:
    """On rank 0, once every rank has written its files: the manifest, then drop every other set."""
    d = set_dir(run_dir, iteration)
    expected = expected_files(topo.nodes, topo.procs_per_node)
    deadline = time.monotonic() + COMMIT_WAIT_S
    while absent := [n for n in expected + [checksum_name(n) for n in expected] if not (d / n).is_file()]:
        if time.monotonic() > deadline:  # a barrier came before: the file system lost writes
            raise RuntimeError(f"checkpoint {d} is missing {', '.join(absent)} after every rank wrote it")
        time.sleep(0.5)  # a shared file system may show another node's new file a moment late
    manifest = {
        "iteration": iteration,
        "reason": reason,
        "nodes": topo.nodes,
        "procs_per_node": topo.procs_per_node,
        "files": {n: (d / n).stat().st_size for n in expected},
        "sha256": {n: (d / checksum_name(n)).read_text().strip() for n in expected},
        "written": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    write_json(d / MANIFEST, manifest)
    for other in root(run_dir).iterdir():
        if other != d and other.is_dir():
            shutil.rmtree(other, ignore_errors=True)
    return manifest


def save(
    run_dir: Path,
    topo: Topology,
    config: RunConfig,
    iteration: int,
    wall: float,
    state: dict[str, dict],
    barrier: Callable[[], None],
    reason: str,
    after_write: Callable[[SaveStats], Any] | None = None,
) -> tuple[SaveStats, dict[str, Any] | None]:
    """Collective: every rank calls it at the same iteration. Writes this rank's files (then
    `after_write`, e.g. logging them), waits for all, rank 0 commits the set, and a last barrier lets
    every rank start the next iteration together. Returns this rank's stats and, on rank 0, the manifest."""
    stats = write_own(run_dir, topo, config, iteration, wall, state, reason)
    if after_write is not None:
        after_write(stats)
    barrier()
    manifest = commit(run_dir, topo, iteration, reason) if topo.rank == 0 else None
    barrier()
    return stats, manifest


# -- loading ----------------------------------------------------------------------------------------
def load(run_dir: Path, topo: Topology, config: RunConfig, device: torch.device) -> dict[str, Any] | None:
    """This rank's view of the newest complete set, or None: `iteration`, `wall`, `rng`, `reason` and
    `method` (role -> state, for `Method.load_state_dict`). A set of another configuration is refused."""
    import torch

    d = newest_complete(run_dir)
    if d is None:
        return None
    method: dict[str, Any] = {}
    own: dict[str, Any] = {}
    manifest = json.loads((d / MANIFEST).read_text())
    sizes, sums = manifest.get("files", {}), manifest.get("sha256", {})  # no sha256: a set written before them
    fix = f"delete {d} (the run resumes from the set before it, or starts over) and run the same command again"
    for role in ROLES:
        path = d / file_name(role, topo)
        if path.name in sizes and path.stat().st_size != sizes[path.name]:
            raise CheckpointCorrupt(
                f"{path} has {path.stat().st_size} bytes, the set's manifest says {sizes[path.name]}: the checkpoint "
                f"is damaged; {fix}"
            )
        data = path.read_bytes()
        if path.name in sums and hashlib.sha256(data).hexdigest() != sums[path.name]:
            raise CheckpointCorrupt(
                f"{path} does not match the SHA-256 written with it (the set's manifest): the checkpoint is "
                f"damaged; {fix}"
            )
        try:
            obj = torch.load(io.BytesIO(data), map_location=device, weights_only=True)
        except Exception as e:  # truncated, overwritten, not a torch file
            raise CheckpointCorrupt(
                f"{path} is unreadable ({type(e).__name__}): the checkpoint is damaged; {fix}"
            ) from None
        differ = config.diff(RunConfig.from_dict(obj["config"]), ignore=RESUME_IGNORES)
        if differ:
            raise CheckpointMismatch(f"{path} belongs to another configuration: fields {', '.join(differ)} differ")
        method[role] = obj["state"]
        if role == "rank":
            own = obj
    return {
        "iteration": own["iteration"],
        "wall": own["wall"],
        "rng": own["rng"],
        "reason": own["reason"],
        "method": method,
    }


# -- when -------------------------------------------------------------------------------------------
class Cadence:
    """The wall-clock cadence of checkpoints: due once `every_min` minutes have passed since the
    start or the last checkpoint (0: always due)."""

    def __init__(self, every_min: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.every_s = every_min * 60.0
        self.clock = clock
        self.last = clock()

    def due(self) -> bool:
        return self.clock() - self.last >= self.every_s

    def reset(self) -> None:
        self.last = self.clock()


class Preemption:
    """submitit's preemption / time-limit signal, deferred to the trainer's next evaluation point.

    submitit's own handler (rank 0 calls the job's `checkpoint()`, requeues the job and exits) would
    act in the middle of an iteration. `install()` puts this handler in its place: it only notes the
    signal; the trainer reads `requested()` at each evaluation point, saves a checkpoint with every
    rank, raises `Preempted`, and the job then calls `hand_over()`, which runs submitit's handler.
    Slurm sends the signal (`--signal=USR2@90`, submitit's default) to every task; one rank having
    it is enough, since the ranks vote. If the next evaluation point is further away than the
    signal's lead time, the job ends at its time limit and resumes from the last clock checkpoint.
    """

    _active: Preemption | None = None

    def __init__(self, signum: int, previous: Callable[..., Any]) -> None:
        self.signum, self.previous = signum, previous
        self.received = False

    @classmethod
    def install(cls) -> Preemption | None:
        """Wrap submitit's handler of its preemption signal; None outside a submitit job."""
        from submitit import JobEnvironment

        signum = getattr(signal, "SIG" + JobEnvironment.USR_SIG, None)
        previous = signal.getsignal(signum) if signum is not None else None
        if not callable(previous):  # no submitit handler (debug executor, torchrun): nothing to defer
            return None
        hook = cls(signum, previous)
        signal.signal(signum, hook._on_signal)
        cls._active = hook
        return hook

    def _on_signal(self, signum: int, frame: Any) -> None:
        self.received = True  # only a flag: the handler runs between two bytecodes of the training loop

    def uninstall(self) -> None:
        """Put submitit's handler back."""
        signal.signal(self.signum, self.previous)
        if Preemption._active is self:
            Preemption._active = None

    def hand_over(self) -> None:
        """Run submitit's handler now: on rank 0 it requeues the job and exits."""
        self.uninstall()
        self.previous(self.signum, None)

    @classmethod
    def requested(cls) -> bool:
        return cls._active is not None and cls._active.received


def newest_common_iteration(run_dir: Path, world_size: int | None = None) -> int | None:
    """The iteration of the newest complete checkpoint set (where a resumed run goes on), or None.
    A set is complete once every rank wrote its files (its manifest), so `world_size` is not needed;
    it is accepted for callers that know it."""
    d = newest_complete(run_dir)
    if d is None:
        return None
    return int(json.loads((d / MANIFEST).read_text())["iteration"])
