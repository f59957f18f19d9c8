"""How long one run takes on a described cluster, its GPU-hours, and the Slurm time limit to ask for.

    python -c "from experiments.common import profile, run; from prunex.cluster.estimate import estimate_run; \\
        print(estimate_run(run(profile('paper'), 'x', 'hsadmm', 'h'), 'puhti'))"

`estimate_run(config, cluster)` is the one estimate every caller uses (`--dry-run`, the doctor,
each run's Slurm time limit, budgets). It prices the run with the performance model
(`prunex.perfmodel`) on a cluster file (`clusters/<name>.json`), from the run's own configuration:

- **training**, SGD methods (ddp, topk, pactrain): ``epochs x epoch_cost(...).epoch_s`` (steps of
  ``batch_size`` over the rank's shard ``floor(D / N)``, communication per step, DDP's overlap);
  ADMM methods: ``iterations x`` one outer iteration (E local epochs + consensus) with the mask
  dynamic in ``min(freeze_iteration, iterations) / iterations`` of them, plus ``retrain_epochs x``
  a frozen-mask iteration of one local epoch. An ADMM run that converges early stops sooner: the
  estimate is then an upper bound.
- **evaluation**: every evaluation point (`prunex.training.train`, `prunex.training.evaluation`: each rank re-estimates
  BatchNorm on ``bn_batches`` batches of its shard and evaluates its 1/N slice of the test split)
  costs forward passes only, ``(ceil(test images / N) + bn_batches x batch_size) x
  compute_s_per_sample / 3`` of wall time (the backward pass is about twice the forward:
  `prunex.perfmodel.workload.Options.backward_fraction`).
- **`--export`** of a run of several tasks is a job of its own after training (`prunex.training.export_step`),
  priced by `estimate_export` on one GPU: the exactness check's forward passes (``EXPORT_CHECK_SAMPLES`` test
  images through the masked and the compact model, at most the split) and the inference bench's budget
  (``bench_budget_s`` for each of the two models, each of its two batch sizes and each device it measures: the
  CPU, and the GPU on a GPU run). `torch.export` itself is start-up, covered by the margin. A one-task run's
  export stays in its training job and is not priced.
- **not modelled**: queueing, start-up (module load, data loading, NCCL initialisation), checkpoint
  writes. The time limit covers them with the site's margin (`prunex.cluster.sites.TimeLimitPolicy`).

GPU-hours are ``seconds x GPUs / 3600`` of the estimate (what the run is expected to use); the time
limit is what Slurm reserves at most. Both are model numbers, as good as the cluster file: Puhti's
compute per sample is a FLOP-scaled estimate, not a measurement (`clusters/puhti.json`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

from prunex.cluster.sites import TimeLimitPolicy
from prunex.methods.registry import method_info
from prunex.perfmodel.calibrate import CalibrationError, Cluster, load_cluster
from prunex.perfmodel.workload import (
    Device,
    Options,
    epoch_cost,
    iteration_cost,
    method_workload,
    model_spec,
)
from prunex.training.config import EXPORT_CHECK_SAMPLES, RunConfig

# held-out images, split among the ranks (prunex.training.data)
TEST_SIZES = {"cifar10": 10_000, "digits": 359, "fashion-mnist": 10_000}
FORWARD_SHARE = 1.0 / 3.0  # forward pass of a training step's forward + backward (~2x forward) + update


class EstimateError(CalibrationError):
    """The cluster file cannot price this run (e.g. no compute time for its model)."""


@dataclass(frozen=True)
class RunEstimate:
    run: str
    cluster: str
    gpus: int
    train_s: float
    eval_s: float
    time_limit_min: int | None  # with the policy's margin (None: no policy given)

    @property
    def seconds(self) -> float:
        return self.train_s + self.eval_s

    @property
    def gpu_hours(self) -> float:
        return self.seconds * self.gpus / 3600.0

    def as_dict(self) -> dict[str, float | int | str | None]:
        return {
            "cluster": self.cluster,
            "hours": round(self.seconds / 3600.0, 3),
            "gpu_hours": round(self.gpu_hours, 2),
            "time_limit_min": self.time_limit_min,
        }


@lru_cache(maxsize=8)
def _cluster(name_or_path: str) -> Cluster:
    return load_cluster(name_or_path)


def options_for(config: RunConfig) -> Options:
    """The perf model's options of a run configuration (`Options.from_config`), with the share of
    dynamic-mask iterations taken over the outer loop alone: `estimate_run` prices the retraining
    iterations apart, with a frozen mask."""
    a = config.admm
    return replace(Options.from_config(config), dynamic_fraction=min(a.freeze_iteration, a.iterations) / a.iterations)


def evaluation_points(config: RunConfig) -> int:
    """Evaluation points of a run: every `eval_every`-th of its epochs (SGD) or outer iterations plus
    retraining epochs (ADMM), and the last (`prunex.methods`)."""
    if method_info(config.method).outer_iterations:
        iterations = config.admm.iterations + config.admm.retrain_epochs
    else:
        iterations = config.epochs
    return iterations // config.eval_every + (1 if iterations % config.eval_every else 0)


def _priced(cluster: str | Path | Cluster, model: str) -> tuple[Cluster, float]:
    """The cluster file and its compute seconds per sample of `model`; `EstimateError` when it has none."""
    c = cluster if isinstance(cluster, Cluster) else _cluster(str(cluster))
    per_sample = c.compute_s_per_sample.get(model)
    if per_sample is None:
        raise EstimateError(
            f"cluster file {c.path or c.name} has no compute_s_per_sample for {model!r} "
            f"(has: {', '.join(sorted(c.compute_s_per_sample)) or 'none'}); give --time-min"
        )
    return c, per_sample


def estimate_run(
    config: RunConfig,
    cluster: str | Path | Cluster,
    policy: TimeLimitPolicy | None = None,
    max_time_min: int | None = None,
) -> RunEstimate:
    """The modelled duration of `config` on `cluster` (module docstring), and with `policy` the Slurm
    time limit (clamped to `max_time_min`). Raises `EstimateError` when the cluster file lacks what
    the run needs."""
    c, per_sample = _priced(cluster, config.model)
    if config.dataset not in c.dataset_sizes:
        raise EstimateError(f"cluster file {c.path or c.name} does not know the size of {config.dataset!r}")
    size = c.dataset_sizes[config.dataset]
    if config.train_subset:
        size = min(size, config.train_subset)
    world = config.world_size
    shard = size // world
    if shard < 1:
        raise EstimateError(f"{size} training images do not fill {world} ranks")
    device = Device(per_sample, c.mem_bw, c.launch_s)
    spec = model_spec(config.model)
    opts = replace(options_for(config), batch_size=min(config.batch_size, shard))
    m, p = config.nodes, config.procs_per_node
    if method_info(config.method).outer_iterations:
        a = config.admm
        work = method_workload(config.method, spec, opts, world, shard)
        train = a.iterations * iteration_cost(work, m, p, c.network, device, opts).iter_s
        if a.retrain_epochs:
            frozen = replace(opts, local_epochs=1)
            retrain = method_workload(config.method, spec, frozen, world, shard, dynamic=0.0)
            train += a.retrain_epochs * iteration_cost(retrain, m, p, c.network, device, frozen).iter_s
    else:
        epoch = epoch_cost(config.method, spec, m, p, c.network, device, opts, size)
        train = config.epochs * epoch["epoch_s"]
    steps_per_epoch = math.ceil(shard / opts.batch_size)
    test_slice = math.ceil(TEST_SIZES.get(config.dataset, 0) / world)  # sharded evaluation
    forward_images = test_slice + min(config.bn_batches, steps_per_epoch) * opts.batch_size
    eval_s = evaluation_points(config) * forward_images * per_sample * FORWARD_SHARE
    limit = policy.limit_min(train + eval_s, max_time_min) if policy is not None else None
    return RunEstimate(config.name, c.name, world, train, eval_s, limit)


def estimate_export(
    config: RunConfig,
    cluster: str | Path | Cluster,
    policy: TimeLimitPolicy | None = None,
    max_time_min: int | None = None,
) -> RunEstimate:
    """The modelled duration of a run's export job (module docstring: one GPU, one task), and with `policy`
    its Slurm time limit. Raises `EstimateError` when the cluster file has no compute time for the model."""
    c, per_sample = _priced(cluster, config.model)
    test = TEST_SIZES.get(config.dataset, 0)
    check_images = min(EXPORT_CHECK_SAMPLES, test) if test else EXPORT_CHECK_SAMPLES
    check_s = 2 * check_images * per_sample * FORWARD_SHARE  # the masked and the compact model's logits
    devices = 1 if config.device == "cpu" else 2  # prunex.bench.inference.devices_for: the CPU, and the GPU
    bench_s = devices * 2 * 2 * config.bench_budget_s  # devices x batch sizes (1, bench_batch) x models
    limit = policy.limit_min(check_s + bench_s, max_time_min) if policy is not None else None
    # the bench in the training-time slot, the exactness check's forward passes in the evaluation slot
    return RunEstimate(f"{config.name} (export)", c.name, 1, bench_s, check_s, limit)


def estimate_jobs(
    config: RunConfig,
    cluster: str | Path | Cluster,
    policy: TimeLimitPolicy | None = None,
    max_time_min: int | None = None,
) -> list[RunEstimate]:
    """The estimates of every job a run submits: its training, then its export job (`RunConfig.export_job`).
    GPU-hours of a run are their sum."""
    out = [estimate_run(config, cluster, policy, max_time_min)]
    if config.export_job:
        out.append(estimate_export(config, cluster, policy, max_time_min))
    return out
