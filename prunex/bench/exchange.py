"""Per synchronisation, the inter-node cost of DDP's step and of PruneX's exchange with each issue-18
option, from the performance model (`prunex.perfmodel`) on a cluster file.

Run::

    PYTHONPATH=. python -m prunex.bench.exchange [--cluster puhti-dual-rail] [--model resnet152]
        [--nodes 16] [--channel-keep 0.5]
    PYTHONPATH=. python -m prunex.bench.exchange --measure [--iterations 3] [--inter-bw-gbit 1]
    eval "$(python -m prunex.minicluster env)"; PYTHONPATH=. python -m prunex.bench.exchange --measure \
        --executor slurm [--out exchange.csv]          # on the mini Slurm cluster, at its tc rate

Rows: DDP's step (one flat AllReduce of the fp32 gradients in its buckets), PruneX as in the paper
(leaders' AllReduce of the fp32 compact buckets), then each option (``--wire-dtype bf16``,
``--inter-exchange sharded``, pipelined buckets) and all of them. Columns: bytes each node's link
carries (`prunex.comm.cost.ring_bytes`, job total / M) and the modelled seconds on the inter-node link
(`prunex.perfmodel.formulas.time_of` of every collective whose group crosses nodes), each as a ratio
to DDP's step (DDP / option: how many times less). Steady state: mask frozen, no mask sync.

Honesty: modelled, not measured. The model prices link time only, so pipelining (which hides
compress/decompress behind the transfers, it does not shorten them) shows no change here.

``--measure`` runs the same rows for real: 2 x 2 processes, ResNet-20 on digits, short H-SADMM runs
(mask frozen after the first outer iteration) and a DDP run, each a real `prunex.cluster.launch` run, read
per synchronisation (a DDP step, an H-SADMM outer iteration; iterations 1.. after warm-up):

- ``--executor slurm`` (on the mini Slurm cluster, ``eval "$(python -m prunex.minicluster env)"``
  first): the links are the cluster's tc-shaped veths. Bytes are node 0's kernel counters
  (``wire.parquet``: what its interface transmitted during the iteration, headers and the small
  control messages included); seconds are the wait-free inter-node time (`prunex.comm.waitfree`: per
  collective call the last-arriving member's seconds beyond the calls in flight before it (`exclusive_s`),
  concurrent groups' slowest, summed over the calls whose group crosses nodes; waiting for stragglers is
  left out). DDP's buckets cross the same shaped link, so every row's seconds compare.
- ``--executor local``: nodes emulated on this machine, the alpha-beta link model at
  ``--inter-bw-gbit``; bytes are the ring model's estimate from ``comm.parquet``, not kernel
  counters. DDP's hook collectives are delayed by the alpha-beta model too (`Comm.record_future`,
  since e4a6f92; tables measured before say otherwise).

A pipelined AllReduce's span runs from its launch to its completion (gloo's future; before 2026-11-28 to its
wait, so it included the compress work it overlapped), and calls in flight together count once.
``--out FILE`` writes the table as csv (row, bytes, seconds, ratios to DDP's step and
how they were measured), which the report reads when it lies under RESULTS/bench/.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import replace

from prunex.cluster.preflight import check_outputs
from prunex.comm.cost import crosses, ring_bytes
from prunex.comm.waitfree import last_arriver_comm
from prunex.minicluster.accounting import STATE_FILE
from prunex.perfmodel.calibrate import CalibrationError, load_cluster
from prunex.perfmodel.formulas import time_of
from prunex.perfmodel.workload import Options, Workload, ddp_workload, hsadmm_workload, kept_from_keep, model_spec
from prunex.training.config import ADMMConfig, ConfigError, LinkConfig, RunConfig
from prunex.training.log import hardware_name


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
    """(name, node 0's inter-node bytes, inter-node seconds) per synchronisation, measured (docstring)."""
    import pandas as pd

    from prunex.cluster.launch import launch  # lazy: torch (prunex.training.checkpoint), only to measure

    if args.executor == "slurm":
        link = LinkConfig()  # the mini cluster's tc shapes the links
    else:
        link = LinkConfig(model="alpha-beta", alpha_s=args.inter_latency_s, bandwidth_gbit=args.inter_bw_gbit)
    common = {
        "model": "resnet20",
        "dataset": "digits",
        "nodes": 2,
        "procs_per_node": 2,
        "results": results,
        "experiment": "bench_exchange",
        "executor": args.executor,
        "device": "cpu",
        "eval_every": 10**6,
        "bn_batches": 0,
        "link": link,
        "epochs": 1,
        "bind_cores": args.executor == "slurm",
    }
    configs = {}  # every row's configuration before the first run: a value RunConfig refuses is refused here
    for row, (name, (method, changes)) in enumerate(MEASURED.items()):
        admm = ADMMConfig(
            iterations=args.iterations + 1,
            local_epochs=1,
            stop_on_convergence=False,
            channel_keep=args.channel_keep,
            freeze_iteration=1,
            bucket_mb=args.bucket_mb,
            **changes,
        )
        configs[name] = RunConfig(method=method, name=f"row{row}-{method}", admm=admm, **common)
    out = []
    for name, cfg in configs.items():
        method = cfg.method
        run_dir = launch(cfg, echo=False)
        comm = pd.read_parquet(run_dir / "comm.parquet")
        last = args.iterations if method == "ddp" else 10**9
        c = comm[(comm["iteration"] >= 1) & (comm["iteration"] <= last) & (comm["op"] != "barrier")]
        crossing = c[c["level"].isin(["inter", "shard", "flat"])]
        wire_path = run_dir / "wire.parquet"
        if args.executor == "slurm" and wire_path.exists():
            wire = pd.read_parquet(wire_path)
            w = wire[(wire["node"] == 0) & (wire["iteration"] >= 1) & (wire["iteration"] <= last)]
            nbytes = float(w["tx_bytes"].mean())
        else:
            n0 = crossing[crossing["node"] == 0]
            nbytes = float(n0.groupby("iteration")["inter_bytes"].sum().mean())
        # per call its last arriver's seconds beyond the calls in flight before it, concurrent groups' slowest,
        # summed per iteration: the wait-free time every figure reads (`prunex.comm.waitfree`)
        per_iteration = last_arriver_comm(crossing)
        out.append((name, nbytes, float(per_iteration.median())))
        print(f"[bench] {name}: {run_dir}", file=sys.stderr, flush=True)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m prunex.bench.exchange", description=__doc__.splitlines()[0])
    p.add_argument("--measure", action="store_true", help="run 2 x 2 processes here instead of the model")
    p.add_argument("--executor", choices=("local", "slurm"), default="local", help="--measure: where (docstring)")
    p.add_argument("--out", default=None, help="also write the table to this csv")
    p.add_argument("--iterations", type=int, default=3, help="--measure: synchronisations measured")
    p.add_argument("--inter-bw-gbit", type=float, default=1.0, help="--measure: alpha-beta link rate")
    p.add_argument("--inter-latency-s", type=float, default=5e-5, help="--measure: alpha-beta latency")
    p.add_argument("--bucket-mb", type=float, default=0.25, help="--measure: buckets (ResNet-20 is 1 MB)")
    p.add_argument("--cluster", default="puhti-dual-rail", help="cluster file name or path")
    p.add_argument("--model", default="resnet152")
    p.add_argument("--nodes", type=int, default=16, help="M (the paper's 64 GPUs: 16 nodes of 4)")
    p.add_argument("--channel-keep", type=float, default=0.5)
    p.add_argument("--workdir", default=None, help="--measure: where the runs' temporary directory goes")
    args = p.parse_args(argv)
    if args.measure and args.workdir is not None and not os.path.isdir(args.workdir):
        p.error(f"--workdir {args.workdir} is not a directory; create it or name another")  # before any run
    if args.nodes < 1 or args.iterations < 1:
        p.error(f"--nodes and --iterations must be >= 1, got {args.nodes} and {args.iterations}")
    if not 0 < args.channel_keep <= 1:
        p.error(f"--channel-keep must be in (0, 1], got {args.channel_keep}")
    try:
        check_outputs(out=args.out)
        if not args.measure:  # an unknown cluster file or model: one line
            load_cluster(args.cluster)
            model_spec(args.model)
    except (ConfigError, CalibrationError, ValueError) as e:
        p.error(str(e))
    if args.measure:
        with tempfile.TemporaryDirectory(prefix="prunex-exchange-", dir=args.workdir) as tmp:
            try:
                table = measure(args, tmp)
            except ConfigError as e:  # the rows' configurations, made before the first run
                p.error(str(e))
        cpu = hardware_name("cpu")
        if args.executor == "slurm":
            how = (
                f"measured on the mini Slurm cluster ({_link_rate()}) on {cpu}, 2 x 2 processes bound to cores; bytes: "
                "node 0's kernel counters; seconds: wait-free inter-node time, calls in flight together counted once"
            )
        else:
            how = (
                f"measured on {cpu}: 2 x 2 processes on one machine (emulated nodes), alpha-beta link "
                f"{args.inter_bw_gbit:g} Gbit/s; bytes: ring-model estimate; seconds: wait-free, calls in flight "
                "together counted once"
            )
        print(f"# {how}; ResNet-20 digits, channel keep {args.channel_keep}, {args.bucket_mb:g} MB buckets; per sync")
    else:
        table = rows(args.cluster, args.model, args.nodes, args.channel_keep)
        c = load_cluster(args.cluster)
        how = (
            f"modelled (prunex.perfmodel), not measured: {c.name}, {args.nodes} x {c.gpus_per_node}, "
            f"{c.network.inter_nics} NIC(s) per node; {args.model}, channel keep {args.channel_keep}"
        )
        print(f"# {how}; per synchronisation")
    _print(table)
    if args.out:
        _write(table, args.out, how)
    return 0


def _link_rate() -> str:
    """The mini cluster's tc rate, from its state file (what `minicluster status` prints)."""
    import json
    from pathlib import Path

    state = Path(os.environ.get("PRUNEX_MINICLUSTER_DIR", ".prunex-cluster")) / STATE_FILE
    try:
        bw = json.loads(state.read_text()).get("inter_bw")
    except (OSError, ValueError):
        bw = None
    return f"tc {bw}" if bw else "tc rate unknown"


def _write(table: list[tuple[str, float, float]], path: str, how: str) -> None:
    import pandas as pd

    ddp_b, ddp_s = table[0][1], table[0][2]
    df = pd.DataFrame(
        [
            {
                "row": name,
                "bytes_per_node_link": b,
                "inter_s": sec,
                "bytes_x_less_than_ddp": ddp_b / b,
                "time_x_less_than_ddp": ddp_s / sec,
                "how": how,
            }
            for name, b, sec in table
        ]
    )
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    df.to_csv(path, index=False)
    print(f"wrote {path}")


def _print(table: list[tuple[str, float, float]]) -> None:
    print(f"{'exchange':32s} {'MB/node link':>13s} {'x less':>7s} {'inter s':>9s} {'x less':>7s}")
    ddp_b, ddp_s = table[0][1], table[0][2]
    for name, nbytes, sec in table:
        print(f"{name:32s} {nbytes / 1e6:13.4f} {ddp_b / nbytes:7.2f} {sec:9.5f} {ddp_s / sec:7.2f}")


if __name__ == "__main__":
    raise SystemExit(main())
