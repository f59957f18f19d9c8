"""The per-rank training loop shared by every method: set-up, iterations, evaluation, logs.

`train(config, run_dir)` runs in each of the job's processes (started by `prunex.launch` under
submitit, or by torchrun). Evaluation: every rank evaluates `method.eval_model()` on the whole
held-out split (no communication, so no rank waits on another); rank 0's accuracy is logged.
`wall_s` counts training time only: evaluation time is excluded.

Before evaluating, the BatchNorm statistics of a copy of the evaluated model are re-estimated on
`bn_batches` mini-batches of the rank's own shard (cumulative average, "precise BN"), for every
method alike. The consensus model of ADMM and a freshly pruned model have no running statistics
of their own, and at the learning rates of short CPU runs even DDP's running averages lag the
weights; without this, accuracy measures stale statistics rather than the weights.

The console's loss at each evaluation point is the mean over ranks, the quantity `steps.parquet`
logs (`prunex.log.merge_parts`): one float64 AllReduce over the flat group, a control message
outside the timed region and not logged as training communication. A configuration whose loop has
no iteration is an error here too (the launcher refuses it before launching, `check_iterations`):
a DONE marker always means at least one trained iteration.

Fault injection (tests/faults): with ``PRUNEX_FAULT_NAN_AT=K`` in its environment, rank 0 fills
one parameter of its training model with NaN at the start of iteration K, so the divergence check
(`prunex.methods.base.check_finite`) meets a NaN loss through the ordinary training path. With
``PRUNEX_FAULT_HOLD_AT=K``, rank 0 of a run whose name matches ``PRUNEX_FAULT_HOLD_RUNS`` (a glob,
default every run) stops before iteration K while the file ``PRUNEX_FAULT_HOLD_FILE`` exists
(without one: for ``PRUNEX_FAULT_HOLD_S`` seconds, default 60), never longer than 80% of the
collective timeout, so that interrupts and restarts can be tested at a known point of a run.
"""

from __future__ import annotations

import copy
import dataclasses
import fnmatch
import io
import json
import math
import os
import random
import shutil
import sys
import time
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader, Subset

from prunex import checkpoint
from prunex.comm import Comm
from prunex.config import RunConfig
from prunex.data import load_dataset
from prunex.log import RunLog, collect_meta, merge_parts, write_atomic, write_json
from prunex.methods import METHODS, Context
from prunex.minicluster.wire import LINK_MODEL, link_model_active, read_counters
from prunex.models import build_model
from prunex.topology import backend_for, build_groups, device_for, discover, init_distributed


@torch.no_grad()
def recalibrate_bn(model: nn.Module, batches: Iterable, max_batches: int, device: torch.device) -> nn.Module:
    """Re-estimate the BatchNorm statistics of `model` (in place) from up to `max_batches` batches."""
    bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not bns or max_batches == 0:
        return model
    saved = [m.momentum for m in bns]
    for m in bns:
        m.reset_running_stats()
        m.momentum = None  # cumulative moving average
    was_training = model.training
    model.train()
    for i, (x, _) in enumerate(batches):
        if i >= max_batches:
            break
        model(x.to(device, non_blocking=True))
    for m, mom in zip(bns, saved, strict=True):
        m.momentum = mom
    model.train(was_training)
    return model


@torch.no_grad()
def evaluate(model: nn.Module, loader: DataLoader, device: torch.device) -> float:
    """Top-1 accuracy in [0, 1]."""
    was_training = model.training
    model.eval()
    correct = total = 0
    for x, y in loader:
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        correct += (model(x).argmax(1) == y).sum().item()
        total += y.numel()
    model.train(was_training)
    return correct / max(total, 1)


def _set_threads(world_on_machine: int) -> None:
    """Share the CPU among the processes of this machine instead of oversubscribing it."""
    if torch.cuda.is_available() or "OMP_NUM_THREADS" in os.environ:
        return
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // max(world_on_machine, 1)))


