"""The per-rank training loop shared by every method: set-up, iterations, evaluation, checkpoints, logs.

`train(config, run_dir)` runs in each of the job's processes (started by `prunex.cluster.launch` under
submitit, or by torchrun). `wall_s` counts training time only: evaluation and checkpoints are
outside the timed region.

Evaluation (`prunex.training.evaluation`): at each evaluation point the ranks re-estimate the BatchNorm
statistics of a copy of `method.eval_model()` on their own shards, average them (one AllReduce),
evaluate their slices of the held-out split and add (correct, count) with one AllReduce; every rank
logs the same accuracy. The AllReduce also carries two votes per rank: "my checkpoint clock is due"
(`checkpoint_every_min` minutes since the last set; 0: always) and "I received submitit's preemption
signal". Any vote makes every rank save a checkpoint set there (`prunex.training.checkpoint`); a preemption
vote then ends the job with `checkpoint.Preempted` (`prunex.cluster.task.TrainJob` requeues it). The last
iteration needs no checkpoint: the run finishes instead. Evaluation traffic goes to the `eval_comm`
table, evaluation timings to `evaluation`, each checkpoint set to `checkpoints`.

The ADMM engines do not send BatchNorm statistics at all unless `bn_batches` is 0
(`RunConfig.averages_bn_stats`): evaluation re-estimates them. `final_model.pt` is the last evaluated
model, statistics as evaluated.

`meta.json` records the first attempt; a requeued or relaunched attempt writes `meta.attempt<k>.json`
(`prunex.training.log.write_meta`), so no attempt's record is overwritten.

The console's loss at each evaluation point is the mean over ranks, the quantity `steps.parquet`
logs (`prunex.training.log.merge_parts`): one float64 AllReduce over the flat group, a control message
outside the timed region and not logged as training communication. A configuration whose loop has
no iteration is an error here too (the launcher refuses it before launching, `check_iterations`):
a DONE marker always means at least one trained iteration.

Fault injection for the tests (``PRUNEX_FAULT_*``) is `prunex.training.faults`: one call at the start of each
iteration, which does nothing unless a test asked for a fault.
"""

from __future__ import annotations

import copy
import io
import json
import math
import os
import random
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader, Subset

from prunex.cluster.local_fork import task_start
from prunex.cluster.regime import bind_to_core, usable_cores
from prunex.cluster.regime import read as read_regime
from prunex.comm import Comm
from prunex.methods import method_class
from prunex.methods.base import Context, Method
from prunex.minicluster.wire import LINK_MODEL, observed_link_mbit, observed_link_model, read_counters
from prunex.pruning.export import write_checksum
from prunex.training import allocator, checkpoint, stack_report
from prunex.training.allocator import keep_freed_memory
from prunex.training.config import RunConfig
from prunex.training.data import load_dataset
from prunex.training.device import machine_rank, place
from prunex.training.evaluation import (
    average_bn,
    combine,
    count_correct,
    held_out_slice,
    in_memory,
    recalibrate_bn,
    recalibration_batches,
    rng_untouched,
)
from prunex.training.export_step import export_and_bench
from prunex.training.faults import Faults
from prunex.training.log import (
    TRAINED,
    RunLog,
    collect_meta,
    merge_parts,
    write_atomic,
    write_json,
    write_marker,
    write_meta,
)
from prunex.training.models import build_model
from prunex.training.topology import backend_for, build_groups, discover, init_distributed


