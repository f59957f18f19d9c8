"""What checkpoints and evaluation cost a profile, computed from model sizes: bytes, sets, GPU-hours.

    PYTHONPATH=. python -m benchmarks.checkpoints [--profile paper] [--cluster puhti] [--every-min 20]
        [--sgd-epochs N] [--admm-iterations K]

Two tables, each "before" and "after" issue 14's changes, for the profile's budget (or the one given
with ``--sgd-epochs``/``--admm-iterations``, e.g. 80 and 16, the paper profile's budget before):

1. Per method at the profile's main topology (16 x 4 for `paper`): bytes of one checkpoint set,
   sets per run and bytes written per run. *Before*: every rank wrote its whole state at every
   evaluation point. *After*: each piece once by its owner (`role_bytes`, the split of the methods'
   `state_dict`), one set per `--every-min` minutes of training.
2. The profile: runs, and a compute-only lower bound on GPU-hours: `prunex.cluster.estimate.estimate_run`,
   the estimate `--dry-run` and the Slurm time limits use (training from the performance model on the
   cluster file; evaluation at every evaluation point, forward passes at a third of a training
   sample's compute: BatchNorm re-estimation on ``bn_batches`` batches and the test split).
   *Before*: every experiment trained its own runs and every rank evaluated the whole test split.
   *After*: one run per distinct training, the split shared by the ranks.

Bytes are fp32 tensors (bool masks: 1 byte) plus each rank's RNG states, as `torch.save` writes
them, without its few hundred bytes per tensor of framing (`tests/test_checkpoint.py` checks the
split against the files a 2 x 2 run writes). Not-modelled costs (start-up, queueing) are left out, as in
`estimate_run`. ADMM runs may stop early on convergence: their
figures are upper bounds. Nothing here is measured on a GPU.
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import math
import sys
from dataclasses import dataclass

import torch

from experiments.all import EXPERIMENTS
from experiments.cli import resolve
from experiments.common import profile
from prunex.cluster.estimate import FORWARD_SHARE, TEST_SIZES, estimate_run, evaluation_points
from prunex.methods.registry import METHOD_NAMES
from prunex.perfmodel.calibrate import CalibrationError, Cluster, load_cluster
from prunex.perfmodel.workload import ModelSpec, model_spec
from prunex.training.checkpoint import rng_state
from prunex.training.config import RunConfig

FP32 = 4


def rng_bytes() -> int:
    """Bytes of one rank's serialised RNG states (`prunex.training.checkpoint.rng_state`)."""
    buf = io.BytesIO()
    torch.save(rng_state(), buf)
    return len(buf.getvalue())


def role_bytes(method: str, spec: ModelSpec) -> dict[str, int]:
    """Bytes of one copy of each role's state (`prunex.methods`' `state_dict`), tensors only.

    P: parameters; S: parameters with more than one dimension (Top-K's error feedback, PacTrain's
    masks); B: floating-point buffers (BatchNorm statistics). Momentum is one tensor per parameter.
    """
    p = spec.numel * FP32
    s = sum(q.numel for q in spec.params if len(q.shape) > 1)
    b = sum(spec.buffers) * FP32
    roles = {
        "ddp": {"replicated": 2 * p, "node": 0, "rank": b},  # params + momentum; BatchNorm per rank
        "topk": {"replicated": 2 * p, "node": 0, "rank": b + s * FP32},  # + residuals per rank
        "pactrain": {"replicated": 2 * p + s, "node": 0, "rank": b},  # + bool masks
        "hsadmm": {"replicated": p, "node": 2 * p, "rank": 3 * p + b},  # z; z_i, v; theta, momentum, u
        "flat_admm": {"replicated": p, "node": 0, "rank": 3 * p + b},  # z; theta, momentum, u
    }
    roles["prune_finetune"] = roles["ddp"]  # DDP's state: the masks are rebuilt from the dense run on start
    if method not in roles:
        raise ValueError(f"unknown method {method!r}; known: {', '.join(roles)}")
    return roles[method]


def set_bytes(method: str, spec: ModelSpec, nodes: int, procs_per_node: int, rng: int = 0) -> dict[str, int]:
    """One checkpoint set: `before` (every rank all of its state) and `after` (each piece by its owner)."""
    r = role_bytes(method, spec)
    world = nodes * procs_per_node
    per_rank = r["replicated"] + r["node"] + r["rank"] + rng
    return {
        "before": world * per_rank,
        "after": r["replicated"] + nodes * r["node"] + world * (r["rank"] + rng),
    }


@dataclass(frozen=True)
class RunCost:
    train_s: float  # wall seconds of training (compute + exposed communication)
    eval_points: int
    gpus: int
    eval_gpu_s_before: float
    eval_gpu_s_after: float

    @property
    def gpu_h_before(self) -> float:
        return (self.train_s * self.gpus + self.eval_gpu_s_before) / 3600

    @property
    def gpu_h_after(self) -> float:
        return (self.train_s * self.gpus + self.eval_gpu_s_after) / 3600


