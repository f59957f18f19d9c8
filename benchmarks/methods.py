"""Per-iteration cost of every method on one topology: bytes, communication, compression overhead, time.

Run::

    PYTHONPATH=. python -m benchmarks.methods [--iterations 10] [--nodes 2 --procs-per-node 2]
        [--admm-iterations 2] [--topk-ratio 0.01] [--density 0.5] [--link-model none|alpha-beta]
        [--results DIR]

It runs `ddp` (fp32), `ddp` with bf16 gradients (`DDPConfig(grad_dtype="bf16")`, DDP's
`bf16_compress_hook`), `topk`, `pactrain`, `flat_admm` and `hsadmm` one after the other through
`prunex.cluster.launch.launch` (local executor: M x P processes on this machine, nodes emulated) into a
temporary results directory (kept with ``--results``), reads each run's ``steps.parquet``,
``comm.parquet`` and ``overhead.parquet``, and prints one table:

- *samples/it*: training samples all ranks together process per iteration (the mean over the
  measured iterations). An SGD iteration (ddp, topk, pactrain) is one optimizer step; an ADMM
  iteration (flat_admm, hsadmm) is an outer iteration of ``local_epochs`` epochs plus consensus,
  run here with ``local_epochs = 1`` (paper sec. 5.1.5 uses 5-10), so it covers a whole epoch.
  Compare per-sample costs across the two kinds, not per-iteration ones.
- *inter MB/it*: ``steps.inter_bytes``, the estimated bytes all ranks put on inter-node links
  (`prunex.comm.volume`: ring model, ranks blockwise on nodes).
- *payload MB/it*: the bytes one rank passes into collectives (``comm.bytes`` summed per
  iteration and rank, mean over ranks): for Top-K, values and indices; for PacTrain, the packed
  buffer (the mask broadcast happens at iteration 0 only, see below).
- *comm s/it*: ``steps.comm_s`` (mean over ranks of the recorded collective seconds). DDP's
  seconds run from a bucket's launch to its completion and overlap the backward pass.
- *overhead s/it*: compression work outside communication from the ``overhead`` table:
  Top-K selection + scatter, PacTrain pack + unpack (+ mask computation), H-SADMM compress
  (leaders) + decompress; 0 for ddp (the bf16 cast happens inside DDP's hook and is part of its
  comm seconds); "-" where a method does not record it (flat_admm, which does not shrink).
- *iter s*: ``steps.iter_s``, wall time of the iteration (evaluation excluded), mean over ranks.
- *iter s/1k samples*: iter s per 1000 samples, the per-sample cost that compares SGD and ADMM
  iterations.

Bytes are means over the measured iterations; seconds are medians over them (of the per-iteration
means over ranks), which resist the load spikes of a shared machine. Each cell also gives the
ratio to fp32 ddp (not for the overhead, which is 0 for ddp). Iteration 0 is excluded (warm-up,
DDP's initial parameter broadcast, PacTrain's first mask broadcast); SGD runs therefore run
``iterations + 1`` steps (rounded up to whole epochs; the extra steps are ignored), ADMM runs
``admm_iterations + 1`` outer iterations. The header names the hardware, topology, dataset,
model and link model. Accuracy is not measured here (evaluation happens once, at the end, and
BatchNorm re-estimation is off).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from prunex.cluster.exits import refuse
from prunex.cluster.launch import launch
from prunex.cluster.options import check_link_options
from prunex.cluster.preflight import check_outputs
from prunex.training.config import ADMMConfig, ConfigError, DDPConfig, LinkConfig, PacTrainConfig, RunConfig, TopKConfig

BASELINE = "ddp"


@dataclass(frozen=True)
class BenchRun:
    label: str  # row name in the table
    config: RunConfig
    measured: int  # iterations averaged (1 .. measured)


@dataclass
class Row:
    label: str
    samples: float
    inter_mb: float
    payload_mb: float
    comm_s: float
    overhead_s: float | None
    iter_s: float


def steps_per_epoch(cfg: RunConfig) -> tuple[int, int]:
    """(steps per epoch, samples in one rank's shard), as `prunex.training.data.shard_loader` makes them."""
    from prunex.training.data import load_dataset  # lazy: torchvision, not loaded for --help

    n = len(load_dataset(cfg.dataset, cfg.data_root, train=True))
    shard = n // cfg.world_size  # DistributedSampler(drop_last=True)
    return math.ceil(shard / cfg.batch_size), shard


def plan(args: argparse.Namespace, results: str) -> list[BenchRun]:
    """The runs of the benchmark (one `RunConfig` per table row)."""
    rates = {"alpha_s": args.inter_latency_s, "bandwidth_gbit": args.inter_bw_gbit}
    link = LinkConfig(model=args.link_model, **{k: v for k, v in rates.items() if v is not None})
    common: dict[str, Any] = {
        "model": args.model,
        "dataset": args.dataset,
        "data_root": args.data_root,
        "nodes": args.nodes,
        "procs_per_node": args.procs_per_node,
        "results": results,
        "experiment": "bench_methods",
        "executor": "local",
        "seed": args.seed,
        "eval_every": 10**6,
        "bn_batches": 0,
        "link": link,
    }
    probe = RunConfig(method=BASELINE, **common)
    spe, _ = steps_per_epoch(probe)
    epochs = math.ceil((args.iterations + 1) / spe)
    sgd = {**common, "epochs": epochs}
    admm = ADMMConfig(iterations=args.admm_iterations + 1, local_epochs=1, stop_on_convergence=False)
    return [
        BenchRun("ddp", RunConfig(method="ddp", name="ddp", **sgd), args.iterations),
        BenchRun(
            "ddp bf16",
            RunConfig(method="ddp", name="ddp-bf16", ddp=DDPConfig(grad_dtype="bf16"), **sgd),
            args.iterations,
        ),
        BenchRun(
            f"topk {args.topk_ratio:g}",
            RunConfig(method="topk", name="topk", topk=TopKConfig(ratio=args.topk_ratio), **sgd),
            args.iterations,
        ),
        BenchRun(
            f"pactrain {args.density:g}",
            RunConfig(method="pactrain", name="pactrain", pactrain=PacTrainConfig(density=args.density), **sgd),
            args.iterations,
        ),
        BenchRun(
            "flat_admm E=1", RunConfig(method="flat_admm", name="flat_admm", admm=admm, **common), args.admm_iterations
        ),
        BenchRun("hsadmm E=1", RunConfig(method="hsadmm", name="hsadmm", admm=admm, **common), args.admm_iterations),
    ]


def samples_per_iteration(cfg: RunConfig, iterations: pd.Series) -> float:
    """Mean number of samples all ranks process in the given iterations."""
    spe, shard = steps_per_epoch(cfg)
    if cfg.method in ("hsadmm", "flat_admm"):
        return float(cfg.admm.local_epochs * shard * cfg.world_size)
    last = shard - cfg.batch_size * (spe - 1)  # the epoch's last, smaller batch
    sizes = [cfg.batch_size if k % spe < spe - 1 else last for k in iterations]
    return float(sum(sizes) / max(len(sizes), 1) * cfg.world_size)


def summarise(run: BenchRun, run_dir: Path) -> Row:
    """One table row from a finished run's tables (iterations 1 .. run.measured)."""
    steps = pd.read_parquet(run_dir / "steps.parquet")
    comm = pd.read_parquet(run_dir / "comm.parquet")
    keep = steps[(steps["iteration"] >= 1) & (steps["iteration"] <= run.measured)]
    if keep.empty:
        raise RuntimeError(f"{run.label}: no iterations 1..{run.measured} in {run_dir / 'steps.parquet'}")
    its = set(keep["iteration"])
    c = comm[comm["iteration"].isin(its)]
    payload = c.groupby(["iteration", "rank"])["bytes"].sum().groupby("iteration").mean()
    payload = payload.reindex(sorted(its), fill_value=0.0)
    overhead: float | None = 0.0 if run.config.method == "ddp" else None
    if (run_dir / "overhead.parquet").exists():
        o = pd.read_parquet(run_dir / "overhead.parquet")
        o = o[o["iteration"].isin(its)]
        cols = [col for col in o.columns if col.endswith("_s")]
        per_rank = o.groupby(["iteration", "rank"])[cols].sum().sum(axis=1)
        overhead = float(per_rank.groupby("iteration").mean().median())
    return Row(
        label=run.label,
        samples=samples_per_iteration(run.config, keep["iteration"]),
        inter_mb=float(keep["inter_bytes"].mean()) / 1e6,
        payload_mb=float(payload.mean()) / 1e6,
        comm_s=float(keep["comm_s"].median()),
        overhead_s=overhead,
        iter_s=float(keep["iter_s"].median()),
    )


def _cell(value: float | None, base: float | None, fmt: str) -> str:
    if value is None:
        return "-"
    text = format(value, fmt)
    if base is None or base == 0:
        return text
    return f"{text} ({value / base:.2f}x)"


def render(rows: list[Row], header: list[str]) -> str:
    """The table, with every quantity also as a ratio to the fp32 ddp row."""
    base = next(r for r in rows if r.label == BASELINE)
    table = pd.DataFrame(
        {
            "method": [r.label for r in rows],
            "samples/it": [f"{r.samples:.0f}" for r in rows],
            "inter MB/it": [_cell(r.inter_mb, base.inter_mb, ".3f") for r in rows],
            "payload MB/it": [_cell(r.payload_mb, base.payload_mb, ".3f") for r in rows],
            "comm s/it": [_cell(r.comm_s, base.comm_s, ".4f") for r in rows],
            "overhead s/it": [_cell(r.overhead_s, None, ".4f") for r in rows],
            "iter s": [_cell(r.iter_s, base.iter_s, ".4f") for r in rows],
            "iter s/1k samples": [
                _cell(1e3 * r.iter_s / r.samples, 1e3 * base.iter_s / base.samples, ".3f") for r in rows
            ],
        }
    )
    return "\n".join([*header, table.to_string(index=False)])


def header_lines(args: argparse.Namespace, first_run: Path) -> list[str]:
    meta = json.loads((first_run / "meta.json").read_text())
    cfg = json.loads((first_run / "config.json").read_text())
    topo = meta["topology"]
    link = cfg["link"]
    link_text = link["model"]
    if link["model"] == "alpha-beta":
        link_text += (
            f" (alpha {link['alpha_s']:g} s, {link['bandwidth_gbit']:g} Gbit/s inter-node; DDP's hook-recorded "
            "collectives are delayed by it too, `Comm.record_future`)"
        )
    elif link["model"] == "none":
        link_text += " (no shaping: ranks of emulated nodes talk over loopback)" if topo.get("emulated") else ""
    return [
        f"# benchmarks.methods  {time.strftime('%Y-%m-%d %H:%M')}  torch {meta['packages']['torch']}",
        f"# hardware: {meta['hardware']} ({meta['device']}, backend {meta['backend']}, "
        f"{meta['cpu_threads']} threads/rank)  host {meta['hostname']}",
        f"# topology: {topo['nodes']} nodes x {topo['procs_per_node']} procs"
        f"{' (emulated on one machine)' if topo.get('emulated') else ''}; dataset {cfg['dataset']}, model "
        f"{cfg['model']}, batch {cfg['batch_size']}/rank; link model: {link_text}",
        f"# iterations 1..{args.iterations} (SGD) and 1..{args.admm_iterations} (ADMM outer, E=1 "
        "local epoch): bytes are means, seconds medians; (x) = ratio to fp32 ddp; inter MB = all ranks' "
        "estimated inter-node bytes",
    ]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchmarks.methods", description=__doc__.split("\n")[0])
    p.add_argument("--iterations", type=int, default=10, help="measured SGD iterations (after iteration 0)")
    p.add_argument("--admm-iterations", type=int, default=2, help="measured ADMM outer iterations (after 0)")
    p.add_argument("--nodes", type=int, default=2)
    p.add_argument("--procs-per-node", type=int, default=2)
    p.add_argument("--model", default="resnet20")
    p.add_argument("--dataset", default="digits")
    p.add_argument("--data-root", default="")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--topk-ratio", type=float, default=0.01, help="paper sec. 5.1.4: 0.01")
    p.add_argument("--density", type=float, default=0.5, help="pactrain density")
    p.add_argument("--link-model", default="none", choices=["none", "alpha-beta"])
    p.add_argument("--inter-latency-s", type=float, help=f"alpha-beta only (default {LinkConfig.alpha_s:g})")
    p.add_argument("--inter-bw-gbit", type=float, help=f"alpha-beta only (default {LinkConfig.bandwidth_gbit:g})")
    p.add_argument("--results", default="", help="keep the runs here (default: a temporary directory)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.iterations < 1 or args.admm_iterations < 1:
        print("error: --iterations and --admm-iterations must be >= 1", file=sys.stderr)
        return 2
    try:
        given = [
            f
            for f, v in (("--inter-latency-s", args.inter_latency_s), ("--inter-bw-gbit", args.inter_bw_gbit))
            if v is not None
        ]
        check_link_options(args.link_model, given)
        check_outputs(args.results)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="prunex-bench-") as tmp:
        results = args.results or tmp
        try:
            runs = plan(args, results)  # every run's configuration, before the first run
        except ConfigError as e:  # a model, dataset, topology or ratio RunConfig refuses
            return refuse(e, {ConfigError: 2})
        rows, dirs = [], []
        for run in runs:
            t0 = time.perf_counter()
            run_dir = launch(run.config, echo=False)
            print(f"[bench] {run.label}: {time.perf_counter() - t0:.0f} s -> {run_dir}", file=sys.stderr, flush=True)
            rows.append(summarise(run, run_dir))
            dirs.append(run_dir)
        print(render(rows, header_lines(args, dirs[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
