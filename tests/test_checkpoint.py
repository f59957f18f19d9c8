"""Checkpoints by owner: which rank writes what (2 x 2, every method, real gloo processes), that the
"replicated" and "node" parts really are identical where they claim to be, their sizes against the
model-size formula of `benchmarks.checkpoints`, bitwise resume through the files; the newest
complete set, the clock, and the deferral of submitit's preemption signal."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import signal
from pathlib import Path

import pytest
import torch
from distributed import run_distributed
from torch.utils.data import TensorDataset

from benchmarks.checkpoints import rng_bytes, role_bytes
from prunex.perfmodel.workload import model_spec
from prunex.training import checkpoint
from prunex.training.config import ADMMConfig, PacTrainConfig, RunConfig, TopKConfig
from prunex.training.topology import Topology

METHODS = ("ddp", "topk", "pactrain", "flat_admm", "hsadmm")
# torch.save's framing: a zip record per tensor (headers, name, 64-byte alignment) and the pickled containers
FRAMING_PER_TENSOR, FRAMING_FIXED = 400, 16 * 1024


def _config(method: str) -> RunConfig:
    return RunConfig(
        method=method,
        nodes=2,
        procs_per_node=2,
        batch_size=8,
        lr=0.05,
        epochs=3,
        admm=ADMMConfig(iterations=3, local_epochs=1, freeze_iteration=2, rho_intra=0.05, rho_inter=0.005),
        topk=TopKConfig(ratio=0.1),
        pactrain=PacTrainConfig(density=0.5),
    )


def _tensors(obj: object) -> int:
    if isinstance(obj, torch.Tensor):
        return 1
    if isinstance(obj, dict):
        return sum(_tensors(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(_tensors(v) for v in obj)
    return 0


def _digest(obj: object) -> str:
    """A hash of a nested state: tensors by their bytes, everything else by its repr."""
    h = hashlib.sha256()

    def walk(x: object) -> None:
        if isinstance(x, torch.Tensor):
            h.update(str((x.dtype, tuple(x.shape))).encode())
            h.update(x.detach().reshape(-1).contiguous().view(torch.uint8).numpy().tobytes())
        elif isinstance(x, dict):
            for k in sorted(x, key=str):
                h.update(repr(k).encode())
                walk(x[k])
        elif isinstance(x, (list, tuple)):
            for v in x:
                walk(v)
        else:
            h.update(repr(x).encode())

    walk(obj)
    return h.hexdigest()


def _build(method: str, cfg: RunConfig, run_dir: Path, seed: int, env: tuple) -> tuple:
    """The method on a fresh resnet20 initialised from `seed` (the second one starts elsewhere, so only
    the checkpoint can align it with the first)."""
    from prunex.methods import method_class
    from prunex.methods.base import Context
    from prunex.training.log import RunLog
    from prunex.training.models import build_model

    topo, groups, comm, device, train_set = env
    torch.manual_seed(seed)
    ctx = Context(cfg, topo, groups, comm, device, build_model("resnet20"), train_set, RunLog(run_dir, topo.rank))
    return ctx.model, method_class(method)(ctx)


def _roles_worker(rank: int, tmp: str) -> dict:
    import torch.distributed as dist

    from prunex.comm import Comm
    from prunex.training.topology import build_groups, discover

    topo = discover(2, 2)
    groups = build_groups(topo, 60)
    device = torch.device("cpu")
    comm = Comm(topo, groups, device)
    g = torch.Generator().manual_seed(7)
    train_set = TensorDataset(torch.randn(32, 3, 32, 32, generator=g), torch.randint(0, 10, (32,), generator=g))
    env = (topo, groups, comm, device, train_set)
    out: dict = {}
    for method in METHODS:
        cfg = _config(method)
        run_dir = Path(tmp) / method
        model, m = _build(method, cfg, run_dir, 0, env)
        for k in range(2):
            comm.iteration = k
            m.train_iteration(k)
        state = m.state_dict()
        saved = {role: _digest(state[role]) for role in checkpoint.ROLES}  # state holds live tensors
        stats, manifest = checkpoint.save(
            run_dir, topo, cfg, 1, 10.0 + rank, state, barrier=lambda: dist.barrier(group=groups.flat), reason="test"
        )
        model2, m2 = _build(method, cfg, run_dir, 1, env)
        loaded = checkpoint.load(run_dir, topo, dataclasses.replace(cfg, experiment="other", name="x"), device)
        m2.load_state_dict(loaded["method"])
        restored = {role: _digest(part) for role, part in m2.state_dict().items()}
        rng = torch.get_rng_state()
        m.train_iteration(2)
        torch.set_rng_state(rng)
        m2.train_iteration(2)
        comm.drain()
        a, b = model.state_dict(), model2.state_dict()
        out[method] = {
            "digests": saved,
            "tensors": {role: _tensors(state[role]) for role in checkpoint.ROLES},
            "restored": restored,
            "stats": dataclasses.asdict(stats),
            "manifest": manifest,
            "files": sorted(p.name for p in checkpoint.set_dir(run_dir, 1).iterdir()) if rank == 0 else None,
            "loaded": (loaded["iteration"], loaded["wall"], loaded["reason"]),
            "resumes_bitwise": a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a),
            "max_diff": max(float((a[k].double() - b[k].double()).abs().max()) for k in a),
        }
    return out


@pytest.fixture(scope="module")
def roles(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    return run_distributed(_roles_worker, 4, str(tmp_path_factory.mktemp("ckpt")), timeout_s=180)


@pytest.mark.parametrize("method", METHODS)
def test_each_piece_is_written_once_by_its_owner(roles: list[dict], method: str) -> None:
    files = checkpoint.expected_files(2, 2)
    assert files == ["replicated.pt", "node00000.pt", "node00001.pt"] + [f"rank{r:05d}.pt" for r in range(4)]
    sums = [checkpoint.checksum_name(f) for f in files]  # each file's SHA-256, written by its owner beside it
    assert roles[0][method]["files"] == sorted([*files, *sums, checkpoint.MANIFEST])
    assert sorted(roles[0][method]["manifest"]["sha256"]) == sorted(files)
    # rank 0: replicated + node 0 + its own; rank 2 leads node 1: node 1 + its own; ranks 1, 3: their own
    assert [r[method]["stats"]["files"] for r in roles] == [3, 1, 2, 1]
    assert all(r[method]["manifest"] is None for r in roles[1:])


@pytest.mark.parametrize("method", METHODS)
def test_replicated_and_node_state_is_identical_where_claimed(roles: list[dict], method: str) -> None:
    d = [r[method]["digests"] for r in roles]
    assert len({x["replicated"] for x in d}) == 1, "the 'replicated' state differs between ranks"
    assert d[0]["node"] == d[1]["node"] and d[2]["node"] == d[3]["node"], "the 'node' state differs within a node"
    # and the split is not vacuous: per-rank state (BatchNorm statistics at least) differs between ranks
    assert len({x["rank"] for x in d}) == 4
    if method in ("hsadmm",):
        assert d[0]["node"] != d[2]["node"]  # z_i, v of the two nodes


@pytest.mark.parametrize("method", METHODS)
def test_file_sizes_are_the_model_size_formula(roles: list[dict], method: str) -> None:
    sizes = roles[0][method]["manifest"]["files"]
    want = role_bytes(method, model_spec("resnet20"))
    rng = rng_bytes()
    for name, size in sizes.items():
        role = "replicated" if name == "replicated.pt" else "node" if name.startswith("node") else "rank"
        expected = want[role] + (rng if role == "rank" else 0)
        framing = FRAMING_FIXED + FRAMING_PER_TENSOR * roles[0][method]["tensors"][role]
        assert 0 <= size - expected < framing, (name, size, expected, framing)


@pytest.mark.parametrize("method", METHODS)
def test_resume_through_the_files_is_bitwise(roles: list[dict], method: str) -> None:
    for rank, r in enumerate(roles):
        res = r[method]
        assert res["loaded"] == (1, 10.0 + rank, "test")  # each rank's own wall time comes back
        assert res["restored"] == res["digests"], f"rank {rank}: the restored {method} state differs from the saved"
        if method == "ddp":
            # DDP rebuilds its gradient buckets after its first iteration; a restarted DDP's first
            # iteration sums in its initial buckets, so the next step may round differently
            assert res["max_diff"] < 1e-6, res["max_diff"]
        else:
            assert res["resumes_bitwise"], f"rank {rank}: the restored {method} diverged by {res['max_diff']}"


def _topo() -> Topology:
    return Topology(rank=0, world_size=1, nodes=1, procs_per_node=1)


def _save(run_dir: Path, iteration: int, cfg: RunConfig) -> None:
    state = {"replicated": {"w": torch.full((3,), float(iteration))}, "node": {}, "rank": {}}
    checkpoint.save(run_dir, _topo(), cfg, iteration, 1.0, state, barrier=lambda: None, reason="clock")


def test_only_the_newest_complete_set_is_kept_and_loaded(tmp_path: Path) -> None:
    cfg = RunConfig(method="ddp")
    _save(tmp_path, 1, cfg)
    _save(tmp_path, 3, cfg)
    assert [p.name for p in checkpoint.root(tmp_path).iterdir()] == ["it0000003"]
    # a newer set killed while being written (no manifest) is ignored
    torn = checkpoint.set_dir(tmp_path, 5)
    torn.mkdir()
    (torn / "replicated.pt").write_bytes(b"half")
    assert checkpoint.newest_complete(tmp_path) == checkpoint.set_dir(tmp_path, 3)
    # who asked and how the job is operated may differ on resume; the training may not
    other_asker = dataclasses.replace(cfg, experiment="volume", name="y", checkpoint_every_min=5.0)
    loaded = checkpoint.load(tmp_path, _topo(), other_asker, torch.device("cpu"))
    assert loaded["iteration"] == 3 and torch.equal(loaded["method"]["replicated"]["w"], torch.full((3,), 3.0))
    # the next save removes the older and the torn set
    _save(tmp_path, 6, cfg)
    assert [p.name for p in checkpoint.root(tmp_path).iterdir()] == ["it0000006"]
    # a set whose manifest names a lost file is not complete
    (checkpoint.set_dir(tmp_path, 6) / "rank00000.pt").unlink()
    assert checkpoint.newest_complete(tmp_path) is None
    assert checkpoint.load(tmp_path, _topo(), cfg, torch.device("cpu")) is None


def test_newest_complete_read_during_a_commit_finds_the_new_set(tmp_path: Path, monkeypatch) -> None:
    """A reader that found the newer set without its manifest, then the older set removed by that set's commit
    (`checkpoint.commit`), lists the sets again instead of answering "no checkpoint"."""
    cfg = RunConfig(method="ddp")
    _save(tmp_path, 1, cfg)
    newer = checkpoint.set_dir(tmp_path, 2)
    newer.mkdir()
    manifest = checkpoint.set_dir(tmp_path, 1) / checkpoint.MANIFEST
    real = Path.read_text
    committed = []

    def read_text(path: Path, *args, **kwargs) -> str:
        if path == newer / checkpoint.MANIFEST and not committed:  # read just before the commit lands
            committed.append(True)
            for f in checkpoint.set_dir(tmp_path, 1).iterdir():
                if f.name != checkpoint.MANIFEST:
                    (newer / f.name).write_bytes(f.read_bytes())
            (newer / checkpoint.MANIFEST).write_text(real(manifest))  # the commit: the manifest, then
            shutil.rmtree(checkpoint.set_dir(tmp_path, 1))  # the older set removed
            raise FileNotFoundError(path)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", read_text)
    assert checkpoint.newest_complete(tmp_path) == newer and committed


def test_cadence_is_due_after_its_minutes_and_always_at_zero() -> None:
    now = [100.0]
    c = checkpoint.Cadence(20, clock=lambda: now[0])
    now[0] += 20 * 60 - 1
    assert not c.due()
    now[0] += 1
    assert c.due()
    c.reset()
    assert not c.due()
    assert checkpoint.Cadence(0, clock=lambda: now[0]).due()


def test_preemption_signal_is_deferred_then_handed_to_submitit() -> None:
    from submitit import JobEnvironment

    signum = getattr(signal, "SIG" + JobEnvironment.USR_SIG)
    calls: list[int] = []
    before = signal.signal(signum, lambda s, f: calls.append(s))  # stands in for submitit's handler
    try:
        hook = checkpoint.Preemption.install()
        assert hook is not None and not checkpoint.Preemption.requested()
        os.kill(os.getpid(), signum)
        assert checkpoint.Preemption.requested() and calls == []  # noted, submitit not called yet
        hook.hand_over()
        assert calls == [signum] and not checkpoint.Preemption.requested()
        os.kill(os.getpid(), signum)  # submitit's handler is back in place
        assert calls == [signum, signum]
        signal.signal(signum, signal.SIG_DFL)
        assert checkpoint.Preemption.install() is None  # outside a submitit job: nothing to defer
    finally:
        signal.signal(signum, before)
