"""Inference speed of the exported compact model against the dense model, in one process.

    python -m prunex.bench.inference RUN_DIR [--threads N] [--budget-s S] [--device auto|cpu|cuda] \
        [--batches 1,128] [--warmup 2]
    python -m prunex.bench.inference --model resnet152 --filter-keep 0.5 --channel-keep 0.5 --out DIR

With RUN_DIR: the dense model is the run's `final_model.pt` at full size (zeros are not skipped by
dense kernels), the compact model is its export (`prunex.pruning.export` runs first when
`model_compact.pt2` is missing; the saved program is checked to compute the same logits). With
`--model`: a freshly initialised model with random masks of the given keep rates
(`random_masked_model`, the masks the export tests use) and its compact export, for
architectures no run has trained. Both models are timed as eager modules in eval mode (the same
execution path for both).

Measured per device (the CPU always, the GPU when present and not `--device cpu`) and batch size
(1 and 128 unless `--batches`, 3 x 32 x 32 images), for the dense and the compact model alternately, the order
swapped every round (so that drift of a shared machine and order effects hit both alike):
latency of one forward pass in `torch.inference_mode` after `--warmup` untimed passes, median of repeats (and 10th
/ 90th percentiles), and throughput = batch / median. CPU: `time.perf_counter`,
`torch.get_num_threads()` threads, and the machine's 1-minute load average when the measurement
started (`load_1min`: on a shared machine other processes compete for the cores; when it is
far above the core count, use `--threads 1`: OpenMP threads that must meet at every barrier are
then scheduled apart, and we measured a ResNet-20 forward pass at 3-6 s with 2 threads against
10 ms with 1). GPU: CUDA
events around each forward, TF32 off. Repeats: as many as fit in `--budget-s` per model and
batch (at least 3, at most 50). Also parameters and FLOPs (`torch.utils.flop_counter`, per
image). Each row carries its ratio to the dense row of the same device and batch.

Writes `inference.parquet` (columns `COLUMNS`) under the run directory (or `--out`).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import torch
from torch import nn

from prunex.cluster.exits import one_line
from prunex.cluster.options import comma_list
from prunex.cluster.preflight import check_writable
from prunex.cluster.regime import usable_cores
from prunex.pruning import constrained_layers, keep_count
from prunex.pruning.export import (
    COMPACT_FILE,
    EXPORT_JSON,
    INPUT_SHAPE,
    ExactnessError,
    ExportError,
    compact,
    count_flops,
    count_parameters,
    export_run,
    load_run_model,
    max_relative_error,
)
from prunex.training.allocator import keep_freed_memory
from prunex.training.config import ConfigError
from prunex.training.device import device_option_error
from prunex.training.log import INFERENCE_COLUMNS, hardware_name, write_parquet

BATCHES = (1, 128)
BUDGET_S = 5.0  # seconds of timed repeats per model and batch size
INFERENCE_FILE = "inference.parquet"
COLUMNS = INFERENCE_COLUMNS  # prunex.training.log: analysis reads the table without torch


def hardware(device: torch.device) -> str:
    """The GPU's name, or the CPU model (`prunex.training.log.hardware_name`)."""
    return torch.cuda.get_device_name(device) if device.type == "cuda" else hardware_name("cpu")


def _timer(device: torch.device) -> Callable[[Callable[[], object]], float]:
    if device.type == "cuda":

        def cuda_time(fn: Callable[[], object]) -> float:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1e3

        return cuda_time

    def cpu_time(fn: Callable[[], object]) -> float:
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0

    return cpu_time