def _set_threads(world_on_machine: int, device: torch.device) -> None:
    """Share the CPU among the processes of this machine instead of oversubscribing it."""
    if device.type == "cuda" or "OMP_NUM_THREADS" in os.environ:
        return
    torch.set_num_threads(max(1, usable_cores() // max(world_on_machine, 1)))


def mean_over_ranks(value: float, group: dist.ProcessGroup, device: torch.device) -> float:
    """The mean of a per-rank scalar over `group` (a control message: not logged as communication)."""
    t = torch.tensor([value], dtype=torch.float64, device=device)
    dist.all_reduce(t, group=group)
    return float(t.item()) / dist.get_world_size(group)


def ranks_agree_on_failure(failed: bool, group: dist.ProcessGroup, device: torch.device, world: int) -> list[int]:
    """The ranks of `group` that failed this iteration (its members each say whether they did), the same
    list on every rank: one small AllReduce, a control message (not logged as communication). A rank
    whose loss is not finite keeps its collectives (NaN travels through them like any value) and stops
    here together with the others, instead of raising alone and leaving its peers blocked in the next
    collective until a timeout (issue 27)."""
    flags = torch.zeros(world, dtype=torch.int32, device=device)
    if failed:
        flags[dist.get_rank()] = 1
    dist.all_reduce(flags, group=group)
    return [r for r, f in enumerate(flags.tolist()) if f]


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def train(config: RunConfig, run_dir: str | Path) -> Path:
    """Run one training run on this rank; returns the run directory."""
    run_dir = Path(run_dir)
    keep_freed_memory()  # every step's buffers reused, not page-faulted in again (prunex.training.allocator)
    topo = discover(config.nodes, config.procs_per_node)
    faults = Faults.from_env()  # the tests' fault injection (prunex.training.faults); nothing otherwise
    faults.before_rendezvous(topo.rank)
    # the device of --device (auto, cuda, cpu), checked and agreed on by every rank before any collective
    device, store = place(config.device, topo, config.collective_timeout_s)
    if config.executor != "debug":  # every rank has joined: no start-up report (prunex.cluster.task.TrainJob)
        stack_report.cancel()
    _set_threads(machine_rank(topo)[1], device)
    if config.bind_cores and device.type == "cpu":
        bind_to_core(topo.rank)
    init_distributed(topo, device, config.collective_timeout_s, store)
    try:
        return _train(config, run_dir, topo, device, faults)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def _evaluate(
    method: Method, config: RunConfig, comm: Comm, device: torch.device, loader: DataLoader, k: int, votes: list[int]
) -> tuple[float, list[int], dict[str, Any], nn.Module]:
    """Sharded evaluation of one model (module docstring); returns the accuracy, the summed votes,
    this rank's `evaluation` row and the evaluated model (what `final_model.pt` holds)."""
    # the device's clock (prunex.comm.clocks): on a GPU the work is asynchronous, a host clock would time launches
    # evaluating leaves training's random numbers as they were (evaluation.py): the re-estimation's
    # augmentations and every loader's seed are given back
    with rng_untouched(device):
        bn = comm.timer.start()
        model_copy = copy.deepcopy(method.eval_model())
        recalibrate_bn(model_copy, recalibration_batches(method.loader), config.bn_batches, device)
        average_bn(model_copy, comm)
        bn.stop()
        ev = comm.timer.start()
        correct, count = count_correct(model_copy, loader, device)
        ev.stop()
    co = comm.timer.start()
    acc, images, summed = combine(comm, correct, count, votes)
    co.stop()
    row = {
        "iteration": k,
        "rank": comm.topo.rank,
        "images": count,
        "correct": correct,
        "total_images": images,
        "bn_s": bn.seconds,
        "eval_s": ev.seconds,
        "combine_s": co.seconds,
    }
    return acc, summed, row, model_copy


def _link_mbit(link_model: str, config: RunConfig) -> float | None:
    """The inter-node link rate this run had (meta.json `link_mbit`): tc's on a mini cluster node (read at the
    start of the run), the modelled one with alpha-beta; None where nothing shapes or models the links."""
    if link_model == LINK_MODEL:
        return observed_link_mbit()
    return config.link.bandwidth_gbit * 1e3 if link_model == "alpha-beta" else None


def _train(config: RunConfig, run_dir: Path, topo, device: torch.device, faults: Faults | None = None) -> Path:
    faults = Faults.from_env() if faults is None else faults  # `train` reads it once; tests call _train directly
    sharded = config.method == "hsadmm" and config.admm.inter_exchange == "sharded"  # its P inter-node groups
    groups = build_groups(topo, config.collective_timeout_s, shards=sharded)
    comm = Comm(topo, groups, device, config.link)
    log = RunLog(run_dir, topo.rank)
    if topo.rank == 0:
        write_json(run_dir / "config.json", config.to_dict())

    seed_everything(config.seed)  # identical initial model on every rank
    model = build_model(config.model).to(device)
    if config.init_from:  # Alg. 1 line 1 "Pre-trained": the same start for every method that names it
        model.load_state_dict(load_init(config), strict=True)
    seed_everything(config.seed * 1_000_003 + topo.rank)  # per-rank augmentation
    train_set = load_dataset(config.dataset, config.data_root, train=True)
    if config.train_subset:
        train_set = Subset(train_set, range(min(config.train_subset, len(train_set))))
    test_set = load_dataset(config.dataset, config.data_root, train=False)
    # this rank's slice of the test split, transformed once (no random numbers) and evaluated from memory
    test_loader = DataLoader(in_memory(held_out_slice(test_set, topo.rank, topo.world_size)), batch_size=256)
    # Kernel-counted bytes on the node's link (mini cluster only): node leaders sample their
    # namespace's interface before the method is built (DDP broadcasts then) and after each iteration.
    wire_last = read_counters() if topo.is_leader else None
    ctx = Context(config, topo, groups, comm, device, model, train_set, log)
    method = method_class(config.method)(ctx)
    if topo.rank == 0:  # after the method is built: its SGD steps per epoch are part of the record
        job_keys = ("world_size", "nodes", "procs_per_node", "emulated")
        job_topology = {k: v for k, v in topo.as_dict().items() if k in job_keys}
        # the link model that shaped the links (a mini cluster's tc), in meta.json and so in every log row
        link_model = observed_link_model(config.link.model)
        meta = collect_meta(job_topology, str(device), backend_for(device), link_model)
        meta["link_mbit"] = _link_mbit(link_model, config)
        meta["cpu_binding"] = (
            "one core per process (prunex.cluster.regime.bind_to_core)" if config.bind_cores else "none"
        )
        meta["task_start"] = task_start()  # forked from a local job's controller, or an interpreter of its own
        meta["malloc"] = allocator.applied()  # applied by `train` at start; None: glibc's defaults
        regime = read_regime()  # the regime-matched profile's link rate and why (prunex.cluster.regime)
        if regime is not None:
            meta["regime"] = regime
        # per rank, the same for every method of a run: budgets compare in SGD steps (fig12_pareto)
        meta["train_images"], meta["steps_per_epoch"] = len(train_set), method.steps_per_epoch
        write_meta(run_dir, meta)

    total = method.num_iterations
    if total == 0 or method.steps_per_epoch == 0:
        raise RuntimeError(
            f"run {config.name} has nothing to train: {len(train_set)} training images over {topo.world_size} ranks"
        )
    wall, start = 0.0, 0
    # The method's construction-time collectives (DDP's parameter broadcast) are logged with iteration 0's
    # communication, as its bytes, but they ran before iteration 0's clock started: not in its comm_s, which would
    # otherwise exceed what the iteration's own span holds and take the difference from its compute_s.
    setup_records = comm.drain()
    resumed = checkpoint.load(run_dir, topo, config, device)
    if resumed is not None:  # a requeued job: go on from the last checkpoint
        method.load_state_dict(resumed["method"])
        checkpoint.set_rng_state(resumed["rng"])
        wall, start = resumed["wall"], resumed["iteration"] + 1
        log.load_existing(resumed["iteration"])
        # building the method ran its construction-time collectives again (DDP's parameter broadcast); the first
        # attempt logged them as iteration 0's, so this attempt's are dropped, from the comm rows (steps.parquet's
        # bytes come from them) and from the node's wire counters alike
        setup_records = []
        if wire_last is not None:
            wire_last = read_counters()
        if topo.rank == 0:
            # iterations count from 1 here as in the progress lines and the interrupt message (prunex.cluster.interrupt)
            print(f"[{config.name}] resumed after iteration {start} ({start}/{total} done)", flush=True)
    cadence = checkpoint.Cadence(config.checkpoint_every_min)
    k, test_acc = start - 1, float("nan")
    evaluated: tuple[int, nn.Module] | None = None  # the last evaluated model (BatchNorm re-estimated)
    for k in range(start, total):
        comm.iteration = k
        faults.before_iteration(k, config, topo, ctx.model)
        span = comm.timer.start()  # the device's clock, as every comm and compute time (prunex.comm.clocks)
        try:
            result = method.train_iteration(k)
        except Exception as e:  # name the rank, the iteration and the phase, then let the job fail
            phase = f"the {comm.current} collective" if comm.current else "local computation"
            raise RuntimeError(
                f"rank {topo.rank} (node {topo.node}) failed in iteration {k} during {phase}: "
                f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            ) from e
        span.stop()
        # the divergence check, agreed by every rank before the next collective (outside the timed region)
        diverged = ranks_agree_on_failure(not math.isfinite(result.train_loss), groups.flat, device, topo.world_size)
        if diverged:
            if topo.rank in diverged:
                raise FloatingPointError(
                    f"rank {topo.rank} (node {topo.node}) failed in iteration {k} during local computation: "
                    f"FloatingPointError: loss became {result.train_loss} in {config.method} training"
                )
            raise FloatingPointError(
                f"rank {topo.rank} (node {topo.node}) stopped in iteration {k}: rank {', '.join(map(str, diverged))} "
                "had a non-finite training loss (the divergence check every rank agrees on)"
            )
        records = comm.drain()  # after the iteration: reads its spans (CUDA: waits for their events)
        iter_s = span.seconds
        wall += iter_s
        # the union of the iteration's collective spans: calls in flight together count once
        comm_s = sum(r["exclusive_s"] for r in records if r["iteration"] == k)
        records, setup_records = setup_records + records, []
        last = k + 1 == total or method.finished
        test_acc, reason = float("nan"), None
        if result.evaluate:
            inter_before = comm.job_inter_bytes  # evaluation traffic is not training traffic
            votes = [int(cadence.due()), int(checkpoint.Preemption.requested())]
            try:
                test_acc, (clock_votes, preempt_votes), row, model_copy = _evaluate(
                    method, config, comm, device, test_loader, k, votes
                )
                evaluated = (k, model_copy)
            except Exception as e:  # as for training: name the rank, the iteration and the phase
                raise RuntimeError(
                    f"rank {topo.rank} (node {topo.node}) failed in iteration {k} during the evaluation"
                    f"{f' ({comm.current} collective)' if comm.current else ''}: {type(e).__name__}: "
                    f"{str(e).splitlines()[0] if str(e) else ''}"
                ) from e
            log.append("evaluation", [row])
            log.append("eval_comm", comm.drain())
            comm.job_inter_bytes = inter_before
            if preempt_votes and not last:
                reason = "preemption signal"
            elif clock_votes and not last:
                reason = "every evaluation" if config.checkpoint_every_min == 0 else "clock"
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
        if result.evaluate or last:
            log.flush()
            note = ""
            if reason is not None:

                def logged(stats: checkpoint.SaveStats) -> None:  # before the barrier: on disk with the set
                    log.append("checkpoints", [_checkpoint_row(stats, topo)])
                    log.flush()

                _, manifest = checkpoint.save(
                    run_dir,
                    topo,
                    config,
                    k,
                    wall,
                    method.state_dict(),
                    barrier=lambda: dist.barrier(group=groups.flat),  # control messages, not logged
                    reason=reason,
                    after_write=logged,
                )
                cadence.reset()
                if manifest is not None:
                    note = f" checkpoint ({reason}) {sum(manifest['files'].values()) / 1e6:.1f} MB"
            loss = mean_over_ranks(result.train_loss, groups.flat, device)  # what steps.parquet logs
            if topo.rank == 0:
                acc = "" if math.isnan(test_acc) else f" acc {100 * test_acc:5.1f}%"
                print(
                    f"[{config.name}] iteration {k + 1}/{total} epoch {result.epoch:.2f} "
                    f"loss {loss:.4f}{acc} inter-node {comm.job_inter_bytes / 1e6:.1f} MB "
                    f"wall {wall:.1f}s{note}",
                    flush=True,
                )
            if reason == "preemption signal":
                raise checkpoint.Preempted(f"preempted: checkpoint after iteration {k} saved, the job is requeued")
        if method.finished:
            break
    log.flush()
    dist.barrier(group=groups.flat)  # every rank's parts are on disk (a control message, not logged)
    if topo.rank == 0:
        # the trained model (ADMM: the masked consensus z), loadable with weights_only=True: the one
        # whose accuracy was logged last (its BatchNorm statistics re-estimated and averaged) when that
        # was the final iteration, else the method's evaluated model as it stands (a run resumed after
        # its last evaluation)
        final = evaluated[1] if evaluated is not None and evaluated[0] == k else method.eval_model()
        buf = io.BytesIO()
        torch.save(final.state_dict(), buf)
        write_atomic(run_dir / "final_model.pt", buf.getvalue())
        write_checksum(run_dir / "final_model.pt")  # read back by export, which refuses a damaged file
        if config.export:
            # trained, saved and marked so before the export: a failed export is relaunched as the export job alone
            # (the launcher submits it for a TRAINED run), not as a training job that would train the run again
            merge_parts(run_dir)
            write_marker(run_dir / TRAINED)
            shutil.rmtree(run_dir / "checkpoints", ignore_errors=True)
            if not config.export_job:  # here, on this machine (else the launcher's one-task job)
                faults.before_export()
                export_and_bench(run_dir, device, config.bench_budget_s, config.bench_batch)
                merge_parts(run_dir, done=True)
                (run_dir / TRAINED).unlink(missing_ok=True)  # DONE says it all now, as after an export job
        else:
            merge_parts(run_dir, done=True)
            shutil.rmtree(run_dir / "checkpoints", ignore_errors=True)
        summary = {"iterations": k + 1, "wall_s": wall, "final_test_acc": test_acc}
        state = "trained (its export follows as a job of its own)" if config.export_job else "done"
        print(f"[{config.name}] {state}: {json.dumps(summary)}", flush=True)
    return run_dir


def load_init(config: RunConfig) -> dict[str, torch.Tensor]:
    """The state of `config.init_from`'s final model (a finished run of the same experiment), on the CPU."""
    run = Path(config.results).resolve() / config.experiment / config.init_from
    weights = run / "final_model.pt"
    if not (run / "DONE").exists() or not weights.exists():
        raise RuntimeError(f"--init-from {config.init_from}: {run} is not a finished run (no DONE or final_model.pt)")
    return torch.load(weights, map_location="cpu", weights_only=True)


def _checkpoint_row(stats: checkpoint.SaveStats, topo) -> dict[str, Any]:
    return {
        "iteration": stats.iteration,
        "rank": topo.rank,
        "node": topo.node,
        "reason": stats.reason,
        "files": stats.files,
        "bytes": stats.bytes,
        "write_s": stats.write_s,
    }


def main(argv: list[str] | None = None) -> int:
    """Entry point under torchrun: `torchrun ... -m prunex.training.train CONFIG.json RUN_DIR`."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print("usage: torchrun ... -m prunex.training.train CONFIG.json RUN_DIR", file=sys.stderr)
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
