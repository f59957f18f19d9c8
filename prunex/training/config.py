"""Run configuration: frozen dataclasses, validated before anything is launched.

A `RunConfig` fully describes one training run: method, model, data, topology, the options of
every method, and the link model. It is written as `config.json` beside the run's logs
(`dataclasses.asdict`) and read back with `RunConfig.from_dict` (e.g. to check that a checkpoint
belongs to the same configuration). Variants are made with `dataclasses.replace`.

Every invalid value raises `ConfigError` with a one-line message; the launcher turns that into a
clear error before any process is started.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import math
import re
from dataclasses import dataclass, field, fields
from typing import Any, NoReturn

from prunex.methods.registry import METHOD_NAMES, METHOD_SECTIONS, OWN_METHODS_HINT, PLUGIN_ERROR, method_info

# Names that can become part of a directory or a Slurm job name: no path separators, no spaces,
# no shell metacharacters, no leading dot (so "..", ".hidden" are refused).
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+=-]{0,127}$")

DATASET_NAMES = ("cifar10", "digits", "fashion-mnist")
# the names `prunex.training.models.MODELS` builds, here without torch: every RunConfig checks its model, and a
# process that only makes RunConfigs (a launcher that refuses, waits or reattaches) imports no torch for it
# (tests/test_config.py)
MODEL_NAMES = ("resnet18", "resnet152", "resnet20", "wide_resnet50_2")
EXECUTOR_NAMES = ("debug", "local", "slurm")
DEVICE_NAMES = ("auto", "cuda", "cpu")  # prunex.training.device
LINK_MODELS = ("none", "alpha-beta", "netns-tc")
MOMENTUM_POLICIES = ("carry", "reset")
RHO_SCHEDULES = ("grow", "balance")  # ADMMConfig.rho_schedule
PHASE1_STARTS = ("theta", "z")  # ADMMConfig.phase1_start
RETRAININGS = ("admm", "admm_from_z", "admm_from_z_anchor_z", "local_sgd")  # ADMMConfig.retraining
WIRE_DTYPES = ("fp32", "bf16", "fp16")  # element types on the wire: H-SADMM's compact buckets, DDP's gradients
INTER_EXCHANGES = ("leader", "sharded")  # how the compact buckets cross nodes
SHARED_RUNS_DIR = "runs"  # RESULTS/runs/<shared id>: every run, once; experiments link to it

# Run identity. Two configs that differ only in these fields ask for the same training, so they share
# one run directory (`prunex.cluster.rundir.run_dir_for`): which experiment asked and what it calls the run,
# where results go, and how the job is operated (checkpoint cadence, collective timeout, core binding,
# the inference bench's large batch), none of which changes a trained weight (the bench's table records
# the batch of each of its rows; bench_budget_s stays in the identity, as it did before bench_batch came).
WHO_ASKED = ("experiment", "name", "results")
# `--export`'s exactness check (compact against masked logits, to 1e-5) reads this many test images before the
# run is marked DONE: the whole 10,000-image Fashion-MNIST split took 90 s of a 2-core VM (`python -m
# prunex.pruning.export RUN` checks the whole split by default)
EXPORT_CHECK_SAMPLES = 1024
OPERATIONAL = ("checkpoint_every_min", "collective_timeout_s", "bind_cores", "bench_batch")
# Training fields added after results directories were made, each with the default that is the behaviour those
# runs had: left out of the training key (`RunConfig.training_dict`) at that default, so that a results directory
# made before keeps its finished runs, and their directories' names, when `./run_all.sh` resumes it.
KEY_OMITS_AT_DEFAULT = {
    ("admm", "phase1_start"): "theta",
    ("admm", "retraining"): "admm",
    ("prune_finetune", "mask_from"): "",
}


# Defaults that depend on the dataset. CIFAR-10: the paper's sec. 5.1.5 (batch 128 per GPU, SGD
# lr 1e-3). digits has only 1,438 training images (2.8 batches of 128 per rank on 2 x 2), so its
# defaults give a CPU run enough steps to learn: batch 32, lr 0.05. Explicit values always win,
# and config.json records the resolved values.
DATASET_DEFAULTS = {
    "cifar10": {"epochs": 30, "batch_size": 128, "lr": 1e-3},
    "digits": {"epochs": 5, "batch_size": 32, "lr": 0.05},
    "fashion-mnist": {"epochs": 5, "batch_size": 64, "lr": 0.05},
}


class ConfigError(ValueError):
    """An invalid configuration value; its message is one line meant for the user."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse with one-line refusals: `error: MESSAGE (see PROG --help)`, exit code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {message} (see {self.prog} --help)\n")


