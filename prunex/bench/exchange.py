"""Per synchronisation, the inter-node cost of DDP's step and of PruneX's exchange with each issue-18
option, from the performance model (`prunex.perfmodel`) on a cluster file.

Run::

    PYTHONPATH=. python -m prunex.bench.exchange [--cluster puhti-dual-rail] [--model resnet152]
        [--nodes 16] [--channel-keep 0.5]
    PYTHONPATH=. python -m prunex.bench.exchange --measure [--iterations 3] [--inter-bw-gbit 1]

Rows: DDP's step (one flat AllReduce of the fp32 gradients in its buckets), PruneX as in the paper
(leaders' AllReduce of the fp32 compact buckets), then each option (``--wire-dtype bf16``,
``--inter-exchange sharded``, pipelined buckets) and all of them. Columns: bytes each node's link
carries (`prunex.commcost.ring_bytes`, job total / M) and the modelled seconds on the inter-node link
(`prunex.perfmodel.formulas.time_of` of every collective whose group crosses nodes), each as a ratio
to DDP's step (DDP / option: how many times less). Steady state: mask frozen, no mask sync.

Honesty: modelled, not measured. The model prices link time only, so pipelining (which hides
compress/decompress behind the transfers, it does not shorten them) shows no change here.

``--measure`` runs the same rows for real: 2 x 2 processes on this machine (`prunex.launch`, local
executor, nodes emulated, the alpha-beta link model at ``--inter-bw-gbit``; ResNet-20 on digits),
and reads each run's ``comm.parquet``: per synchronisation (a DDP step, an H-SADMM outer iteration,
iterations 1.. after warm-up), node 0's inter-node bytes (the ring model's estimate, not kernel
counters: that needs the mini Slurm cluster, not built here) and its inter-node seconds (crossing
collectives only; waiting for stragglers is the separate barrier, so these are wait-free; the
slowest of node 0's ranks). DDP's hook collectives are not delayed by the alpha-beta model, so its
seconds are loopback time and overlap the backward pass; a pipelined AllReduce's span runs from its
launch to its wait and so includes the compress work it overlapped. Compare bytes across all rows,
seconds only among the non-pipelined PruneX rows.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import replace

from prunex.commcost import crosses, ring_bytes
from prunex.perfmodel.calibrate import load_cluster
from prunex.perfmodel.formulas import time_of
from prunex.perfmodel.workload import Options, Workload, ddp_workload, hsadmm_workload, kept_from_keep, model_spec


def inter_cost(work: Workload, nodes: int, procs: int, network: object) -> tuple[float, float]:
    """(bytes on each node's link, seconds on the inter-node link) of one synchronisation."""
    nbytes = seconds = 0.0
    for c in work.collectives:
        if c.op == "barrier" or not crosses(c.level, nodes):
            continue
        nbytes += c.count * ring_bytes(c.level, c.op, c.nbytes, nodes, procs)[0] / nodes
        seconds += time_of(c, nodes, procs, network)
    return nbytes, seconds


def rows(cluster: str, model: str, nodes: int, channel_keep: float) -> list[tuple[str, float, float]]:
    """(name, bytes per node link, seconds) per row, DDP's step first."""
    c = load_cluster(cluster)
    procs = c.gpus_per_node
    spec = model_spec(model)
    base = Options(channel_keep=channel_keep, procs_per_node=procs)
    kept = kept_from_keep(spec, base.filter_keep, base.channel_keep, base.layers)
    variants = {
        "PruneX, paper (leader, fp32)": base,
        "+ --wire-dtype bf16": replace(base, wire_bytes=2),
        "+ --inter-exchange sharded": replace(base, inter_exchange="sharded"),
        "+ pipelined buckets": base,
        "all together": replace(base, wire_bytes=2, inter_exchange="sharded"),
    }
    out = [("DDP step (fp32 gradients)", *inter_cost(ddp_workload(spec, base), nodes, procs, c.network))]
    for name, opts in variants.items():
        out.append((name, *inter_cost(hsadmm_workload(spec, kept, opts, shard=1), nodes, procs, c.network)))
    return out


MEASURED = {  # row -> (method, ADMMConfig changes)
    "DDP step (fp32 gradients)": ("ddp", {}),
    "PruneX, paper (leader, fp32)": ("hsadmm", {"pipeline_buckets": False}),
    "+ --wire-dtype bf16": ("hsadmm", {"pipeline_buckets": False, "wire_dtype": "bf16"}),
    "+ --inter-exchange sharded": ("hsadmm", {"pipeline_buckets": False, "inter_exchange": "sharded"}),
    "+ pipelined buckets": ("hsadmm", {"pipeline_buckets": True}),
    "all together": ("hsadmm", {"pipeline_buckets": True, "wire_dtype": "bf16", "inter_exchange": "sharded"}),
}


def measure(args: argparse.Namespace, results: str) -> list[tuple[str, float, float]]:
    """(name, node 0's inter-node bytes, its inter-node seconds) per synchronisation, measured."""
    import pandas as pd

    from prunex.config import ADMMConfig, LinkConfig, RunConfig
    from prunex.launch import launch

    link = LinkConfig(model="alpha-beta", alpha_s=args.inter_latency_s, bandwidth_gbit=args.inter_bw_gbit)
    common = {
        "model": "resnet20",
        "dataset": "digits",
        "nodes": 2,
        "procs_per_node": 2,
        "results": results,
        "experiment": "bench_exchange",
        "executor": "local",
        "eval_every": 10**6,
        "bn_batches": 0,
        "link": link,
        "epochs": 1,
    }
    out = []
    for name, (method, changes) in MEASURED.items():
        admm = ADMMConfig(
            iterations=args.iterations + 1,
            local_epochs=1,
            stop_on_convergence=False,
            channel_keep=args.channel_keep,
            freeze_iteration=1,
            bucket_mb=args.bucket_mb,
            **changes,
        )
        cfg = RunConfig(method=method, name=f"row{len(out)}-{method}", admm=admm, **common)
        run_dir = launch(cfg, echo=False)
        comm = pd.read_parquet(run_dir / "comm.parquet")
        c = comm[(comm["node"] == 0) & (comm["iteration"] >= 1) & (comm["op"] != "barrier")]
        c = c[c["level"].isin(["inter", "shard", "flat"])]
        if method == "ddp":
            c = c[c["iteration"] <= args.iterations]
        nbytes = c.groupby("iteration")["inter_bytes"].sum().mean()
        seconds = c.groupby(["iteration", "rank"])["seconds"].sum().groupby("iteration").max().median()
        out.append((name, float(nbytes), float(seconds)))
        print(f"[bench] {name}: {run_dir}", file=sys.stderr, flush=True)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--measure", action="store_true", help="run 2 x 2 processes here instead of the model")
    p.add_argument("--iterations", type=int, default=3, help="--measure: synchronisations measured")
    p.add_argument("--inter-bw-gbit", type=float, default=1.0, help="--measure: alpha-beta link rate")
    p.add_argument("--inter-latency-s", type=float, default=5e-5, help="--measure: alpha-beta latency")
    p.add_argument("--bucket-mb", type=float, default=0.25, help="--measure: buckets (ResNet-20 is 1 MB)")
    p.add_argument("--cluster", default="puhti-dual-rail", help="cluster file name or path")
    p.add_argument("--model", default="resnet152")
    p.add_argument("--nodes", type=int, default=16, help="M (the paper's 64 GPUs: 16 nodes of 4)")
    p.add_argument("--channel-keep", type=float, default=0.5)
    args = p.parse_args(argv)
    if args.measure:
        with tempfile.TemporaryDirectory(prefix="prunex-exchange-") as tmp:
            table = measure(args, tmp)
        print(
            f"# measured: 2 x 2 processes on one machine (emulated nodes), alpha-beta link {args.inter_bw_gbit:g}"
            f" Gbit/s, ResNet-20 digits, channel keep {args.channel_keep}, {args.bucket_mb:g} MB buckets; per "
            "synchronisation, node 0; bytes: ring-model estimate; DDP's seconds are not link-delayed (docstring)"
        )
        _print(table)
        return 0
    table = rows(args.cluster, args.model, args.nodes, args.channel_keep)
    c = load_cluster(args.cluster)
    print(
        f"# modelled (prunex.perfmodel), not measured: {c.name}, {args.nodes} x {c.gpus_per_node}, "
        f"{c.network.inter_nics} NIC(s) per node; {args.model}, channel keep {args.channel_keep}; per synchronisation"
    )
    _print(table)
    return 0


def _print(table: list[tuple[str, float, float]]) -> None:
    print(f"{'exchange':32s} {'MB/node link':>13s} {'x less':>7s} {'inter s':>9s} {'x less':>7s}")
    ddp_b, ddp_s = table[0][1], table[0][2]
    for name, nbytes, sec in table:
        print(f"{name:32s} {nbytes / 1e6:13.4f} {ddp_b / nbytes:7.2f} {sec:9.5f} {ddp_s / sec:7.2f}")


if __name__ == "__main__":
    raise SystemExit(main())
