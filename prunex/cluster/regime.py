"""The paper's regime on one machine: an inter-node link as scarce, relative to compute, as the paper's.

    python -m prunex.cluster.regime probe --out RESULTS/regime.json [--nodes 2 --procs-per-node 2 --model resnet20 ...]
    python -m prunex.cluster.regime show RESULTS/regime.json

The paper's communication results are about a cluster where communication dominates: DDP spends
~0.50 s per iteration communicating (sec. 5.3.2, Fig. 7) on ResNet-152 at batch 128 per V100. One
dimensionless number carries that regime to any machine, DDP's communication share of an iteration:

    target share = comm / (comm + compute) = 0.50 / (0.50 + 128 x 2.557 ms) = 0.604

with the compute per iteration from `clusters/puhti.json` (``compute_s_per_sample.resnet152``, status
"estimate": NVIDIA's published V100 FP32 ResNet-50 throughput scaled by FLOPs, not measured on Puhti).
Its uncertainty moves the target: at half that compute the share would be 0.75, at double 0.43.

On this machine, `probe` measures the compute of one iteration of the local model and topology
(every process of the job at once, bound to cores as the runs will be: `bind_to_core`, forward +
backward + SGD step on its own shard, no communication), then chooses the inter-node link rate at
which DDP's gradient AllReduce takes ``compute x share / (1 - share)`` on the ring model of
`prunex.comm.cost` (the bytes the busiest node link carries per step, plus the ring's per-step latency).
The result is written once per results directory (`regime.json`) before any run of the profile and
read by everything after it: the mini cluster is brought up at that rate, every run's `meta.json`
carries the file (``PRUNEX_REGIME``), the figures and the report quote it, and the report checks the
share DDP actually had against the target. A results directory that already has the file keeps it
(a resumed `./run_all.sh` trains at the rate it started with); the rate is never chosen by looking
at which method wins.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import multiprocessing as mp
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from prunex.cluster.preflight import check_writable
from prunex.comm import cost as commcost
from prunex.training.config import DATASET_NAMES, MODEL_NAMES, ConfigError

REGIME_ENV = "PRUNEX_REGIME"  # path of the results directory's regime.json, set for every run of the profile
REGIME_FILE = "regime.json"

# Sec. 5.3.2: "The dense baseline exhibits a constant latency of approximately 0.50s per iteration."
PAPER_DDP_COMM_S = 0.50
# Sec. 5.1.5: "a batch size of 128 per GPU"; the model of Figs. 5-9 is ResNet-152.
PAPER_BATCH = 128
PAPER_MODEL = "resnet152"
PUHTI_FILE = Path(__file__).resolve().parents[2] / "clusters" / "puhti.json"
# The share DDP's measured share must land near: +-25% relative (issue 16), checked after the runs.
SHARE_TOLERANCE = 0.25
# Latency per ring step on the mini cluster (tc shapes the rate, not the latency): the alpha fitted to the flat
# AllReduce over 2 x 2 processes, DDP's own collective, in the 1 Gbit/s sweep saved in
# saved-logs/perfmodel/minicluster-2x2/collectives.fit.parquet (3.672 ms per call), over its 2 (N - 1) = 6 ring
# steps: 612 us. Until 2026-11-28 this was 63 us, a figure that file does not hold (its smallest per-step alpha is
# the inter-node broadcast's 242 us). The difference is 3.3 ms of the committed regime logs' 0.470 s DDP step:
# their probe (saved-logs/regime/regime.json) gives 28.049 Mbit/s with 612 us against the 27.853 they ran at
# (+0.7%). tests/test_regime.py reads the fit file.
MINICLUSTER_ALPHA_S = 6.12e-4


def paper_compute_s() -> tuple[float, str, str]:
    """(seconds of compute per iteration at batch 128 on a V100, its status, its source) from puhti.json."""
    entry = json.loads(PUHTI_FILE.read_text())["compute_s_per_sample"][PAPER_MODEL]
    return entry["value"] * PAPER_BATCH, entry["status"], entry["source"]


def target_share() -> dict[str, Any]:
    """DDP's communication share of an iteration in the paper's setup, with its derivation."""
    compute, status, source = paper_compute_s()
    share = PAPER_DDP_COMM_S / (PAPER_DDP_COMM_S + compute)
    return {
        "target_share": share,
        "paper_ddp_comm_s": PAPER_DDP_COMM_S,
        "paper_compute_s": compute,
        "paper_compute_status": status,
        "derivation": (
            f"DDP communication {PAPER_DDP_COMM_S:.2f} s per iteration (sec. 5.3.2, Fig. 7) over that plus "
            f"ResNet-152's compute at batch {PAPER_BATCH} on a V100, {compute:.3f} s "
            f"(clusters/puhti.json, {status}: {source.split(':')[0]}): "
            f"{PAPER_DDP_COMM_S:.2f} / ({PAPER_DDP_COMM_S:.2f} + {compute:.3f}) = {share:.3f}"
        ),
    }


# -- binding ---------------------------------------------------------------------------------------
def bind_to_core(rank: int) -> int | None:
    """Pin this process to one core: the ``rank``-th (mod their number) of the cores it may use, and
    run torch on one thread. For a whole job on one machine (the mini cluster's nodes share its
    cores, so Slurm's per-node binding would put every node's first task on the same core); on a
    real cluster Slurm binds (``srun --cpu-bind``) and this stays off. Returns the core, or None
    where affinity cannot be set (not Linux)."""
    global _UNBOUND
    if not hasattr(os, "sched_setaffinity"):
        return None
    allowed = os.sched_getaffinity(0)
    cores = sorted(allowed)
    core = cores[rank % len(cores)]
    if _UNBOUND is None:
        _UNBOUND = allowed
    os.sched_setaffinity(0, {core})
    import torch

    torch.set_num_threads(1)
    return core


_UNBOUND: set[int] | None = None  # the cores this process could use before `bind_to_core`


def release_core() -> int:
    """Undo `bind_to_core`: the process may use the cores it had before again (a no-op when it was not
    bound). Returns their number. Call it before raising torch's thread count once the job's other
    processes are done (the in-job export and inference bench): threads that torch starts later inherit
    the affinity, and OpenMP threads sharing one core wait for each other at every barrier (a ResNet-20
    forward pass at batch 1 took 672 ms with 2 threads bound to one core, 2.3 ms unbound, this VM)."""
    global _UNBOUND
    if _UNBOUND is not None:
        os.sched_setaffinity(0, _UNBOUND)
        _UNBOUND = None
    return usable_cores()


def usable_cores() -> int:
    """The cores this process may run on: its affinity (Slurm's `--cpu-bind`, a cgroup, `taskset`), not
    `os.cpu_count()`, the machine's, which oversubscribes a bound task's cores."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def oversubscription(world_size: int, cores: int) -> str:
    """How the job's processes share the machine's cores, in words for captions."""
    per = world_size / cores
    if per <= 1:
        return f"{world_size} processes on {cores} cores (one core each)"
    return f"{world_size} processes on {cores} cores ({per:g} per core)"


# -- the probe -------------------------------------------------------------------------------------
def _probe_rank(rank: int, world: int, args: dict[str, Any], barrier: Any, out: Any) -> None:
    import torch

    from prunex.training.allocator import keep_freed_memory  # lazy: ctypes, in the probe's processes only
    from prunex.training.data import load_dataset, shard_loader  # lazy: torch, in the probe's processes only
    from prunex.training.models import build_model  # lazy: torch, as above

    keep_freed_memory()  # as every rank of the runs does (prunex.training.train.train)
    core = bind_to_core(rank)
    torch.manual_seed(args["seed"])
    model = build_model(args["model"])
    data = load_dataset(args["dataset"], args["data_root"] or None, train=True)
    loader, _ = shard_loader(data, rank=rank, world_size=world, batch_size=args["batch_size"], seed=args["seed"])
    opt = torch.optim.SGD(model.parameters(), lr=args["lr"], momentum=0.9, weight_decay=1e-4)
    loss_fn = torch.nn.CrossEntropyLoss()
    model.train()
    times: list[float] = []
    barrier.wait()  # every process computes at the same time, as in training
    batches = iter(loader)
    while len(times) < args["warmup"] + args["iterations"]:
        t0 = time.perf_counter()  # the batch's loading and augmentation count, as in a training iteration
        try:
            x, y = next(batches)
        except StopIteration:
            batches = iter(loader)
            continue
        opt.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        opt.step()
        times.append(time.perf_counter() - t0)
    out.put((rank, core, times[args["warmup"] :]))


def probe_compute(
    nodes: int,
    procs_per_node: int,
    model: str = "resnet20",
    dataset: str = "digits",
    data_root: str = "",
    batch_size: int = 32,
    lr: float = 0.05,
    iterations: int = 20,
    warmup: int = 3,
    seed: int = 0,
    timeout_s: float = 600.0,
) -> dict[str, Any]:
    """Seconds of compute per training iteration with every process of a ``nodes x procs_per_node``
    job on this machine computing at once, bound as the runs are (`bind_to_core`): per rank the
    median over ``iterations`` timed steps after ``warmup``; ``compute_s`` is the slowest rank's
    median (a synchronous step waits for it)."""
    from prunex.training.data import default_root, make_digits  # lazy: torch; this module loads without it

    if dataset == "digits":  # make the cached dataset once, before the processes read it
        make_digits(data_root or default_root())
    world = nodes * procs_per_node
    args = dict(
        model=model,
        dataset=dataset,
        data_root=data_root,
        batch_size=batch_size,
        lr=lr,
        iterations=iterations,
        warmup=warmup,
        seed=seed,
    )
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(world), ctx.Queue()
    procs = [ctx.Process(target=_probe_rank, args=(r, world, args, barrier, out), daemon=True) for r in range(world)]
    t0 = time.monotonic()
    for p in procs:
        p.start()
    results: dict[int, tuple[int | None, list[float]]] = {}
    try:
        while len(results) < world:
            left = timeout_s - (time.monotonic() - t0)
            dead = [p for p in procs if p.exitcode not in (None, 0)]
            if dead or left <= 0:
                why = f"process exited with code {dead[0].exitcode}" if dead else f"no result after {timeout_s:.0f} s"
                raise RuntimeError(f"the compute probe failed: {why}")
            try:
                rank, core, times = out.get(timeout=min(1.0, left))
            except Exception:  # queue.Empty: poll the processes again
                continue
            results[rank] = (core, times)
    finally:
        for p in procs:
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
    medians = [statistics.median(results[r][1]) for r in range(world)]
    cores = usable_cores()
    return {
        "compute_s": max(medians),
        "per_rank_s": medians,
        "cores_used": [results[r][0] for r in range(world)],
        "iterations": iterations,
        "warmup": warmup,
        "nodes": nodes,
        "procs_per_node": procs_per_node,
        "cores": cores,
        "model": model,
        "dataset": dataset,
        "batch_size": batch_size,
        "seconds": time.monotonic() - t0,
    }


# -- the link rate ---------------------------------------------------------------------------------
def ddp_step_bytes(model: str, nodes: int, procs_per_node: int, bucket_cap_mb: float = 25.0) -> tuple[float, list[int]]:
    """(bytes the busiest node link carries per DDP step, DDP's bucket sizes): the flat ring AllReduce
    of every gradient bucket, as `prunex.comm.cost` prices it (the node's last rank sends across)."""
    from prunex.training.models import build_model  # lazy: torch; this module loads without it

    # in the order DDP buckets them after its first iteration (`commcost.ddp_bucket_sizes`)
    param_bytes = [p.numel() * 4 for p in reversed(list(build_model(model).parameters()))]
    buckets = commcost.ddp_bucket_sizes(param_bytes, int(bucket_cap_mb * 2**20))
    per_node = [
        sum(
            commcost.wire_bytes("flat", "allreduce", b, nodes, procs_per_node, rank=(n + 1) * procs_per_node - 1)[0]
            for b in buckets
        )
        for n in range(nodes)
    ]
    return max(per_node), buckets


def choose_bandwidth(
    compute_s: float, buckets: list[int], world_size: int, share: float, alpha_s: float = MINICLUSTER_ALPHA_S
) -> dict[str, float]:
    """The link rate (bits/s) at which DDP's ring AllReduce of ``buckets`` over ``world_size`` ranks takes
    ``compute_s x share / (1 - share)``: solves ``sum_b ring_steps alpha + 2 (N-1)/N b / beta = comm``
    for beta (`prunex.comm.cost.collective_time`)."""
    if not 0 < share < 1:
        raise ValueError(f"share must be in (0, 1), got {share}")
    comm = compute_s * share / (1 - share)
    latency = sum(commcost.ring_steps("allreduce", world_size) * alpha_s for _ in buckets)
    volume = sum(commcost.bandwidth_bytes("allreduce", b, world_size) for b in buckets)
    if comm <= latency:
        raise ValueError(
            f"a DDP step of {compute_s:.3f} s cannot reach share {share:.2f}: latency alone is {latency:.4f} s"
        )
    beta = volume / (comm - latency)  # bytes per second
    return {"predicted_ddp_comm_s": comm, "bandwidth_bits_per_s": 8 * beta}


def calibrate(
    nodes: int,
    procs_per_node: int,
    model: str,
    dataset: str,
    data_root: str,
    batch_size: int,
    lr: float,
    iterations: int,
    bucket_cap_mb: float = 25.0,
) -> dict[str, Any]:
    """Probe this machine and choose the link rate: the content of `regime.json`."""
    from prunex.training.log import hardware_name  # lazy: pandas (prunex.training.log), only for the probe

    target = target_share()
    probe = probe_compute(nodes, procs_per_node, model, dataset, data_root, batch_size, lr, iterations)
    link_bytes, buckets = ddp_step_bytes(model, nodes, procs_per_node, bucket_cap_mb)
    chosen = choose_bandwidth(probe["compute_s"], buckets, nodes * procs_per_node, target["target_share"])
    kbit = max(1, round(chosen["bandwidth_bits_per_s"] / 1e3))
    return {
        **target,
        "probe": probe,
        "ddp_buckets_bytes": buckets,
        "ddp_link_bytes": link_bytes,
        "alpha_s": MINICLUSTER_ALPHA_S,
        "predicted_ddp_comm_s": chosen["predicted_ddp_comm_s"],
        "bandwidth_mbit": kbit / 1e3,
        "tc_rate": f"{kbit}kbit",
        "share_tolerance": SHARE_TOLERANCE,
        "oversubscription": oversubscription(nodes * procs_per_node, probe["cores"]),
        "binding": "one core per process, rank r on core r mod cores (prunex.cluster.regime.bind_to_core)",
        "hardware": hardware_name("cpu"),
        "created": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def read(path: str | Path | None = None) -> dict[str, Any] | None:
    """The regime file at ``path`` (default: ``$PRUNEX_REGIME``), or None when there is none."""
    path = path or os.environ.get(REGIME_ENV)
    if not path or not Path(path).is_file():
        return None
    return json.loads(Path(path).read_text())


def describe(r: dict[str, Any]) -> str:
    """One line for logs and captions."""
    return (
        f"regime: DDP comm share target {100 * r['target_share']:.0f}% (paper: {r['paper_ddp_comm_s']:.2f} s comm / "
        f"{r['paper_compute_s']:.2f} s V100 compute), probe compute {r['probe']['compute_s']:.3f} s/iteration, "
        f"inter-node link {r['bandwidth_mbit']:.3g} Mbit/s, {r['oversubscription']}"
    )


def build_parser() -> argparse.ArgumentParser:
    """The command line of `python -m prunex.cluster.regime`; the probe's defaults are the regime profile's runs
    (model, topology, dataset: ./run_all.sh names only a dataset PRUNEX_LOCAL_DATASET sets)."""
    p = argparse.ArgumentParser(prog="python -m prunex.cluster.regime", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    pr = sub.add_parser("probe", help="measure compute per iteration, choose the link rate, write regime.json")
    pr.add_argument("--out", required=True, help="the file to write (RESULTS/regime.json); kept if it exists")
    pr.add_argument("--nodes", type=int, default=2)
    pr.add_argument("--procs-per-node", type=int, default=2)
    pr.add_argument("--model", default="resnet20")
    pr.add_argument("--dataset", default="digits")
    pr.add_argument("--data-root", default="")
    pr.add_argument("--batch-size", type=int, default=32)
    pr.add_argument("--lr", type=float, default=0.05)
    pr.add_argument("--iterations", type=int, default=20)
    sh = sub.add_parser("show", help="print a regime.json in one line")
    sh.add_argument("path")
    return p


def main(argv: list[str] | None = None) -> int:
    def fail(msg: str) -> int:
        print(f"error: {msg}", file=sys.stderr)
        return 2

    args = build_parser().parse_args(argv)
    path = Path(args.path if args.cmd == "show" else args.out)
    try:
        r = read(path)
        line = None if r is None else describe(r)
    except (ValueError, KeyError, TypeError) as e:  # not JSON, or not a regime file's keys
        return fail(f"{path} is not a regime file ({type(e).__name__}: {e}); remove it to probe again")
    if args.cmd == "show":
        if line is None:
            return fail(f"no regime file at {path}")
        print(line)
        return 0
    if line is not None:
        print(f"kept {path} (made {r.get('created', '?')}): {line}")
        return 0
    if args.nodes < 1 or args.procs_per_node < 1 or args.iterations < 1 or args.batch_size < 1:
        return fail("--nodes, --procs-per-node, --iterations and --batch-size must be >= 1")
    if not 0.0 < args.lr < math.inf:  # the probe's ranks failed on it, after the launch, with no cause (2026-12-08)
        return fail(f"--lr must be a positive finite learning rate, got {args.lr!r}")
    if args.model not in MODEL_NAMES or args.dataset not in DATASET_NAMES:  # not a traceback of the probe's ranks
        return fail(
            f"--model {args.model} / --dataset {args.dataset}: known models {', '.join(MODEL_NAMES)}; "
            f"datasets {', '.join(DATASET_NAMES)}"
        )
    try:
        check_writable(path, "--out", folder=False)  # before the probe's minute, not when its result is written
    except ConfigError as e:
        return fail(str(e))
    out = path
    r = calibrate(
        args.nodes,
        args.procs_per_node,
        args.model,
        args.dataset,
        args.data_root,
        args.batch_size,
        args.lr,
        args.iterations,
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(r, indent=2, sort_keys=True) + "\n")
    tmp.replace(out)
    print(f"wrote {out}: {describe(r)}")
    print(f"  target: {r['derivation']}")
    print(
        f"  DDP moves {r['ddp_link_bytes'] / 1e6:.4f} MB per step over a node link; predicted comm "
        f"{r['predicted_ddp_comm_s']:.3f} s per step at {r['tc_rate']}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