def _check_keep(name: str, value: float) -> None:
    if not (isinstance(value, (int, float)) and 0.0 < value <= 1.0 and math.isfinite(value)):
        raise ConfigError(f"{name} must be in (0, 1], got {value!r}")


INT_LIMIT = 2**63  # what torch and numpy take as a seed or a count; larger ints fail only after launch
# Upper bounds of values that are used as durations or sizes after launch, where a larger one raised there
# (timedelta, time.sleep and DDP's bucket size overflow) or never ended (a benchmark budget)
MAX_SECONDS = 86_400  # a day: collective timeout, benchmark budget
MAX_ALPHA_S = 1.0  # per-message latency of the alpha-beta link model
MAX_BUCKET_MB = 1e6  # a terabyte


def check_numbers(obj: object, section: str = "") -> None:
    """Every number of a configuration dataclass is a real value: floats finite (no NaN, no inf: a NaN
    passes every `<`/`>` test and became a non-standard NaN in config.json), ints within +-2^63. Called
    first by each configuration's ``__post_init__``, so a bad value is one line before anything runs."""
    for f in dataclasses.fields(obj):  # type: ignore[arg-type]
        value = getattr(obj, f.name)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        where = f"{section}.{f.name}" if section else f.name
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{where} must be a finite number, got {value}")
        if isinstance(value, int) and not -INT_LIMIT < value < INT_LIMIT:
            raise ConfigError(f"{where} must be an integer below 2^63 in size, got {value}")


def check_name(name: str, what: str = "run name") -> str:
    """Refuse names that would escape the results directory or break shell/Slurm naming."""
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise ConfigError(
            f"invalid {what} {name!r}: use letters, digits and . _ + = - only "
            "(no spaces, slashes, '..' or shell metacharacters), starting with a letter or digit"
        )
    return name