@torch.inference_mode()
def time_models(
    models: dict[str, nn.Module],
    device: torch.device,
    batch: int,
    *,
    budget_s: float,
    warmup: int = 2,
    min_repeats: int = 3,
    max_repeats: int = 50,
) -> dict[str, list[float]]:
    """Seconds per forward pass of each model, measured alternately, after `warmup` passes each."""
    timer = _timer(device)
    x = torch.randn((batch, *INPUT_SHAPE[1:]), device=device)
    calls = {k: (lambda m=m: m(x)) for k, m in models.items()}
    first = {}
    for k, fn in calls.items():
        for _ in range(warmup):
            first[k] = timer(fn)
    per_round = sum(first.values())
    repeats = int(min(max_repeats, max(min_repeats, budget_s * len(models) / max(per_round, 1e-9))))
    times: dict[str, list[float]] = {k: [] for k in models}
    order = list(calls)
    for i in range(repeats):
        for k in order if i % 2 == 0 else order[::-1]:
            times[k].append(timer(calls[k]))
    return times


def _quantile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


def bench(
    dense: nn.Module,
    small: nn.Module,
    *,
    run_id: str,
    arch: str,
    devices: list[torch.device],
    batches: tuple[int, ...] = BATCHES,
    budget_s: float = BUDGET_S,
    warmup: int = 2,
) -> pd.DataFrame:
    """Rows of `COLUMNS` for the dense and the compact model on every device and batch size."""
    size = {k: (count_parameters(m), count_flops(m)) for k, m in (("dense", dense), ("compact", small))}
    rows = []
    for device in devices:
        progs = {"dense": dense.to(device).eval(), "compact": small.to(device).eval()}
        if device.type == "cuda":
            tf32 = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
            torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
        try:
            for b in batches:
                load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
                times = time_models(progs, device, b, budget_s=budget_s, warmup=warmup)
                med = {k: statistics.median(v) for k, v in times.items()}
                for variant, ts in times.items():
                    params, flops = size[variant]
                    rows.append(
                        {
                            "run_id": run_id,
                            "arch": arch,
                            "variant": variant,
                            "device": device.type,
                            "hardware": hardware(device),
                            "threads": torch.get_num_threads() if device.type == "cpu" else 0,
                            "load_1min": load,
                            "batch": b,
                            "repeats": len(ts),
                            "latency_ms": 1e3 * med[variant],
                            "latency_p10_ms": 1e3 * _quantile(ts, 0.1),
                            "latency_p90_ms": 1e3 * _quantile(ts, 0.9),
                            "throughput_per_s": b / med[variant],
                            "params": params,
                            "flops": flops,
                            "params_ratio": params / size["dense"][0],
                            "flops_ratio": flops / size["dense"][1],
                            "latency_ratio": med[variant] / med["dense"],
                            "speedup": med["dense"] / med[variant],
                        }
                    )
        finally:
            if device.type == "cuda":
                torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = tf32
    dense.cpu()
    small.cpu()
    return pd.DataFrame(rows, columns=COLUMNS)


def devices_for(choice: str) -> list[torch.device]:
    devs = [torch.device("cpu")]
    if choice in ("auto", "cuda"):
        if torch.cuda.is_available():
            devs.append(torch.device("cuda", torch.cuda.current_device()))
        elif choice == "cuda":
            raise ExportError("--device cuda: no CUDA device is available")
    return devs


def bench_run(
    run_dir: str | Path,
    *,
    device: str = "auto",
    budget_s: float = BUDGET_S,
    batches: tuple[int, ...] = BATCHES,
    warmup: int = 2,
    require_done: bool = True,
) -> pd.DataFrame:
    """Dense vs exported model of a finished run; writes `RUN_DIR/inference.parquet`. `require_done`: as
    `prunex.pruning.export.load_run_model` (the trainer benches before it marks the run done)."""
    run_dir = Path(run_dir)
    devices = devices_for(device)
    if not (run_dir / EXPORT_JSON).exists() or not (run_dir / COMPACT_FILE).exists():
        export_run(run_dir, device=devices[-1], require_done=require_done)
    dense, config = load_run_model(run_dir, require_done=require_done)
    small, _ = compact(dense)  # deterministic: the model in the file, as eager modules to move between devices
    saved = torch.export.load(str(run_dir / COMPACT_FILE)).module()
    err, _ = max_relative_error(small, saved, [torch.randn((8, *INPUT_SHAPE[1:]))], torch.device("cpu"))
    if not err <= 1e-5:
        raise ExactnessError(f"{run_dir / COMPACT_FILE} is not the export of final_model.pt (relative error {err:.3g})")
    df = bench(
        dense,
        small,
        run_id=str(config["name"]),
        arch=str(config["model"]),
        devices=devices,
        budget_s=budget_s,
        batches=batches,
        warmup=warmup,
    )
    write_parquet(run_dir / INFERENCE_FILE, df)
    return df