def _hold(config: RunConfig) -> None:
    """The PRUNEX_FAULT_HOLD_* pause (module docstring)."""
    if not fnmatch.fnmatch(config.name, os.environ.get("PRUNEX_FAULT_HOLD_RUNS", "*")):
        return
    path = os.environ.get("PRUNEX_FAULT_HOLD_FILE")
    limit = min(float(os.environ.get("PRUNEX_FAULT_HOLD_S", "60")), 0.8 * config.collective_timeout_s)
    print(f"[{config.name}] fault injection: holding", flush=True)
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline and (path is None or os.path.exists(path)):
        time.sleep(0.1)


def mean_over_ranks(value: float, group: dist.ProcessGroup, device: torch.device) -> float:
    """The mean of a per-rank scalar over `group` (a control message: not logged as communication)."""
    t = torch.tensor([value], dtype=torch.float64, device=device)
    dist.all_reduce(t, group=group)
    return float(t.item()) / dist.get_world_size(group)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def train(config: RunConfig, run_dir: str | Path) -> Path:
    """Run one training run on this rank; returns the run directory."""
    run_dir = Path(run_dir)
    topo = discover(config.nodes, config.procs_per_node)
    device = device_for(topo)
    on_machine = int(os.environ.get("LOCAL_WORLD_SIZE") or (topo.world_size if topo.emulated else topo.procs_per_node))
    _set_threads(on_machine)
    init_distributed(topo, device, config.collective_timeout_s)
    try:
        return _train(config, run_dir, topo, device)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def _train(config: RunConfig, run_dir: Path, topo, device: torch.device) -> Path:
    groups = build_groups(topo, config.collective_timeout_s)
    if config.link.model == "none" and link_model_active():
        # inside a mini cluster node the inter-node links are shaped by tc: say so in every log row
        config = dataclasses.replace(config, link=dataclasses.replace(config.link, model=LINK_MODEL))
    comm = Comm(topo, groups, device, config.link)
    log = RunLog(run_dir, topo.rank)
    if topo.rank == 0:
        write_json(run_dir / "config.json", config.to_dict())
        job_keys = ("world_size", "nodes", "procs_per_node", "emulated")
        job_topology = {k: v for k, v in topo.as_dict().items() if k in job_keys}
        write_json(run_dir / "meta.json", collect_meta(job_topology, str(device), backend_for(device), comm.link_model))

    seed_everything(config.seed)  # identical initial model on every rank
    model = build_model(config.model).to(device)
    seed_everything(config.seed * 1_000_003 + topo.rank)  # per-rank augmentation
    train_set = load_dataset(config.dataset, config.data_root, train=True)
    if config.train_subset:
        train_set = Subset(train_set, range(min(config.train_subset, len(train_set))))
    test_loader = DataLoader(load_dataset(config.dataset, config.data_root, train=False), batch_size=256, num_workers=0)
    # Kernel-counted bytes on the node's link (mini cluster only): node leaders sample their
    # namespace's interface before the method is built (DDP broadcasts then) and after each iteration.
    wire_last = read_counters() if topo.is_leader else None
    ctx = Context(config, topo, groups, comm, device, model, train_set, log)
    method = METHODS[config.method](ctx)

    total = method.num_iterations
    if total == 0 or method.steps_per_epoch == 0:
        raise RuntimeError(
            f"run {config.name} has nothing to train: {len(train_set)} training images over {topo.world_size} ranks"
        )
    wall, start = 0.0, 0
    resumed = checkpoint.load(run_dir, topo.rank, config, device)
    if resumed is not None:  # a requeued job: go on from the last checkpoint
        method.load_state_dict(resumed["method"])
        checkpoint.set_rng_state(resumed["rng"])
        wall, start = resumed["wall"], resumed["iteration"] + 1
        log.load_existing(resumed["iteration"])
        if topo.rank == 0:
            print(f"[{config.name}] resumed after iteration {start - 1} ({start}/{total} done)", flush=True)
    k, test_acc = start - 1, float("nan")
    nan_at = int(os.environ.get("PRUNEX_FAULT_NAN_AT", "-1"))
    hold_at = int(os.environ.get("PRUNEX_FAULT_HOLD_AT", "-1"))
    for k in range(start, total):
        comm.iteration = k
        if k == hold_at and topo.rank == 0:
            _hold(config)
        if k == nan_at and topo.rank == 0:
            with torch.no_grad():
                next(ctx.model.parameters()).fill_(float("nan"))
        t0 = time.perf_counter()
        try:
            result = method.train_iteration(k)
        except Exception as e:  # name the rank, the iteration and the phase, then let the job fail
            phase = f"the {comm.current} collective" if comm.current else "local computation"
            raise RuntimeError(
                f"rank {topo.rank} (node {topo.node}) failed in iteration {k} during {phase}: "
                f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            ) from e
        iter_s = time.perf_counter() - t0
        wall += iter_s
        records = comm.drain()
        comm_s = sum(r["seconds"] for r in records if r["iteration"] == k)
        test_acc = float("nan")
        if result.evaluate:
            model_copy = copy.deepcopy(method.eval_model())
            recalibrate_bn(model_copy, method.loader, config.bn_batches, device)
            test_acc = evaluate(model_copy, test_loader, device)
            del model_copy
        log.append("comm", records)
        if wire_last is not None:
            now = read_counters()
            log.append(
                "wire",
                [
                    {
                        "iteration": k,
                        "node": topo.node,
                        "tx_bytes": now[0] - wire_last[0],
                        "rx_bytes": now[1] - wire_last[1],
                    }
                ],
            )
            wire_last = now
        log.append(
            "rank_steps",
            [
                {
                    "iteration": k,
                    "rank": topo.rank,
                    "epoch": result.epoch,
                    "wall_s": wall,
                    "train_loss": result.train_loss,
                    "test_acc": test_acc,
                    "comm_s": comm_s,
                    "compute_s": max(iter_s - comm_s, 0.0),
                    "iter_s": iter_s,
                }
            ],
        )
        if result.evaluate or k + 1 == total or method.finished:
            log.flush()
            checkpoint.save(run_dir, topo.rank, config, k, wall, method.state_dict())
            loss = mean_over_ranks(result.train_loss, groups.flat, device)  # what steps.parquet logs
            if topo.rank == 0:
                acc = "" if math.isnan(test_acc) else f" acc {100 * test_acc:5.1f}%"
                print(
                    f"[{config.name}] iteration {k + 1}/{total} epoch {result.epoch:.2f} "
                    f"loss {loss:.4f}{acc} inter-node {comm.job_inter_bytes / 1e6:.1f} MB "
                    f"wall {wall:.1f}s",
                    flush=True,
                )
        if method.finished:
            break
    log.flush()
    dist.barrier(group=groups.flat)  # every rank's parts are on disk (a control message, not logged)
    if topo.rank == 0:
        # the trained model (ADMM: the masked consensus z), loadable with weights_only=True
        buf = io.BytesIO()
        torch.save(method.eval_model().state_dict(), buf)
        write_atomic(run_dir / "final_model.pt", buf.getvalue())
        merge_parts(run_dir, done=True)
        shutil.rmtree(run_dir / "checkpoints", ignore_errors=True)
        summary = {"iterations": k + 1, "wall_s": wall, "final_test_acc": test_acc}
        print(f"[{config.name}] done: {json.dumps(summary)}", flush=True)
    return run_dir


def main(argv: list[str] | None = None) -> int:
    """Entry point under torchrun: `torchrun ... -m prunex.train CONFIG.json RUN_DIR`."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print("usage: torchrun ... -m prunex.train CONFIG.json RUN_DIR", file=sys.stderr)
        return 2
    try:
        config = RunConfig.from_dict(json.loads(Path(argv[0]).read_text()))
    except (OSError, ValueError) as e:  # ConfigError is a ValueError; so is a JSON syntax error
        print(f"error: {argv[0]}: {e}; write it again with python -m prunex.run (its config.json)", file=sys.stderr)
        return 2
    train(config, argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