@dataclass(frozen=True, kw_only=True)
class ADMMConfig:
    """H-SADMM and flat consensus ADMM options (paper sec. 3, Alg. 1; defaults from sec. 5.1.5)."""

    iterations: int = 60  # K_max, Alg. 1 line 2 ("up to 60 outer iterations")
    local_epochs: int = 5  # E in eq. (8)
    rho_intra: float = 1.5e-3  # initial rho_1 per layer
    rho_inter: float = 1.5e-4  # initial rho_2 per layer
    rho_max: float = 10.0  # cap of both penalties
    adaptive_rho: bool = True  # residual balancing (Boyd et al. 2011, sec. 3.4.1)
    rho_mu: float = 10.0
    rho_tau: float = 2.0
    # Penalties over the dynamic iterations (`prunex.admm.engine.ConsensusEngine.grow_penalties`): "grow"
    # multiplies each by (rho_max / its initial value)^(1 / freeze_iteration) after every dynamic round, on top
    # of residual balancing, so that it reaches the cap by T_freeze and the projection's support settles
    # (sec. 4.5: "as the H-SADMM penalty parameters increase ... the sparsity patterns naturally stabilize";
    # the progressive penalty of ADMM pruning); "balance": residual balancing only.
    rho_schedule: str = "grow"
    eps_abs: float = 1e-4  # Boyd et al. absolute tolerance (per sqrt(#elements))
    eps_rel: float = 1e-3  # relative tolerance
    stop_on_convergence: bool = True
    filter_keep: float = 1.0
    channel_keep: float = 0.5  # primary configuration of the paper
    shape_keep: float = 1.0
    layers: str | None = None  # fnmatch glob over parameter names; None = every conv weight
    freeze_iteration: int = 15  # T_freeze, Alg. 1 line 10
    freeze_patience: int = 3  # freeze earlier once the global mask is unchanged this many iterations
    retrain_epochs: int = 0  # masked retraining after the outer loop (sec. 4.5)
    bucket_mb: float = 32.0  # coalesced inter-node buffers (sec. 4.4.2)
    # SGD momentum of phase 1 across outer iterations (and so across rho rescalings): "carry" keeps the
    # buffers (one optimizer for the run), "reset" starts every phase 1 from zero momentum (a fresh solve
    # of eq. (8) around its new anchor). See docs/hsadmm.md.
    momentum_policy: str = "carry"
    # Where every phase 1 after the first starts: "theta", the rank's own theta^k (Alg. 1 line 4,
    # SGD(grad f, theta^k, z_i^k, u^k): warm, the paper's); "z", the global consensus z^k, as local SGD restarts
    # every rank from the average (a stated variant, not the paper's: it asks what keeping one's own theta between
    # rounds costs; the duals, penalties and momentum are untouched). docs/pruned-models.md says what we measured.
    phase1_start: str = "theta"
    # How phase 1 runs on the frozen mask: "admm", Alg. 1's (warm from the rank's own theta, phase1_start aside,
    # with the proximal term of eq. (8)). Three stated diagnostic variants, not the paper's, that ask what the
    # consensus costs after the freeze, where the mask is no longer being found: "admm_from_z", every phase 1 on
    # the frozen mask starts from the global consensus z, the proximal term kept; "admm_from_z_anchor_z", the same
    # with the proximal term's anchor z_i instead of z_i - u (the duals left out of phase 1, not of the consensus);
    # "local_sgd", the same without the proximal term, so the ranks train as local SGD does between averagings.
    # The consensus steps (eqs. 9-13) are unchanged in all three. docs/pruned-models.md says what we measured.
    retraining: str = "admm"
    # Average BatchNorm running statistics over all ranks at every consensus (inter-node too). None: only
    # when evaluation does not re-estimate them (RunConfig.bn_batches == 0), since re-estimation throws the
    # averages away; RunConfig.averages_bn_stats resolves it.
    average_bn_stats: bool | None = None
    # Element type of the compact inter-node buckets on the wire (issue 18): "fp32" (the paper's), or
    # "bf16"/"fp16": pre-scaled by 1/M, summed in that type, cast back before decompress (`prunex.comm.wire`).
    wire_dtype: str = "fp32"
    # Pipelined inter-node buckets (issue 18): bucket k+1 is compressed while bucket k's AllReduce is in
    # flight; bitwise the same result as one bucket after another (`prunex.admm.steps.inter_node_average`).
    pipeline_buckets: bool = True
    # Inter-node exchange of the compact buckets (issue 18): "leader" (the paper's, through the node
    # leaders) or "sharded" (each local rank AllReduces 1/P of every bucket with its peers on the other
    # nodes, then the node AllGathers; every NIC of a multi-NIC node busy), `prunex.comm.wire`.
    inter_exchange: str = "leader"

    def __post_init__(self) -> None:
        check_numbers(self, "admm")
        if self.iterations < 1:
            raise ConfigError(f"iterations must be >= 1, got {self.iterations}")
        if self.local_epochs < 1:
            raise ConfigError(f"local_epochs must be >= 1, got {self.local_epochs}")
        for name in ("rho_intra", "rho_inter"):
            value = getattr(self, name)
            if not 0.0 < value <= self.rho_max:
                raise ConfigError(f"{name} must be in (0, rho_max={self.rho_max}], got {value}")
        if self.rho_mu <= 1.0 or self.rho_tau <= 1.0:
            raise ConfigError("rho_mu and rho_tau must be > 1")
        if self.eps_abs < 0 or self.eps_rel < 0:
            raise ConfigError(f"eps_abs and eps_rel must be >= 0, got {self.eps_abs} and {self.eps_rel}")
        for name in ("filter_keep", "channel_keep", "shape_keep"):
            _check_keep(name, getattr(self, name))
        if self.freeze_iteration < 1:
            raise ConfigError(
                f"freeze_iteration must be >= 1, got {self.freeze_iteration} (T_freeze counts the iterations "
                "whose mask is recomputed; 0 would freeze the all-ones initial mask and never prune)"
            )
        if self.freeze_patience < 1:
            raise ConfigError(f"freeze_patience must be >= 1, got {self.freeze_patience}")
        if self.retrain_epochs < 0:
            raise ConfigError(f"retrain_epochs must be >= 0, got {self.retrain_epochs}")
        if not 0 < self.bucket_mb <= MAX_BUCKET_MB:
            raise ConfigError(f"bucket size must be in (0, {MAX_BUCKET_MB:g}] MB, got {self.bucket_mb}")
        if self.rho_schedule not in RHO_SCHEDULES:
            raise ConfigError(f"rho_schedule must be one of {', '.join(RHO_SCHEDULES)}, got {self.rho_schedule!r}")
        if self.momentum_policy not in MOMENTUM_POLICIES:
            raise ConfigError(
                f"momentum_policy must be one of {', '.join(MOMENTUM_POLICIES)}, got {self.momentum_policy!r}"
            )
        if self.phase1_start not in PHASE1_STARTS:
            raise ConfigError(f"phase1_start must be one of {', '.join(PHASE1_STARTS)}, got {self.phase1_start!r}")
        if self.retraining not in RETRAININGS:
            raise ConfigError(f"retraining must be one of {', '.join(RETRAININGS)}, got {self.retraining!r}")
        if self.inter_exchange not in INTER_EXCHANGES:
            raise ConfigError(
                f"inter_exchange must be one of {', '.join(INTER_EXCHANGES)}, got {self.inter_exchange!r}"
            )
        if self.wire_dtype not in WIRE_DTYPES:
            raise ConfigError(f"wire_dtype must be one of {', '.join(WIRE_DTYPES)}, got {self.wire_dtype!r}")


