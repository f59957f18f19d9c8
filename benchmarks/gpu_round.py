"""What one H-SADMM consensus round costs on one device, besides its communication (issue 27).

One rank (1 x 1; on a GPU NCCL, else gloo), CIFAR ResNet-152 on the offline digits set (made in the
results directory), channel keep 0.5, batch 128, 1,280 training images (10 SGD steps per local epoch),
`--iterations` outer iterations of one local epoch, the mask frozen at T_freeze = `--freeze`, no
evaluation until the end. From the run's own logs, per outer iteration:

- ``local_ms`` / ``consensus_ms``: phase 1 and phases 2-5 (`rounds.parquet`, the device's clock);
- ``comm_ms``: the union of the iteration's collective spans (`steps.parquet` ``comm_s``);
- ``other_ms = consensus_ms - comm_ms``: the round's time besides communication;
- ``shrink_ms``: compress + decompress (`overhead.parquet`), and ``compress_ms`` of it;
- ``inter_ms`` / ``inter_mb``: the inter-node AllReduces of the compact buckets (one rank: a local copy at
  most), and ``copy_ms``: one contiguous copy of the same bytes on the same device (CUDA events,
  median of 20), the memory-speed reference.

Targets (issue 27, on a GPU, frozen iterations after the first): shrink_ms <= 1, other_ms <= 30,
inter_ms <= 2 x copy_ms. The medians over those iterations are printed with the verdicts, and every
iteration is written to ``--out`` (CSV, device named in each row).

``--profile N`` then also profiles N frozen rounds of the same engine built in this process (one-rank
process group, synthetic batches) with `torch.profiler` and prints the ops with the most host time and the
most device time, and each round's wall time: where a round's time goes.

Run::

    PYTHONPATH=. python -m benchmarks.gpu_round [--device cuda] [--out saved-logs/bench/gpu_round.csv] [--profile 3]

On a CPU (``--device cpu --model resnet20``) it checks the plumbing only; the targets are for a GPU.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import torch
import torch.distributed as dist
from torch.profiler import ProfilerActivity, profile
from torch.utils.data import TensorDataset

from prunex.cluster.exits import refuse
from prunex.cluster.launch import launch
from prunex.cluster.preflight import check_outputs
from prunex.methods.base import build_method
from prunex.training.config import ADMMConfig, ConfigError, RunConfig
from prunex.training.data import make_digits
from prunex.training.device import device_option_error
from prunex.training.models import build_model
from prunex.training.topology import build_groups, discover

TARGET_SHRINK_MS = 1.0
TARGET_OTHER_MS = 30.0
TARGET_SPAN_OVER_COPY = 2.0


def copy_ms(nbytes: int, device: torch.device, repeats: int = 20) -> float:
    """Median milliseconds of one contiguous copy of ``nbytes`` on ``device`` (CUDA events on a GPU)."""
    n = max(1, nbytes // 4)
    src, dst = torch.randn(n, device=device), torch.empty(n, device=device)
    times = []
    for _ in range(repeats + 3):
        if device.type == "cuda":
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            dst.copy_(src)
            end.record()
            end.synchronize()
            times.append(begin.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            dst.copy_(src)
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times[3:])


def iteration_table(run_dir: Path, device: torch.device, freeze: int) -> pd.DataFrame:
    """One row per outer iteration of a finished 1 x 1 run (module docstring)."""
    steps = pd.read_parquet(run_dir / "steps.parquet").set_index("iteration")
    rounds = pd.read_parquet(run_dir / "rounds.parquet").set_index("iteration")
    overhead = pd.read_parquet(run_dir / "overhead.parquet").set_index("iteration")
    comm = pd.read_parquet(run_dir / "comm.parquet")
    inter = comm[(comm["level"] == "inter") & (comm["op"] == "allreduce")]
    # pipelined buckets' AllReduces are in flight together: each call's seconds beyond the spans of the calls that
    # started before it (`exclusive_s`, their union), not their sum, which counted a bucket's wait behind the
    # previous one on the same stream again (review, 2026-11-28; the H200 logs of that day summed `seconds`)
    span = "exclusive_s" if "exclusive_s" in inter.columns else "seconds"
    inter = inter.groupby("iteration").agg(inter_s=(span, "sum"), inter_bytes=("bytes", "sum"))
    out = pd.DataFrame(
        {
            "local_ms": rounds["local_s"] * 1e3,
            "consensus_ms": rounds["consensus_s"] * 1e3,
            "comm_ms": steps["comm_s"] * 1e3,
            "shrink_ms": (overhead["compress_s"] + overhead["decompress_s"]) * 1e3,
            "compress_ms": overhead["compress_s"] * 1e3,
            "inter_ms": inter["inter_s"] * 1e3,
            "inter_mb": inter["inter_bytes"] / 1e6,
        }
    )
    out["other_ms"] = out["consensus_ms"] - out["comm_ms"]
    out["frozen"] = out.index >= freeze
    out["copy_ms"] = [copy_ms(int(mb * 1e6), device) for mb in out["inter_mb"]]
    out.insert(0, "device", torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu")
    return out.reset_index()


def profile_rounds(device: torch.device, model: str, keep: float, rounds: int) -> None:
    """Print where the time of ``rounds`` frozen H-SADMM rounds goes (module docstring, ``--profile``)."""
    cuda = device.type == "cuda"
    if cuda:
        device = torch.device("cuda", torch.cuda.current_device() if device.index is None else device.index)
        torch.cuda.set_device(device)
    topo = discover(1, 1, env={"RANK": "0", "WORLD_SIZE": "1"})
    kwargs = {"device_id": device} if cuda else {}
    dist.init_process_group("nccl" if cuda else "gloo", store=dist.HashStore(), rank=0, world_size=1, **kwargs)
    try:
        groups = build_groups(topo, 60)
        data = TensorDataset(torch.randn(256, 3, 32, 32), torch.randint(0, 10, (256,)))
        admm = ADMMConfig(
            iterations=1, local_epochs=1, channel_keep=keep, freeze_iteration=1, retrain_epochs=rounds + 2
        )
        cfg = RunConfig(method="hsadmm", model=model, batch_size=128, bn_batches=2, admm=admm)
        torch.manual_seed(0)
        net = build_model(model).to(device)
        method = build_method(cfg, topo, groups, device, net, data, tempfile.mkdtemp())
        method.train_iteration(0)  # dynamic; the mask freezes
        method.engine.consensus(1, force_frozen=True)  # the frozen plans are made
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        walls = []
        with profile(activities=activities) as prof:
            for k in range(2, 2 + rounds):
                if cuda:
                    torch.cuda.synchronize(device)
                t0 = time.perf_counter()
                method.engine.consensus(k, force_frozen=True)
                if cuda:
                    torch.cuda.synchronize(device)
                walls.append((time.perf_counter() - t0) * 1e3)
                method.ctx.comm.drain()
        print(f"# profiled frozen rounds, wall ms each (profiler on): {[round(w, 1) for w in walls]}")
        averages = prof.key_averages()
        print(averages.table(sort_by="self_cpu_time_total", row_limit=15))
        if cuda:
            print(averages.table(sort_by="self_device_time_total", row_limit=12))
    finally:
        dist.destroy_process_group()


def _config(args: argparse.Namespace, results: Path, data: Path) -> RunConfig:
    """The one H-SADMM run this bench times (`ConfigError` for a value RunConfig refuses)."""
    return RunConfig(
        method="hsadmm",
        model=args.model,
        dataset="digits",
        executor="debug",
        device=args.device.split(":")[0],
        epochs=1,
        batch_size=128,
        train_subset=1280,
        eval_every=1000,
        bn_batches=2,
        admm=ADMMConfig(
            iterations=args.iterations, local_epochs=1, channel_keep=args.keep, freeze_iteration=args.freeze
        ),
        data_root=str(data),
        results=str(results),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gpu_round", description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--model", default="resnet152")
    parser.add_argument("--keep", type=float, default=0.5)
    parser.add_argument("--iterations", type=int, default=6)
    parser.add_argument("--freeze", type=int, default=2, help="T_freeze")
    parser.add_argument("--results", default="", help="results directory (default: a temporary one)")
    parser.add_argument("--out", default="", help="CSV of every iteration")
    parser.add_argument("--profile", type=int, default=0, help="also profile this many frozen rounds")
    args = parser.parse_args(argv)
    try:
        check_outputs(args.results, args.out)  # before the run: its table is written at the end
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    bad_device = device_option_error(args.device)
    if bad_device:  # before a run that would fail in its rank (a traceback after the job's start)
        print(f"error: {bad_device}", file=sys.stderr)
        return 2
    device = torch.device(args.device)
    results = Path(args.results or tempfile.mkdtemp(prefix="gpu_round-"))
    data = results / "data"
    try:
        config = _config(args, results, data)
    except ConfigError as e:  # a model, keep or count RunConfig refuses: before the digits are made
        if not args.results:
            shutil.rmtree(results, ignore_errors=True)
        return refuse(e, {ConfigError: 2})
    make_digits(data)
    run_dir = launch(config, echo=False)
    table = iteration_table(run_dir, device, args.freeze)
    pd.set_option("display.width", 200)
    print(f"# {table['device'].iloc[0]}; torch {torch.__version__}; {args.model}, keep {args.keep}, 1 x 1; {run_dir}")
    print(table.drop(columns="device").to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        table.to_csv(args.out, index=False)
    measured = table[table["frozen"] & (table["iteration"] > args.freeze)]  # the plans are made at the first
    if measured.empty:
        print("no frozen iteration after the first: raise --iterations")
        return 1
    shrink = measured["shrink_ms"].median()
    other = measured["other_ms"].median()
    span = (measured["inter_ms"] / measured["copy_ms"]).median()
    checks = [
        (f"compress + decompress per round {shrink:.3f} ms <= {TARGET_SHRINK_MS} ms", shrink <= TARGET_SHRINK_MS),
        (f"round besides communication {other:.2f} ms <= {TARGET_OTHER_MS} ms", other <= TARGET_OTHER_MS),
        (
            f"inter AllReduce span / copy of its bytes {span:.2f} <= {TARGET_SPAN_OVER_COPY}",
            span <= TARGET_SPAN_OVER_COPY,
        ),
    ]
    print(f"# medians over frozen iterations {sorted(measured['iteration'])}:")
    for text, ok in checks:
        print(f"{'met   ' if ok else 'MISSED'} {text}")
    if args.profile:
        profile_rounds(device, args.model, args.keep, args.profile)
    return 0 if all(ok for _, ok in checks) or device.type != "cuda" else 1


if __name__ == "__main__":
    sys.exit(main())