def run_cost(config: RunConfig, cluster: Cluster) -> RunCost:
    """Training seconds and evaluation GPU-seconds of one run on `cluster` (module docstring), from
    `prunex.cluster.estimate.estimate_run`, the estimate every caller uses. *After* is that estimate (each rank
    evaluates its slice of the split); *before* adds, per evaluation point and rank, the rest of the
    split that every rank evaluated."""
    est = estimate_run(config, cluster)
    points = evaluation_points(config)
    world = config.world_size
    forward = cluster.compute_s_per_sample[config.model] * FORWARD_SHARE
    test = TEST_SIZES[config.dataset]
    unsharded = points * (test - math.ceil(test / world)) * forward  # wall seconds of the rest of the split
    return RunCost(
        train_s=est.train_s,
        eval_points=points,
        gpus=world,
        eval_gpu_s_before=world * (est.eval_s + unsharded),
        eval_gpu_s_after=world * est.eval_s,
    )


def _gb(x: float) -> str:
    return f"{x / 1e9:,.1f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.checkpoints", description=__doc__.split("\n")[0])
    ap.add_argument("--profile", default="paper")
    ap.add_argument("--cluster", default="puhti")
    ap.add_argument(
        "--every-min", type=float, default=20.0, help="checkpoint cadence after the change (0: at every evaluation)"
    )
    ap.add_argument("--sgd-epochs", type=int, help="override the profile's SGD epochs")
    ap.add_argument("--admm-iterations", type=int, help="override the profile's ADMM outer iterations")
    args = ap.parse_args(argv)
    for option, value in (("--sgd-epochs", args.sgd_epochs), ("--admm-iterations", args.admm_iterations)):
        if value is not None and value < 1:  # 0 was ignored (the profile's own), a negative count failed later
            ap.error(f"{option} must be >= 1, got {value}")
    if not args.every_min >= 0:  # nan too
        ap.error(f"--every-min must be >= 0 (0: at every evaluation), got {args.every_min:g}")
    try:
        cluster = load_cluster(args.cluster)
        base = profile(args.profile)
    except (CalibrationError, ValueError) as e:  # an unknown cluster or profile: its one line, not a traceback
        ap.error(str(e))
    changes = {}
    if args.sgd_epochs is not None:
        changes["epochs"] = args.sgd_epochs
    if args.admm_iterations is not None:
        changes["admm"] = dataclasses.replace(base.admm, iterations=args.admm_iterations)

    def runs_of(name: str) -> list:
        import importlib

        fn = importlib.import_module(f"experiments.{name}").runs
        return resolve(name, lambda p: fn(dataclasses.replace(p, **changes)), args.profile, None, "results")

    asked = [c for name in EXPERIMENTS for c in runs_of(name)]
    distinct = list({c.shared_id: c for c in asked}.values())
    rng = rng_bytes()
    print(
        f"profile {args.profile}: {base.model} on {base.dataset}, {base.nodes} x {base.procs_per_node}, "
        f"SGD {asked[0].epochs if not changes.get('epochs') else changes['epochs']} epochs, ADMM up to "
        f"{(changes.get('admm') or base.admm).iterations} outer iterations; cluster {cluster.name}; "
        f"cadence after: {args.every_min:g} min"
    )
    print("\n1. checkpoints of one run at the profile's topology (GB)")
    header = f"{'method':<14} {'set before':>11} {'set after':>10} {'sets before':>12} {'sets after':>11} "
    header += f"{'run before':>11} {'run after':>10} {'train min':>10}"
    print(header)
    by_method = {c.method: c for c in asked if (c.nodes, c.model) == (base.nodes, base.model)}
    for method in METHOD_NAMES:
        if method not in by_method:
            continue
        c = by_method[method]
        sb = set_bytes(method, model_spec(c.model), c.nodes, c.procs_per_node, rng)
        cost = run_cost(c, cluster)
        sets_after = math.floor(cost.train_s / (args.every_min * 60)) if args.every_min > 0 else cost.eval_points
        print(
            f"{method:<14} {_gb(sb['before']):>11} {_gb(sb['after']):>10} {cost.eval_points:>12} {sets_after:>11} "
            f"{_gb(sb['before'] * cost.eval_points):>11} {_gb(sb['after'] * sets_after):>10} "
            f"{cost.train_s / 60:>10.1f}"
        )

    def checkpoint_bytes(c, cost: RunCost, when: str) -> float:
        sb = set_bytes(c.method, model_spec(c.model), c.nodes, c.procs_per_node, rng)[when]
        if when == "before":
            return sb * cost.eval_points
        return sb * (math.floor(cost.train_s / (args.every_min * 60)) if args.every_min > 0 else cost.eval_points)

    before = [(c, run_cost(c, cluster)) for c in asked]
    after = [(c, run_cost(c, cluster)) for c in distinct]
    rows = {
        "before": (
            len(asked),
            sum(r.train_s * r.gpus for _, r in before) / 3600,
            sum(r.eval_gpu_s_before for _, r in before) / 3600,
            sum(checkpoint_bytes(c, r, "before") for c, r in before),
        ),
        "after": (
            len(distinct),
            sum(r.train_s * r.gpus for _, r in after) / 3600,
            sum(r.eval_gpu_s_after for _, r in after) / 3600,
            sum(checkpoint_bytes(c, r, "after") for c, r in after),
        ),
    }
    print("\n2. the profile (GPU-hours: compute-only lower bound)")
    print(f"{'':<8} {'runs':>5} {'training':>9} {'evaluation':>11} {'total':>8} {'checkpoints written TB':>23}")
    for label, (n, train_h, eval_h, ckpt) in rows.items():
        print(f"{label:<8} {n:>5} {train_h:>9,.0f} {eval_h:>11,.0f} {train_h + eval_h:>8,.0f} {ckpt / 1e12:>23,.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
