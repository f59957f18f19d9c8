"""Where the launch-included span of bench.shrink's bucket rows goes on a GPU (a one-off probe, kept with its output).

Run from the repository root on a CUDA machine:
`PYTHONPATH=$PWD python3 saved-logs/gpu/h200-2026-11-28/c8fc7fd/span_probe.py`.
Each of four calls (one contiguous copy of the compact bytes, the bucket pack, the bucket unpack, one contiguous
copy of the full-size bytes; ResNet-152's 155 convolutions at keep 0.5, as bench.shrink builds them) is timed 40
times in a row with CUDA events, four ways: as bench.shrink's launch-included span (a 256 MB cold-L2 flush, then
the start event and the call); without the flush; with the host waiting for the flush first; with the host
asleep 1 ms before the start event (the GPU idle, the host's enqueue inside the span). Printed: medians of the span,
of the flush, of the GPU's gap from the flush's end to the start event, and of the host's time for the start
event and the call."""

import statistics
import time

import torch

from prunex.bench.shrink import BucketShrinkPlan, _make_layers, resnet152_conv_shapes

dev = torch.device("cuda")
layers = _make_layers(resnet152_conv_shapes(), 0.5, dev, 0)
bucket = BucketShrinkPlan([x.plan for x in layers], dev)
stage = torch.empty(bucket.stage_numel, device=dev)
for view, x in zip(bucket.stage_views(stage), layers, strict=True):
    view.copy_(x.full)
packed = torch.empty(bucket.numel, device=dev)
unpacked = torch.empty(bucket.stage_numel, device=dev)
src, dst = torch.randn_like(packed), torch.empty_like(packed)
fsrc, fdst = torch.randn_like(unpacked), torch.empty_like(unpacked)
flush = torch.empty(256 * 2**20 // 4, device=dev)
fns = {
    "copy compact": lambda: dst.copy_(src),
    "compress": lambda: bucket.compress(stage, packed),
    "decompress": lambda: bucket.decompress(packed, out=unpacked),
    "copy full": lambda: fdst.copy_(fsrc),
}
for fn in fns.values():
    for _ in range(3):
        fn()
torch.cuda.synchronize()
E = lambda: torch.cuda.Event(enable_timing=True)  # noqa: E731
print(f"# {torch.cuda.get_device_name(0)}; torch {torch.__version__}; packed {packed.numel() * 4 / 1e6:.1f} MB")
VARIANTS = (
    "bench (flush, begin, call)",
    "no flush",
    "flush, sync, begin, call",
    "flush, sleep 1 ms on host, begin, call",
)
for variant in VARIANTS:
    for name, fn in fns.items():
        rows = []
        for _ in range(40):
            f0, f1, b, e = E(), E(), E(), E()
            if variant != "no flush":
                f0.record()
                flush.zero_()
                f1.record()
            if variant.startswith("flush, sync"):
                torch.cuda.synchronize()
            if "sleep" in variant:
                time.sleep(1e-3)
            h0 = time.perf_counter()
            b.record()
            fn()
            h1 = time.perf_counter()
            e.record()
            e.synchronize()
            fl = f0.elapsed_time(f1) if variant != "no flush" else float("nan")
            gap = f1.elapsed_time(b) if variant != "no flush" else float("nan")
            rows.append((b.elapsed_time(e) * 1e3, fl * 1e3, gap * 1e3, (h1 - h0) * 1e6))
        med = [statistics.median(c) for c in zip(*rows, strict=True)]
        print(
            f"{variant:42s} {name:14s} span {med[0]:7.1f} us  flush {med[1]:7.1f} us  "
            f"flush-end->begin {med[2]:6.1f} us  host(begin+call) {med[3]:6.1f} us"
        )
