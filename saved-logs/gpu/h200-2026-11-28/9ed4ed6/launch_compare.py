"""Host time per launch of the bucket kernels with 6/5 arguments (this tree) against 16/15 (ad53f8c's, in
.baseline/), on the same ResNet-152 bucket and the same GPU, after checking they write the same bits."""

import importlib.util
import sys

import torch

sys.path.insert(0, ".")
from prunex.bench.shrink import _make_layers, host_launch_seconds, resnet152_conv_shapes  # noqa: E402
from prunex.comm import bucket_kernels as new  # noqa: E402

spec = importlib.util.spec_from_file_location("old_bucket_kernels", ".baseline/prunex/comm/bucket_kernels.py")
old = importlib.util.module_from_spec(spec)
spec.loader.exec_module(old)
device = torch.device("cuda")
layers = _make_layers(resnet152_conv_shapes(), 0.5, device, 0)
entries = [(x.out_idx, x.in_idx, tuple(x.full.shape)) for x in layers]
kn, ko = new.BucketKernels(entries, device), old.BucketKernels(entries, device)
stage = torch.cat([x.full.reshape(-1) for x in layers])
plus = torch.randn_like(stage)
a, b = torch.empty(kn.numel, device=device), torch.empty(ko.numel, device=device)
assert torch.equal(kn.pack(stage, a, plus), ko.pack(stage, b, plus))
ua, ub = torch.empty_like(stage), torch.empty_like(stage)
assert torch.equal(kn.unpack(a, ua), ko.unpack(b, ub))
print("same bits: pack with plus, unpack")
cases = [
    ("pack new (6 args)", lambda: kn.pack(stage, a, plus)),
    ("pack old (16 args)", lambda: ko.pack(stage, b, plus)),
    ("unpack new (5 args)", lambda: kn.unpack(a, ua)),
    ("unpack old (15 args)", lambda: ko.unpack(b, ub)),
    ("copy_ (reference)", lambda: ua.copy_(ub)),
]
for rep in range(3):
    print(f"round {rep}: " + "; ".join(f"{n} {host_launch_seconds(fn, device) * 1e6:.1f} us" for n, fn in cases))