def random_masked_model(arch: str, *, filter_keep: float, channel_keep: float, seed: int = 0) -> nn.Module:
    """A fresh `arch` (eval mode) masked by `mask_randomly_`."""
    from prunex.training.models import build_model  # lazy: torchvision, only to build a fresh model

    torch.manual_seed(seed)
    return mask_randomly_(build_model(arch).eval(), filter_keep=filter_keep, channel_keep=channel_keep, seed=seed)


@torch.no_grad()
def mask_randomly_(model: nn.Module, *, filter_keep: float, channel_keep: float, seed: int = 0) -> nn.Module:
    """Random BatchNorm statistics and random structured masks on every constrained conv (in place).

    Every constrained layer (`constrained_layers`: the convolutions, the stem's image channels
    never) keeps `keep_count` filters and input channels drawn at random; BatchNorm gets random
    affine parameters and running statistics, so that pruned filters produce non-zero constants
    (of either sign) as in a trained network.
    """
    gen = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.weight.copy_(torch.rand(m.weight.shape, generator=gen) + 0.5)
            m.bias.copy_(0.2 * torch.randn(m.bias.shape, generator=gen))
            m.running_mean.copy_(0.2 * torch.randn(m.running_mean.shape, generator=gen))
            m.running_var.copy_(torch.rand(m.running_var.shape, generator=gen) + 0.5)
    params = dict(model.named_parameters())

    def kept(n: int, keep: float) -> torch.Tensor:
        vec = torch.zeros(n)
        vec[torch.randperm(n, generator=gen)[: keep_count(n, keep)]] = 1.0
        return vec

    for name, ls in constrained_layers(model, filter_keep=filter_keep, channel_keep=channel_keep).items():
        w = params[name]
        mask = kept(w.shape[0], ls.filter_keep)[:, None] * kept(w.shape[1], ls.channel_keep)[None, :]
        w.mul_(mask.view(*mask.shape, *([1] * (w.dim() - 2))).to(w))
    return model


def bench_random(
    arch: str,
    *,
    filter_keep: float,
    channel_keep: float,
    out: str | Path,
    device: str = "auto",
    budget_s: float = BUDGET_S,
    batches: tuple[int, ...] = BATCHES,
    warmup: int = 2,
) -> pd.DataFrame:
    """Dense vs compact `arch` with random masks; writes `OUT/inference.parquet`."""
    dense = random_masked_model(arch, filter_keep=filter_keep, channel_keep=channel_keep)
    small, _ = compact(dense)
    run_id = f"{arch}-random-filter{filter_keep:g}-channel{channel_keep:g}"
    df = bench(
        dense,
        small,
        run_id=run_id,
        arch=arch,
        devices=devices_for(device),
        budget_s=budget_s,
        batches=batches,
        warmup=warmup,
    )
    write_parquet(Path(out) / INFERENCE_FILE, df)
    return df


