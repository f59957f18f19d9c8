"""Throughput of compress / decompress (sec. 4.4.1, 4.4.3) against a plain copy, on ResNet-152 shapes.

Run::

    PYTHONPATH=. python -m prunex.bench.shrink [--keep 0.5] [--repeats 15] [--device auto] [--sweep]

For every Conv2d weight of the CIFAR ResNet-152 (3x3 stem, no max-pool) it draws random kept index sets
of ceil(keep * C) output and input channels, then times, over all layers at once (warm-up, ``repeats``
runs, median; on a GPU CUDA events, each run from a cold L2 cache), compress and decompress with each method of
:mod:`prunex.comm.shrink`, and ``dst.copy_(src)`` of the compact bytes of each layer as the reference.

Byte accounting: every row is credited with the bytes of the compact tensors (one direction, not
read + write), the copy included, so "ratio" is copy time / op time. Decompress must also zero the
full tensor (1 / (keep_out * keep_in) times the compact bytes), so it is also compared with a copy of
the full-size bytes. All buffers are allocated before timing (one-shot allocation, sec. 4.5).

"compress [plan]" is what the exchange runs on a CPU: on an x86-64 CPU with AVX-512F the kernel of
:mod:`prunex.comm.native` (the header says whether it ran, and why not), elsewhere the torch ops of
"compress [plan-torch]". "compress [bucket]" / "decompress [bucket]" are what it runs on a GPU: one
`BucketShrinkPlan` over all the layers as one bucket (the layers' full values back to back in one flat
stage), one gather and one scatter (on a GPU with Triton its kernels, `prunex.comm.bucket_kernels`; then
"[bucket-torch]" rows time torch's index ops over a flat element index too, and ``--sweep`` the pack
kernel's other block sizes and warps, "[bucket-BLOCKxWw]").

"frozen mask [layers]" / "frozen mask [buckets]": Alg. 1 line 11 once the mask is frozen, on the layers' full
values laid out in 32 MB buckets as the engines' intra-node sums are: one ``torch.where`` and a new tensor per
layer (`GroupMask.apply`, what the engines ran before) against one ``masked_fill_`` per bucket in
place (`prunex.admm.steps.mask_frozen_in_buckets`, what they run now), the same bits (checked before timing).

Two references: the per-layer copies (one ``copy_`` per layer, as many launches as the per-layer ops) and
one contiguous copy of the same bytes (one launch: the memory-speed reference). The summary lines give
the per-layer plan against the first and the bucket plan against the second (issue 27's target on a GPU:
>= 0.5 for both compress and decompress).
"""

from __future__ import annotations

import argparse
import functools
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torchvision
from torch import Tensor, nn

from prunex.admm.steps import mask_frozen_in_buckets
from prunex.comm import bucket_kernels, native
from prunex.comm.bucket import Bucketer
from prunex.comm.shrink import BucketShrinkPlan, ShrinkPlan, compress, decompress
from prunex.pruning import GroupMask
from prunex.pruning.project import keep_count
from prunex.training.device import device_option_error


@dataclass
class _Layer:
    full: Tensor  # c_i, full-size source
    out_idx: Tensor
    in_idx: Tensor
    compact: Tensor  # compress destination
    compact_src: Tensor  # copy reference source
    full_dst: Tensor  # decompress destination
    full_src: Tensor  # full-size copy reference source
    plan: ShrinkPlan  # indices precomputed, as for a frozen mask
    plan_torch: ShrinkPlan  # the same with torch ops only (no native kernel)


def resnet152_conv_shapes() -> list[torch.Size]:
    """Conv2d weight shapes of the CIFAR ResNet-152 of the paper (sec. 5.1.3), stem first."""
    with torch.device("meta"):  # shapes only: no memory, no weight init
        model = torchvision.models.resnet152(num_classes=10)
        model.conv1 = nn.Conv2d(3, 64, 3, 1, 1, bias=False)
        model.maxpool = nn.Identity()
    return [m.weight.shape for m in model.modules() if isinstance(m, nn.Conv2d)]


