"""`ddp`: PyTorch DistributedDataParallel, the dense baseline (paper sec. 5.1.4).

The real DDP path over the flat group, its own bucketing and backward overlap intact. Its
gradient AllReduce is observed through a DDP communication hook that wraps the default one
(`allreduce_hook`) or the built-in compression hooks (`bf16_compress_hook`,
`fp16_compress_hook`) for `--grad-dtype bf16|fp16`; the hook only records bytes and seconds.

Choices: `broadcast_buffers=False`, so that every byte DDP sends goes through the hook
(BatchNorm running statistics stay per rank; rank 0's are the ones evaluated). torch 2.14 deprecates the
argument with a FutureWarning in every rank's log and names `forward_sync_buffers` instead, but
`forward_sync_buffers=False` still broadcasts the buffers in the constructor, bytes that would bypass the hook
and, on a resumed run, overwrite each rank's own statistics with rank 0's; the warning itself says to keep
`broadcast_buffers=False` until torch has `init_sync_buffers`. So it is kept and that one warning silenced
around the constructor (any other warning it gives still shows); it is also the spelling every supported torch
takes (from 2.3, `compat.TORCH_MIN`; Puhti's V100s need 2.11). The one-off
parameter broadcast in DDP's constructor is recorded as a flat broadcast of iteration 0 (its bytes count
there; its seconds are not in iteration 0's comm_s, since it ran before that iteration's clock started).
Recorded seconds run from a bucket's launch to its completion and overlap the backward pass; on a
GPU they are CUDA events read after the step (`prunex.comm.Comm.record_future`), because NCCL
completes the hook's future when the collective is enqueued, not when it has run.
"""

# No `from __future__ import annotations`: DDP checks the hook's annotations at run time.
import warnings
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel

from prunex.comm import Comm
from prunex.comm.wire import WIRE_TORCH_DTYPES
from prunex.methods.base import Context, StepwiseMethod, load_model_state, model_state
from prunex.training.config import WIRE_DTYPES

_HOOKS = dict(
    zip(
        WIRE_DTYPES,
        (default_hooks.allreduce_hook, default_hooks.bf16_compress_hook, default_hooks.fp16_compress_hook),
        strict=True,
    )
)
_WIRE_BYTES = {name: dtype.itemsize for name, dtype in WIRE_TORCH_DTYPES.items()}


def recording_hook(grad_dtype: str):
    """A DDP comm hook: the stock hook for `grad_dtype`, with its traffic recorded in `Comm`."""
    inner = _HOOKS[grad_dtype]
    elem = _WIRE_BYTES[grad_dtype]

    def hook(state: tuple[Comm, dist.ProcessGroup], bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
        comm, group = state
        nbytes = bucket.buffer().numel() * elem
        comm.current = "flat allreduce (DDP bucket)"
        return comm.record_future(inner(group, bucket), "flat", "allreduce", nbytes)

    return hook


class DDP(StepwiseMethod):
    name = "ddp"

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        cfg = ctx.config
        span = ctx.comm.timer.start()
        with warnings.catch_warnings():  # torch 2.14's FutureWarning on broadcast_buffers (module docstring)
            warnings.filterwarnings("ignore", message="`broadcast_buffers` is deprecated", category=FutureWarning)
            self.ddp = DistributedDataParallel(
                ctx.model,
                device_ids=[ctx.device.index] if ctx.device.type == "cuda" else None,
                process_group=ctx.groups.flat,
                broadcast_buffers=False,
                bucket_cap_mb=cfg.ddp.bucket_cap_mb,
            )
        # DDP's constructor broadcasts the parameters from rank 0 (not the buffers: broadcast_buffers=False)
        param_bytes = sum(p.numel() * p.element_size() for p in ctx.model.parameters())
        ctx.comm.record("flat", "broadcast", param_bytes, span.stop(), root=0)
        self.ddp.register_comm_hook((ctx.comm, ctx.groups.flat), recording_hook(cfg.ddp.grad_dtype))
        self.optimizer = self.make_sgd(self.ddp.parameters())

    def step(self, x: torch.Tensor, y: torch.Tensor) -> float:
        self.ddp.train()
        self.optimizer.zero_grad(set_to_none=True)
        loss = self.criterion(self.ddp(x), y)
        loss.backward()  # DDP's bucketed AllReduce runs here, overlapped with the backward
        self.ctx.comm.current = None
        self.optimizer.step()
        return loss.item()  # its finiteness: prunex.training.train.ranks_agree_on_failure

    def state_dict(self) -> dict[str, dict[str, Any]]:
        """Parameters and optimizer replicated (every rank applies the same AllReduced gradients);
        BatchNorm statistics per rank (`broadcast_buffers=False`)."""
        params, buffers = model_state(self.ctx.model)
        return {
            "replicated": {"params": params, "optimizer": self.optimizer.state_dict()},
            "node": {},
            "rank": {"buffers": buffers},
        }

    def load_state_dict(self, state: dict[str, dict[str, Any]]) -> None:
        load_model_state(self.ctx.model, state["replicated"]["params"], state["rank"]["buffers"])
        self.optimizer.load_state_dict(state["replicated"]["optimizer"])