@dataclass(frozen=True, kw_only=True)
class TopKConfig:
    """Top-K sparsification with error feedback (paper sec. 5.1.4; Lin et al. 2018 for DGC)."""

    ratio: float = 0.01
    warmup_epochs: int = 0  # DGC-style exponential ratio warm-up; off by default
    momentum_correction: bool = False  # DGC momentum correction; off by default

    def __post_init__(self) -> None:
        check_numbers(self, "topk")
        _check_keep("topk ratio", self.ratio)
        if self.warmup_epochs < 0:
            raise ConfigError(f"topk warmup_epochs must be >= 0, got {self.warmup_epochs}")


@dataclass(frozen=True, kw_only=True)
class PacTrainConfig:
    """PacTrain: magnitude pruning + mask-aware dense-packed AllReduce."""

    density: float = 0.5
    prune_epochs: int = 1  # epochs over which the density is reached (schedule updates)
    prune_every: int = 1  # update the mask every this many epochs until prune_epochs

    def __post_init__(self) -> None:
        check_numbers(self, "pactrain")
        _check_keep("density", self.density)
        if self.prune_epochs < 0 or self.prune_every < 1:
            raise ConfigError("prune_epochs must be >= 0 and prune_every >= 1")


@dataclass(frozen=True, kw_only=True)
class DDPConfig:
    grad_dtype: str = "fp32"  # fp32, or bf16/fp16 through DDP's built-in compression hooks
    bucket_cap_mb: float = 25.0  # DDP's own default

    def __post_init__(self) -> None:
        check_numbers(self, "ddp")
        if self.grad_dtype not in WIRE_DTYPES:
            raise ConfigError(f"grad_dtype must be one of {', '.join(WIRE_DTYPES)}, got {self.grad_dtype!r}")
        if not 0 < self.bucket_cap_mb <= MAX_BUCKET_MB:
            raise ConfigError(f"DDP bucket size must be in (0, {MAX_BUCKET_MB:g}] MB, got {self.bucket_cap_mb}")