def _hardware(device: torch.device) -> str:
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
    else:
        name = platform.processor() or platform.machine()
        try:
            with open("/proc/cpuinfo") as f:
                name = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
        except (OSError, StopIteration):
            pass
    return f"{device.type}: {name}; torch {torch.__version__}; {torch.get_num_threads()} CPU threads"


@dataclass
class _Timings:
    """Per timed function: the median seconds as a round sees them (``span``) and, on a GPU, with the host's
    launches hidden (``device``; None on a CPU), and in how many runs of the latter the host fell behind."""

    span: list[float]
    device: list[float] | None
    host_behind: list[int] | None


def _sleep_cycles_per_second() -> float:
    """How many cycles `torch.cuda._sleep` spins per second on the current device (measured)."""
    cycles = 10**6
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(cycles)  # warm-up
    begin.record()
    torch.cuda._sleep(cycles)
    end.record()
    end.synchronize()
    return cycles / (begin.elapsed_time(end) / 1e3)


def _median_seconds(
    fns: Sequence[Callable[[], object]], device: torch.device, repeats: int, warmup: int = 2
) -> _Timings:
    """Median time of each function; the functions are timed round-robin, in a new order each round (seeded),
    so that background load on a shared machine hits all of them alike and no function always follows the
    same one.

    On a GPU each call starts with a cold L2 cache (a 256 MB buffer is written first, as
    `triton.testing.do_bench` does; an H100's L2 holds 50 MB, the size of the buffers timed here) and is
    timed with CUDA events on the current stream, two ways per round:

    - ``span``: the host's launch time is in the span wherever the GPU waits for it, as in a round;
    - ``device``: the stream first spins (`torch.cuda._sleep`) for 10 ms or three times the call's longest
      warm-up time on the host, whichever is longer, so the host has enqueued the whole call before the GPU
      reaches the start event: the GPU's time alone, the memory-speed comparison. A run
      whose start event the GPU had passed when the call returned (the host fell behind) is counted in
      ``host_behind``.

    Why both: on 2026-11-28 (one H100 per call, `saved-logs/gpu/h100-2026-11-28/`) one pack launch, the
    plan's setting, measured 0.17 ms as the "compress [bucket]" row and 0.07 ms as the `--sweep` row of the
    same setting in the same run, with a cold L2 and in a fixed order. On two H200s
    (`saved-logs/gpu/h200-2026-11-28/`) the two rows' device times were equal (0.05 ms, 0.68-0.69 of the
    copy) while their launch-included spans were 0.12-0.17 ms: the difference lies in the launch, not in the
    kernel or the row's place. On a CPU, the wall clock (``device`` None)."""
    cuda = device.type == "cuda"
    flush = torch.empty(256 * 2**20 // 4, device=device) if cuda else None
    host = [0.0] * len(fns)  # the longest warm-up call on the host's clock: the enqueueing, on a GPU
    for _ in range(warmup):
        for i, fn in enumerate(fns):
            t0 = time.perf_counter()
            fn()
            host[i] = max(host[i], time.perf_counter() - t0)
    rate = _sleep_cycles_per_second() if cuda else 0.0
    hold = [int(rate * max(10e-3, 3 * h)) for h in host]  # the spin: 10 ms, or 3 x the call's host time
    spans: list[list[float]] = [[] for _ in fns]
    alone: list[list[float]] = [[] for _ in fns]
    behind = [0] * len(fns)
    order = random.Random(0)
    for _ in range(repeats):
        for i in order.sample(range(len(fns)), len(fns)):
            fn = fns[i]
            if flush is None:
                t0 = time.perf_counter()
                fn()
                spans[i].append(time.perf_counter() - t0)
                continue
            for held in (False, True):
                if held:
                    torch.cuda._sleep(hold[i])
                flush.zero_()
                begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                begin.record()
                fn()
                if held and begin.query():
                    behind[i] += 1
                end.record()
                end.synchronize()
                (alone if held else spans)[i].append(begin.elapsed_time(end) / 1e3)
    median = statistics.median
    if not cuda:
        return _Timings([median(ts) for ts in spans], None, None)
    return _Timings([median(ts) for ts in spans], [median(ts) for ts in alone], behind)


def host_launch_seconds(fn: Callable[[], object], device: torch.device, calls: int = 100) -> float:
    """Median host seconds to enqueue one call of ``fn`` on a GPU that is held busy (a 200 ms spin first), so
    that no call waits for the device: what a launch costs the host, the part of a span that a starved GPU
    spends idle."""
    rate = _sleep_cycles_per_second()
    fn()  # compiled, tables made
    torch.cuda.synchronize(device)
    torch.cuda._sleep(int(rate * 0.2))
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    torch.cuda.synchronize(device)
    return statistics.median(times)


def _make_layers(shapes: Sequence[torch.Size], keep: float, device: torch.device, seed: int) -> list[_Layer]:
    gen = torch.Generator().manual_seed(seed)
    layers = []
    for shape in shapes:
        k_out, k_in = keep_count(shape[0], keep), keep_count(shape[1], keep)
        out_idx = torch.randperm(shape[0], generator=gen)[:k_out].sort().values.to(device)
        in_idx = torch.randperm(shape[1], generator=gen)[:k_in].sort().values.to(device)
        compact_shape = (k_out, k_in, *shape[2:])
        layers.append(
            _Layer(
                full=torch.randn(shape, generator=gen).to(device),
                out_idx=out_idx,
                in_idx=in_idx,
                compact=torch.empty(compact_shape, device=device),
                compact_src=torch.randn(compact_shape, generator=gen).to(device),
                full_dst=torch.empty(shape, device=device),
                full_src=torch.randn(shape, generator=gen).to(device),
                plan=ShrinkPlan(out_idx, in_idx, tuple(shape), device),
                plan_torch=ShrinkPlan(out_idx, in_idx, tuple(shape), device, native=False),
            )
        )
    return layers


def _frozen_masks(layers: Sequence[_Layer], device: torch.device) -> tuple[list[str], dict[str, GroupMask], Bucketer]:
    """The layers' kept index sets as frozen group masks, and their full values in 32 MB buckets (the engines'
    default ``bucket_mb``), one parameter per slot as `sum_theta_plus_u` lays them out."""
    names, masks = [], {}
    for i, x in enumerate(layers):
        out_keep = torch.zeros(x.full.shape[0], dtype=torch.bool, device=device)
        in_keep = torch.zeros(x.full.shape[1], dtype=torch.bool, device=device)
        out_keep[x.out_idx], in_keep[x.in_idx] = True, True
        names.append(f"conv{i}")
        masks[names[-1]] = GroupMask(out_keep, in_keep, None, tuple(x.full.shape))
    buckets = Bucketer(32.0, torch.float32, device)
    buckets.layout([x.full.numel() for x in layers])
    for view, x in zip(buckets.shaped_views([x.full.shape for x in layers]), layers, strict=True):
        view.copy_(x.full)
    return names, masks, buckets


def _check(layers: Sequence[_Layer]) -> None:
    """The timed code paths agree with plain advanced indexing (run once, before timing)."""
    for layer in layers:
        ref = layer.full[layer.out_idx[:, None], layer.in_idx]
        for method in ("index_select", "flat", "plan", "plan-torch"):
            if method.startswith("plan"):
                plan = layer.plan if method == "plan" else layer.plan_torch
                c = plan.compress(layer.full)
                back = plan.decompress(c)
            else:
                c = compress(layer.full, layer.out_idx, layer.in_idx, method=method)
                back = decompress(c, layer.out_idx, layer.in_idx, layer.full.shape, method=method)
            if not torch.equal(c, ref) or not torch.equal(back[layer.out_idx[:, None], layer.in_idx], ref):
                raise AssertionError(f"{method} shrinkage wrong for shape {tuple(layer.full.shape)}")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print the table; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m prunex.bench.shrink", description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=float, default=0.5, help="keep rate of output and input channels")
    parser.add_argument("--repeats", type=int, default=15, help="timed runs per operation (median)")
    parser.add_argument("--device", default="auto", help="auto (cuda if available), cpu, cuda, cuda:1, ...")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--sweep", action="store_true", help="on a GPU, also time the bucket pack's other block sizes and warps"
    )
    args = parser.parse_args(argv)
    bad = (
        (not 0 < args.keep <= 1 and f"--keep must be in (0, 1], got {args.keep}")
        or (args.repeats < 1 and f"--repeats must be >= 1, got {args.repeats}")
        or device_option_error(None if args.device == "auto" else args.device)
    )
    if bad:  # before any layer is built
        print(f"error: {bad}", file=sys.stderr)
        return 2
    if args.device == "auto":
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    else:
        device = torch.device(args.device)

    shapes = resnet152_conv_shapes()
    layers = _make_layers(shapes, args.keep, device, args.seed)
    _check(layers)
    bucket = BucketShrinkPlan([x.plan for x in layers], device)
    stage = torch.empty(bucket.stage_numel, device=device)  # the layers' full values back to back
    for view, x in zip(bucket.stage_views(stage), layers, strict=True):
        view.copy_(x.full)
    packed = torch.empty(bucket.numel, device=device)
    unpacked = torch.empty(bucket.stage_numel, device=device)
    if not torch.equal(
        bucket.compress(stage, packed), torch.cat([x.plan.compress(x.full).reshape(-1) for x in layers])
    ):
        raise AssertionError("the bucket plan packs other bytes than the layer plans")
    if not torch.equal(
        bucket.decompress(packed, out=unpacked),
        torch.cat([x.plan.decompress(x.plan.compress(x.full)).reshape(-1) for x in layers]),
    ):
        raise AssertionError("the bucket plan unpacks other bytes than the layer plans")
    compact_src, full_src = torch.randn_like(packed), torch.randn_like(unpacked)
    compact_dst, full_dst = torch.empty_like(packed), torch.empty_like(unpacked)
    compact_bytes = sum(x.compact.numel() * x.compact.element_size() for x in layers)
    full_bytes = sum(x.full.numel() * x.full.element_size() for x in layers)

    def copy_compact() -> None:
        for x in layers:
            x.compact.copy_(x.compact_src)

    def copy_full() -> None:
        for x in layers:
            x.full_dst.copy_(x.full_src)

    def run_compress(method: str) -> Callable[[], None]:
        def fn() -> None:
            for x in layers:
                if method.startswith("plan"):
                    (x.plan if method == "plan" else x.plan_torch).compress(x.full, out=x.compact)
                else:
                    compress(x.full, x.out_idx, x.in_idx, out=x.compact, method=method)

        return fn

    def run_decompress(method: str) -> Callable[[], None]:
        def fn() -> None:
            for x in layers:
                if method == "plan":
                    x.plan.decompress(x.compact, out=x.full_dst)
                else:
                    decompress(x.compact, x.out_idx, x.in_idx, x.full.shape, out=x.full_dst, method=method)

        return fn

    def one_copy(dst: Tensor, src: Tensor) -> Callable[[], None]:
        return lambda: dst.copy_(src)

    compress_methods = ("plan", "plan-torch", "auto", "index_select", "flat")
    methods = ("plan", "auto", "index_select", "flat")  # decompress: the plan has no native path
    rows: list[tuple[str, int, float]] = [("copy_ (compact bytes, reference)", compact_bytes, 0.0)]
    for method in compress_methods:
        rows.append((f"compress [{method}]", compact_bytes, 0.0))
    for method in methods:
        rows.append((f"decompress [{method}]", compact_bytes, 0.0))
    rows.append(("copy_ (full-size bytes)", full_bytes, 0.0))
    rows.append(("copy_ (compact bytes, one contiguous)", compact_bytes, 0.0))
    rows.append(("compress [bucket]", compact_bytes, 0.0))
    rows.append(("decompress [bucket]", compact_bytes, 0.0))
    rows.append(("copy_ (full-size bytes, one contiguous)", full_bytes, 0.0))
    fns = [copy_compact]
    fns += [run_compress(m) for m in compress_methods]
    fns += [run_decompress(m) for m in methods]
    fns.append(copy_full)
    fns.append(one_copy(compact_dst, compact_src))
    fns.append(lambda: bucket.compress(stage, packed))
    fns.append(lambda: bucket.decompress(packed, out=unpacked))
    fns.append(one_copy(full_dst, full_src))
    if bucket.kernels is not None:  # the kernels' alternative: torch's index ops over a flat element index
        by_index = BucketShrinkPlan([x.plan for x in layers], device, kernels=False)
        rows.append(("compress [bucket-torch]", compact_bytes, 0.0))
        rows.append(("decompress [bucket-torch]", compact_bytes, 0.0))
        fns.append(lambda: by_index.compress(stage, packed))
        fns.append(lambda: by_index.decompress(packed, out=unpacked))
        if args.sweep:  # the pack's block size and warps (bucket_kernels.PACK_BLOCK, PACK_WARPS: the plan's)
            for block in (256, 512, 1024, 2048, 4096):
                for warps in (2, 4, 8):
                    if not torch.equal(
                        bucket.kernels.pack(stage, torch.empty_like(packed), block=block, num_warps=warps), packed
                    ):
                        raise AssertionError(f"the pack with blocks of {block} packs other bytes")
                    rows.append((f"compress [bucket-{block}x{warps}w]", compact_bytes, 0.0))
                    fns.append(functools.partial(bucket.kernels.pack, stage, packed, block=block, num_warps=warps))

    names, masks, buckets = _frozen_masks(layers, device)
    views = buckets.shaped_views([x.full.shape for x in layers])

    def per_layer() -> list[Tensor]:  # what the engines ran before: `GroupMask.apply`, a new tensor per layer
        return [masks[n].apply(v) for n, v in zip(names, views, strict=True)]

    expected = per_layer()
    mask_frozen_in_buckets(buckets, names, masks)
    if not all(torch.equal(v, e) for v, e in zip(views, expected, strict=True)):
        raise AssertionError("the frozen mask on the buckets gives other values than per layer")
    rows.append(("frozen mask [layers]", full_bytes, 0.0))
    rows.append(("frozen mask [buckets]", full_bytes, 0.0))
    fns.append(per_layer)
    fns.append(lambda: mask_frozen_in_buckets(buckets, names, masks))

    timed = _median_seconds(fns, device, args.repeats)
    rows = [(name, nbytes, sec) for (name, nbytes, _), sec in zip(rows, timed.span, strict=True)]
    span_s = {name: sec for name, _, sec in rows}
    device_s = dict(zip(span_s, timed.device, strict=True)) if timed.device is not None else None

    copy_gbs = compact_bytes / rows[0][2] / 1e9
    print(f"# {_hardware(device)}")
    print(
        f"# CIFAR ResNet-152: {len(shapes)} Conv2d weights, {full_bytes / 1e6:.1f} MB; keep {args.keep} of "
        f"outputs and inputs -> {compact_bytes / 1e6:.1f} MB compact; median of {args.repeats} runs"
    )
    print("# bytes = compact-tensor bytes (one direction) for every row except the full-size copy")
    print(
        "# methods: index_select = two index_selects / index_put_; flat = one index_select / index_copy_"
        " over KH*KW rows; auto = flat except compress of 1x1; plan = ShrinkPlan (indices precomputed; compress"
        " by the native kernel where it runs); plan-torch = ShrinkPlan with torch ops only (= auto's ops)"
    )
    if device.type == "cpu":
        reason = native.unavailable_reason()
        kernel = "AVX-512F, used by compress [plan]" if reason is None else f"not used ({reason})"
        print(f"# native compress kernel (prunex.comm.native): {kernel}")
    header = f"{'operation':40s} {'MB':>9s} {'seconds':>10s} {'GB/s':>8s} {'ratio':>7s}"
    if device_s is not None:
        print("# seconds: launches included (as in a round); device s: the host's launches hidden (GPU time alone)")
        header += f" {'device s':>10s} {'ratio':>7s} {'behind':>6s}"
    print(header)
    behind = dict(zip(span_s, timed.host_behind or [], strict=False))
    for name, nbytes, sec in rows:
        gbs = nbytes / sec / 1e9
        line = f"{name:40s} {nbytes / 1e6:9.1f} {sec:10.5f} {gbs:8.2f} {gbs / copy_gbs:7.2f}"
        if device_s is not None:
            dev_ratio = (nbytes / device_s[name]) / (compact_bytes / device_s[rows[0][0]])
            line += f" {device_s[name]:10.5f} {dev_ratio:7.2f} {behind[name]:6d}"
        print(line)

    def versus(reference: str, op: str) -> str:  # reference time / op time: launches included, and alone
        text = f"{span_s[reference] / span_s[op]:.2f}"
        if device_s is not None:
            text += f" (launches included); {device_s[reference] / device_s[op]:.2f} (device time alone)"
        return text

    # the targets (issue 18): >= 0.5 of a same-run copy of the compact bytes (compress) and of the
    # full-size bytes (decompress, which writes every byte of the full tensor); on a GPU (issue 27) the
    # copy is one contiguous copy and the plan the bucket plan the exchange runs there
    compact_copy, full_copy = "copy_ (compact bytes, reference)", "copy_ (full-size bytes)"
    one_compact, one_full = "copy_ (compact bytes, one contiguous)", "copy_ (full-size bytes, one contiguous)"
    for op, reference, label in (
        ("compress [plan]", compact_copy, "copy of the compact bytes"),
        ("decompress [plan]", full_copy, "copy of the full-size bytes"),
        ("compress [bucket]", one_compact, "one contiguous copy of the compact bytes"),
        ("decompress [bucket]", one_full, "one contiguous copy of the full-size bytes"),
    ):
        print(f"# {op} vs {label}: {versus(reference, op)}")
    print(
        "# frozen mask (Alg. 1 line 11), per layer / on the buckets: "
        f"{versus('frozen mask [layers]', 'frozen mask [buckets]')}x"
    )
    if device.type == "cuda":  # what each launch costs the host (the spans above include it where the GPU waits)
        launches = {
            "copy_ (one contiguous, compact bytes)": one_copy(compact_dst, compact_src),
            "compress [bucket]": lambda: bucket.compress(stage, packed),
            "compress [bucket] with plus (the round's)": lambda: bucket.compress(stage, packed, plus=unpacked),
            "decompress [bucket]": lambda: bucket.decompress(packed, out=unpacked),
        }
        per_call = {name: host_launch_seconds(fn, device) * 1e6 for name, fn in launches.items()}
        print(
            "# host time per call, GPU held busy (us, median of 100): "
            + "; ".join(f"{n} {us:.1f}" for n, us in per_call.items())
        )
    swept = [name for name, _, _ in rows if name.startswith("compress [bucket-") and name.endswith("w]")]
    for name in swept:
        print(f"# {name} vs one contiguous copy of the compact bytes: {versus(one_compact, name)}")
    if swept:
        by = device_s if device_s is not None else span_s
        name = min(swept, key=by.__getitem__)
        block, warps = name[len("compress [bucket-") : -len("w]")].split("x")
        print(
            f"# fastest pack in the sweep ({'device time' if device_s is not None else 'wall clock'}): "
            f"PRUNEX_PACK_BLOCK={block} PRUNEX_PACK_WARPS={warps} ({by[one_compact] / by[name]:.2f}); "
            f"the plan's: {bucket_kernels.PACK_BLOCK}x{bucket_kernels.PACK_WARPS}w"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
