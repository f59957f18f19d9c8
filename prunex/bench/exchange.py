"""Per synchronisation, the inter-node cost of DDP's step and of PruneX's exchange with each issue-18
option, from the performance model (`prunex.perfmodel`) on a cluster file.

Run::

    PYTHONPATH=. python -m prunex.bench.exchange [--cluster puhti-dual-rail] [--model resnet152]
        [--nodes 16] [--channel-keep 0.5]

Rows: DDP's step (one flat AllReduce of the fp32 gradients in its buckets), PruneX as in the paper
(leaders' AllReduce of the fp32 compact buckets), then each option (``--wire-dtype bf16``,
``--inter-exchange sharded``, pipelined buckets) and all of them. Columns: bytes each node's link
carries (`prunex.commcost.ring_bytes`, job total / M) and the modelled seconds on the inter-node link
(`prunex.perfmodel.formulas.time_of` of every collective whose group crosses nodes), each as a ratio
to DDP's step (DDP / option: how many times less). Steady state: mask frozen, no mask sync.

Honesty: modelled, not measured. The model prices link time only, so pipelining (which hides
compress/decompress behind the transfers, it does not shorten them) shows no change here. The
measured version on the mini Slurm cluster (kernel byte counters, wait-free time) is not built yet.
"""

from __future__ import annotations

import argparse
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


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cluster", default="puhti-dual-rail", help="cluster file name or path")
    p.add_argument("--model", default="resnet152")
    p.add_argument("--nodes", type=int, default=16, help="M (the paper's 64 GPUs: 16 nodes of 4)")
    p.add_argument("--channel-keep", type=float, default=0.5)
    args = p.parse_args(argv)
    table = rows(args.cluster, args.model, args.nodes, args.channel_keep)
    c = load_cluster(args.cluster)
    print(
        f"# modelled (prunex.perfmodel), not measured: {c.name}, {args.nodes} x {c.gpus_per_node}, "
        f"{c.network.inter_nics} NIC(s) per node; {args.model}, channel keep {args.channel_keep}; per synchronisation"
    )
    print(f"{'exchange':32s} {'MB/node link':>13s} {'x less':>7s} {'inter s':>9s} {'x less':>7s}")
    ddp_b, ddp_s = table[0][1], table[0][2]
    for name, nbytes, sec in table:
        print(f"{name:32s} {nbytes / 1e6:13.2f} {ddp_b / nbytes:7.2f} {sec:9.5f} {ddp_s / sec:7.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