@dataclass(frozen=True, kw_only=True)
class PruneFinetuneConfig:
    """Prune-then-finetune: a dense model, one-shot L1 structured pruning, masked DDP fine-tuning.

    Runs are named within the same experiment directory. The FLOPs target is `flops_from`'s
    achieved fraction (its `export.json`) when given, else `flops_keep`.
    """

    flops_from: str = ""  # run whose exported FLOPs fraction is the target
    flops_keep: float = 1.0  # target fraction of the dense FLOPs (without flops_from)
    # A run whose final mask (`final_masks.parquet`, e.g. H-SADMM's) is applied instead of the L1 filters: the same
    # network as that run's, fine-tuned from the start with DDP (a diagnostic: is it the mask or the training?)
    mask_from: str = ""

    def __post_init__(self) -> None:
        check_numbers(self, "prune_finetune")
        if self.flops_from:
            check_name(self.flops_from, "prune_finetune flops_from run name")
        if self.mask_from:
            check_name(self.mask_from, "prune_finetune mask_from run name")
            if self.flops_from or self.flops_keep != 1.0:
                raise ConfigError("prune_finetune: give mask_from or a FLOPs target (flops_from, flops_keep), not both")
        if self.flops_from and self.flops_keep != 1.0:  # flops_from's fraction was pruned to, flops_keep ignored
            raise ConfigError(
                "prune_finetune: give one FLOPs target, flops_from (a run's exported fraction) or flops_keep"
            )
        _check_keep("prune_finetune flops_keep", self.flops_keep)


@dataclass(frozen=True, kw_only=True)
class LinkConfig:
    """How inter-node links are modelled. `netns-tc`: real shaped links (mini cluster);
    `alpha-beta`: the comm layer delays inter-node collectives by alpha + bytes/beta;
    `none`: whatever the hardware gives."""

    model: str = "none"
    alpha_s: float = 5e-5  # per-message latency of an inter-node hop (alpha-beta)
    bandwidth_gbit: float = 1.0  # inter-node link rate (alpha-beta)

    def __post_init__(self) -> None:
        check_numbers(self, "link")
        if self.model not in LINK_MODELS:
            raise ConfigError(f"link model must be one of {', '.join(LINK_MODELS)}, got {self.model!r}")
        if not 0 <= self.alpha_s <= MAX_ALPHA_S or not self.bandwidth_gbit > 0:
            raise ConfigError(
                f"link alpha must be in [0, {MAX_ALPHA_S:g}] s and bandwidth > 0, got {self.alpha_s} s, "
                f"{self.bandwidth_gbit} Gbit/s"
            )