def describe(df: pd.DataFrame) -> str:
    lines = []
    for r in df[df["variant"] == "compact"].itertuples():
        dense = df[(df["variant"] == "dense") & (df["device"] == r.device) & (df["batch"] == r.batch)].iloc[0]
        lines.append(
            f"{r.device} ({r.hardware}{f', {r.threads} threads' if r.device == 'cpu' else ''}) batch {r.batch}: "
            f"dense {dense.latency_ms:.2f} ms, compact {r.latency_ms:.2f} ms = {r.latency_ratio:.3f} of dense "
            f"({r.speedup:.2f}x; {r.repeats} repeats); params {r.params_ratio:.3f}, FLOPs {r.flops_ratio:.3f} of dense"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m prunex.bench.inference", description=__doc__.split("\n")[0])
    parser.add_argument("run_dir", nargs="?", help="a finished run directory")
    parser.add_argument("--model", help="instead of a run: this architecture with random masks")
    parser.add_argument("--filter-keep", type=float, default=1.0)
    parser.add_argument("--channel-keep", type=float, default=0.5)
    parser.add_argument("--out", help="with --model: where inference.parquet goes")
    parser.add_argument("--threads", type=int, help="CPU threads (default: every core this process may use)")
    parser.add_argument("--budget-s", type=float, default=BUDGET_S, help="seconds of repeats per model and batch size")
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    parser.add_argument("--batches", default=",".join(map(str, BATCHES)), help="batch sizes, comma-separated")
    parser.add_argument("--warmup", type=int, default=2, help="untimed passes per model before timing")
    args = parser.parse_args(argv)

    def fail(msg: str) -> int:
        print(f"error: {msg}", file=sys.stderr)
        return 2

    if (args.run_dir is None) == (args.model is None):
        return fail("give a RUN_DIR or --model (not both)")
    if args.model is not None and not args.out:
        return fail("--model needs --out DIR")
    for name in ("filter_keep", "channel_keep"):
        v = getattr(args, name)
        if not 0 < v <= 1:
            return fail(f"--{name.replace('_', '-')} must be in (0, 1], got {v}")
    if args.threads is not None and args.threads < 1:
        return fail(f"--threads must be >= 1, got {args.threads}")
    cores = len(os.sched_getaffinity(0))
    if args.threads is not None and args.threads > cores:  # oversubscribed: timed the threads' contention (2026-12-08)
        return fail(f"--threads {args.threads}: this process may use {cores} cores; give at most {cores}")
    if not args.budget_s > 0:
        return fail(f"--budget-s must be > 0, got {args.budget_s}")
    try:
        batches = tuple(comma_list(args.batches, "--batches", int))
    except ValueError as e:
        return fail(str(e))
    if min(batches) < 1 or args.warmup < 1:
        return fail(f"--batches must be >= 1 and --warmup >= 1, got {args.batches!r} and {args.warmup}")
    bad_device = device_option_error(None if args.device == "auto" else args.device)
    if bad_device:
        return fail(bad_device)
    if args.out:
        try:
            check_writable(args.out, "--out")  # before minutes of timing, not when the table is written
        except ConfigError as e:
            return fail(str(e))
    torch.set_num_threads(args.threads or usable_cores())
    keep_freed_memory()  # as in the run's own in-job bench (prunex.training.allocator)
    try:
        if args.model is not None:
            from prunex.training.models import MODELS  # lazy: torchvision, only with --model

            if args.model not in MODELS:
                return fail(f"unknown model {args.model!r}; known: {', '.join(sorted(MODELS))}")
            given = ("filter_keep", "channel_keep", "out", "device", "budget_s", "warmup")  # bench_random's options
            df = bench_random(args.model, batches=batches, **{k: getattr(args, k) for k in given})
            where = Path(args.out) / INFERENCE_FILE
        else:
            df = bench_run(
                args.run_dir, device=args.device, budget_s=args.budget_s, batches=batches, warmup=args.warmup
            )
            where = Path(args.run_dir) / INFERENCE_FILE
    except ExportError as e:
        return fail(str(e))
    except ExactnessError as e:
        print(f"error: {one_line(e)}", file=sys.stderr)
        return 1
    print(describe(df))
    print(f"wrote {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