@dataclass(frozen=True, kw_only=True)
class RunConfig:
    """One training run. Defaults follow the paper (sec. 5.1.5) where it gives a value."""

    method: str
    model: str = "resnet20"
    dataset: str = "digits"
    data_root: str = ""  # "" = $PRUNEX_DATA or ./data
    nodes: int = 1  # M
    procs_per_node: int = 1  # P
    epochs: int | None = None  # SGD methods (ddp, topk, pactrain); None: DATASET_DEFAULTS
    batch_size: int | None = None  # per process; None: DATASET_DEFAULTS
    lr: float | None = None  # None: DATASET_DEFAULTS
    momentum: float = 0.9
    weight_decay: float = 1e-4  # lambda of eq. (1)
    seed: int = 0
    # a finished run of the same experiment whose final_model.pt every rank starts from (Alg. 1 line 1:
    # "Random/Pre-trained"); "" = random initialisation from `seed`. prune_finetune prunes that model.
    init_from: str = ""
    name: str = ""  # "" = derived from method, model, dataset and topology
    experiment: str = "adhoc"  # directory level above the run
    profile: str = "adhoc"  # the experiment profile that made the run (smoke, local, paper), for captions
    results: str = "results"
    executor: str = "local"
    device: str = (
        ""  # auto, cuda or cpu (prunex.training.device); "" = cuda on the slurm executor (required), else auto
    )
    eval_every: int = 1  # evaluate every this many epochs (SGD) or outer iterations (ADMM)
    bn_batches: int = 20  # BatchNorm statistics re-estimated on this many shard batches before each evaluation
    num_workers: int = 0  # DataLoader workers per process
    train_subset: int = 0  # use only the first n training images (0: all); for smoke runs
    collective_timeout_s: float = 300.0  # every process group; a dead rank ends the job by then
    # wall-clock minutes between checkpoints, taken at the next evaluation point (0: at every one)
    checkpoint_every_min: float = 20.0
    # one core per process on this machine (rank r on core r mod cores, torch on one thread;
    # prunex.cluster.regime.bind_to_core): for jobs whose nodes share one machine, such as the mini cluster's.
    # Changes timings, not the training: not part of a run's identity.
    bind_cores: bool = False
    # after training, the compact model is exported and its inference benched: in the training job for a
    # one-task run, else in an export job of its own (`export_job`, prunex.training.export_step)
    export: bool = False
    bench_budget_s: float = 5.0  # --export: seconds of timed repeats per model and batch size
    # --export: the inference bench's large batch (batch 1 is always measured; the paper's 128). The
    # table records the batch of every row; no trained weight depends on it: not part of a run's identity.
    bench_batch: int = 128
    admm: ADMMConfig = field(default_factory=ADMMConfig)
    topk: TopKConfig = field(default_factory=TopKConfig)
    pactrain: PacTrainConfig = field(default_factory=PacTrainConfig)
    ddp: DDPConfig = field(default_factory=DDPConfig)
    prune_finetune: PruneFinetuneConfig = field(default_factory=PruneFinetuneConfig)
    link: LinkConfig = field(default_factory=LinkConfig)

    def __post_init__(self) -> None:
        check_numbers(self, "")
        if self.dataset in DATASET_DEFAULTS:
            for key, value in DATASET_DEFAULTS[self.dataset].items():
                if getattr(self, key) is None:
                    object.__setattr__(self, key, value)
        if PLUGIN_ERROR:
            raise ConfigError(PLUGIN_ERROR)
        if self.method not in METHOD_NAMES:
            raise ConfigError(f"unknown method {self.method!r}; known: {', '.join(METHOD_NAMES)} ({OWN_METHODS_HINT})")
        if self.model not in MODEL_NAMES:
            raise ConfigError(f"unknown model {self.model!r}; known: {', '.join(sorted(MODEL_NAMES))}")
        if self.dataset not in DATASET_NAMES:
            raise ConfigError(f"unknown dataset {self.dataset!r}; known: {', '.join(DATASET_NAMES)}")
        if self.executor not in EXECUTOR_NAMES:
            raise ConfigError(f"unknown executor {self.executor!r}; known: {', '.join(EXECUTOR_NAMES)}")
        if not self.device:  # no silent CPU on a cluster: a Slurm run needs its GPUs unless told otherwise
            object.__setattr__(self, "device", "cuda" if self.executor == "slurm" else "auto")
        if self.device not in DEVICE_NAMES:
            raise ConfigError(f"unknown device {self.device!r}; known: {', '.join(DEVICE_NAMES)}")
        if self.device == "cuda" and self.link.model == "alpha-beta":
            raise ConfigError(
                "the alpha-beta link model emulates slow links for CPU runs; on GPUs use --link-model none"
            )
        if self.nodes < 1 or self.procs_per_node < 1:
            raise ConfigError(f"impossible topology: nodes={self.nodes} x procs_per_node={self.procs_per_node}")
        if self.executor == "debug" and self.world_size != 1:
            raise ConfigError(
                "the debug executor runs one process in the foreground; use --executor local for "
                f"{self.nodes} x {self.procs_per_node} processes"
            )
        if self.epochs < 1:
            raise ConfigError(f"epochs must be >= 1, got {self.epochs}")
        if self.batch_size < 1:
            raise ConfigError(f"batch size must be >= 1, got {self.batch_size}")
        if not (self.lr > 0 and math.isfinite(self.lr)):
            raise ConfigError(f"learning rate must be > 0, got {self.lr}")
        if not 0 <= self.momentum < 1:
            raise ConfigError(f"momentum must be in [0, 1), got {self.momentum}")
        if self.weight_decay < 0:
            raise ConfigError(f"weight decay must be >= 0, got {self.weight_decay}")
        if self.bn_batches < 0:
            raise ConfigError(f"bn_batches must be >= 0, got {self.bn_batches}")
        if self.eval_every < 1:
            raise ConfigError(f"eval_every must be >= 1, got {self.eval_every}")
        if self.train_subset < 0:
            raise ConfigError(f"train_subset must be >= 0, got {self.train_subset}")
        if self.num_workers < 0:
            raise ConfigError(f"num_workers must be >= 0, got {self.num_workers}")
        if self.bench_batch < 1:
            raise ConfigError(f"bench batch must be at least 1, got {self.bench_batch}")
        if not 0 < self.bench_budget_s <= MAX_SECONDS:
            raise ConfigError(f"bench budget must be in (0, {MAX_SECONDS}] s, got {self.bench_budget_s}")
        if not 0 < self.collective_timeout_s <= MAX_SECONDS:
            raise ConfigError(f"collective timeout must be in (0, {MAX_SECONDS}] s, got {self.collective_timeout_s}")
        if not (self.checkpoint_every_min >= 0 and math.isfinite(self.checkpoint_every_min)):
            raise ConfigError(f"checkpoint cadence must be >= 0 minutes, got {self.checkpoint_every_min}")
        if self.init_from:
            if "/" in self.init_from:  # a path, as a user would give first: say what the option takes
                raise ConfigError(
                    f"--init-from {self.init_from!r} is a path; it takes the name of a finished run of the same "
                    f"experiment, a folder of {self.results.rstrip('/')}/{self.experiment} (or give --results and "
                    "--experiment where that run lives)"
                )
            check_name(self.init_from, "init_from run name")
        if self.method == "prune_finetune" and not self.init_from:
            raise ConfigError("prune_finetune needs the dense run to start from (--init-from RUN_NAME)")
        check_name(self.experiment, "experiment name")
        if self.experiment == SHARED_RUNS_DIR:
            raise ConfigError(f"experiment name {SHARED_RUNS_DIR!r} is reserved for the shared run directories")
        check_name(self.profile, "profile name")
        if self.name:
            check_name(self.name)
        else:
            object.__setattr__(self, "name", self.default_name())

    @property
    def world_size(self) -> int:
        return self.nodes * self.procs_per_node

    @property
    def export_job(self) -> bool:
        """Whether `--export` goes out as a one-task job of its own after training (`prunex.training.export_step`):
        a run of several tasks would otherwise hold its whole allocation while one process exports. Not with
        `bind_cores`, whose nodes share one machine (the regime profile's): the job frees nothing of it, and a job
        of its own would run beside the next run of a serial wave and disturb both runs' timings."""
        return self.export and self.world_size > 1 and not self.bind_cores

    @property
    def averages_bn_stats(self) -> bool:
        """Whether the ADMM engines average BatchNorm statistics (`ADMMConfig.average_bn_stats`)."""
        a = self.admm.average_bn_stats
        return self.bn_batches == 0 if a is None else a

    def default_name(self) -> str:
        return f"{self.method}-{self.model}-{self.dataset}-{self.nodes}x{self.procs_per_node}-s{self.seed}"

    @property
    def depends_on(self) -> list[str]:
        """Runs of the same experiment that must be finished before this one starts: the one it starts from
        (`init_from`) and, for a method that reads `prune_finetune`, those whose FLOPs or final mask it reads
        when it starts (`flops_from`, `mask_from`)."""
        pf = self.prune_finetune if "prune_finetune" in method_info(self.method).reads else PruneFinetuneConfig()
        return [n for n in (self.init_from, pf.flops_from, pf.mask_from) if n]

    @property
    def run_id(self) -> str:
        """Unique within an experiment directory: the run's name (already validated)."""
        return self.name

    def training_dict(self) -> dict[str, Any]:
        """The resolved training configuration: everything but `WHO_ASKED`, `OPERATIONAL` and the nested
        configurations the method does not read (`MethodInfo.reads`: an ADMM schedule handed to a DDP run by
        an experiment's profile changes nothing in its training, so it cannot make a second run of it), and the
        fields of `KEY_OMITS_AT_DEFAULT` at their defaults."""
        unread = set(METHOD_SECTIONS) - set(method_info(self.method).reads)
        out = {k: v for k, v in self.to_dict().items() if k not in (*WHO_ASKED, *OPERATIONAL, *unread)}
        for (section, key), default in KEY_OMITS_AT_DEFAULT.items():
            if section in out and out[section].get(key) == default:
                del out[section][key]
        return out

    def training_key(self) -> str:
        """12 hex digits of the SHA-256 of `training_dict()` (canonical JSON): equal for equal trainings."""
        canonical = json.dumps(self.training_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:12]

    @property
    def shared_id(self) -> str:
        """The name of the run's directory under RESULTS/runs: readable prefix, then the training key."""
        return f"{self.default_name()}-{self.training_key()}"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunConfig:
        """A RunConfig from `to_dict`'s form (config.json); a field of the wrong type or an unknown
        one is a ConfigError naming it."""
        if not isinstance(d, dict):
            raise ConfigError(f"a run configuration is a JSON object, got {type(d).__name__}")
        d = dict(d)
        pf = d.get("prune_finetune")
        if isinstance(pf, dict) and "init_from" in pf:  # written before init_from applied to every method
            pf = dict(pf)
            d.setdefault("init_from", pf.pop("init_from"))
            d["prune_finetune"] = pf
        kwargs = _typed(cls, d, "")
        for key, nested_cls in _NESTED.items():
            if key in kwargs:
                if not isinstance(kwargs[key], dict):
                    raise ConfigError(f"field {key!r} must be an object, got {kwargs[key]!r}")
                kwargs[key] = nested_cls(**_typed(nested_cls, kwargs[key], f"{key}."))
        if "method" not in kwargs:
            raise ConfigError("field 'method' is missing")
        return cls(**kwargs)

    def diff(self, other: RunConfig, ignore: tuple[str, ...] = ("executor", "results")) -> list[str]:
        """Dotted names of the fields that differ (used to refuse a foreign checkpoint)."""
        a, b = _flatten(self.to_dict()), _flatten(other.to_dict())
        return sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k) and k.split(".")[0] not in ignore)


_NESTED = {
    "admm": ADMMConfig,
    "topk": TopKConfig,
    "pactrain": PacTrainConfig,
    "ddp": DDPConfig,
    "prune_finetune": PruneFinetuneConfig,
    "link": LinkConfig,
}


_TYPES: dict[str, tuple[type, ...]] = {"int": (int,), "float": (int, float), "str": (str,), "bool": (bool,)}


def _typed(cls: type, d: dict[str, Any], prefix: str) -> dict[str, Any]:
    """`d`'s values checked against `cls`'s field annotations ("int", "float | None", ...)."""
    known = {f.name: str(f.type) for f in fields(cls)}
    for key, value in d.items():
        if key not in known:
            raise ConfigError(f"unknown field {prefix}{key!r}")
        kinds = [k.strip() for k in known[key].split("|")]
        if value is None and "None" in kinds:
            continue
        allowed = tuple(t for k in kinds for t in _TYPES.get(k, ()))
        wrong_bool = isinstance(value, bool) and "bool" not in kinds
        if allowed and (not isinstance(value, allowed) or wrong_bool):
            raise ConfigError(f"field {prefix}{key} must be {' or '.join(kinds)}, got {value!r}")
    return dict(d)


def _flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out
