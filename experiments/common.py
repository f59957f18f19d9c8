"""Profiles shared by every experiment: what `paper`, `local` and `smoke` mean.

- `paper`: the paper's setup (sec. 5.1): Puhti, nodes of 4 V100, 16 nodes unless the experiment
  scales, CIFAR-10, ResNet-152 unless the experiment names others, hyperparameters of sec. 5.1.5
  (batch 128 per GPU, SGD lr 1e-3, momentum 0.9, weight decay 1e-4; H-SADMM rho_1 = 1.5e-3,
  rho_2 = 1.5e-4, caps 10, channel keep 0.5). Training lengths follow the paper, each number
  below next to the sentence it comes from: the ADMM methods run up to 60 outer iterations of 5
  local epochs, stop early on convergence and freeze the mask by drift or at T_freeze = 15; the SGD
  methods run 240 epochs, enough to cover Fig. 5's 14-minute window. The paper gives no epoch count,
  so whether these lengths reach its 70% target and Fig. 12's accuracies at lr 1e-3 is only known
  once the profile has run; the report says which claims were reached.
- `local`: what one machine without a GPU can show honestly: 2 emulated nodes x 2 processes,
  ResNet-20 on the offline digits dataset, and on Fashion-MNIST (2,000 training images) for the accuracy
  experiments (time to accuracy, Pareto; `Profile.accuracy_data`); `PRUNEX_LOCAL_DATASET=cifar10` (or any
  dataset) puts every experiment on that one. On the
  mini Slurm cluster (`--executor slurm`, links shaped by tc: `netns-tc`) where root allows, else
  the local executor with the `alpha-beta` link model at 1 Gbit/s. ADMM: 6 outer iterations of 1
  local epoch, larger initial penalties (rho_1 = 0.05, rho_2 = 0.005, fixed before the "grow" schedule,
  which now takes any initial penalty to rho_max by T_freeze; kept so that the logs stay comparable), mask
  frozen after 4 iterations, 2 retraining iterations.
- `regime` (the default of `./run_all.sh` on one machine): the `local` runs in the paper's regime,
  where communication dominates. DDP's communication share of an iteration in the paper's set-up
  (0.50 s of communication per iteration, sec. 5.3.2, over that plus ResNet-152's 0.33 s of V100
  compute at batch 128: 0.60) is carried over to this machine: `prunex.cluster.regime` probes the compute
  of one iteration of this profile's job and chooses the inter-node link rate at which DDP's
  AllReduce takes that share (a few tens of Mbit/s on the 2-core VM). The choice is written to
  `RESULTS/regime.json` before any run and kept for the life of the results directory. Processes
  are bound to cores (`bind_cores`; 4 processes on 2 cores: 2 per core, as the captions say), and
  runs go one at a time on Slurm too (`serial`: the mini cluster's nodes share the machine, and Slurm
  would otherwise start jobs side by side on its free CPUs): a wave is a job array with one task
  running at a time (`--array=0-N%1`), so Slurm starts each run as the one before it ends.
  Strong scaling runs 1 process per node (1 -> 2 nodes, one core each); the latency experiment is
  repeated with seeds 0, 1, 2 (fixed in advance: the run-to-run spread of a 2-core machine is larger
  than the margins of its claims, docs/results.md). The experiments whose results do not depend on the
  link (`LINK_FREE`: the Pareto's accuracy against FLOPs) run at the `local` profile's link instead
  (`link_free`): the regime's slow link would only cost their time (6.6 of the Pareto's 14.1 min of training).
- `smoke`: seconds per run for tests: one process in the foreground (debug executor), 128
  training images, 1 epoch / 2 outer iterations, the inference bench at batch 8 (not 128).

`paper` runs on GPUs (`--device cuda`, required: no silent CPU); `local` and `smoke` run on the
CPU (`--device cpu`) wherever they run; `--device` on the command line overrides a profile's.
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, field
from typing import Any

from prunex.training.config import ADMMConfig, LinkConfig, RunConfig

# -- the paper profile's training lengths ---------------------------------------------------------
# Sec. 5.1.5: "For H-SADMM, we perform up to 60 outer iterations depending on convergence, with 5-10
# inner (local) training epochs per iteration": K_max = 60, E = 5 (the lower end of the range), and
# the run stops once the residuals converge (`ADMMConfig.stop_on_convergence`).
PAPER_ADMM_ITERATIONS = 60
PAPER_LOCAL_EPOCHS = 5
# Sec. 4.5: "empirically, mask drift converges to zero within the first 5-15 iterations", and the
# system freezes the masks "once topological stability is detected or when a predefined epoch
# T_freeze is reached". The paper gives no T_freeze: we take the end of that range, 15, and freeze
# earlier once the global mask has not drifted for 3 iterations (`freeze_patience`, ours).
PAPER_FREEZE_ITERATION = 15
PAPER_FREEZE_PATIENCE = 3
# Sec. 5.2.1 (Fig. 5a): DDP "reaching only ~65% accuracy within the 14-minute window". Sec. 5.3.2:
# "The dense baseline exhibits a constant latency of approximately 0.50s per iteration". Sec. 5.1.5:
# "a batch size of 128 per GPU"; sec. 5.1.2: "16 nodes x 4 GPUs/node"; CIFAR-10 has 50,000 training
# images. An epoch is ceil(floor(50000 / 64) / 128) = 7 steps of at least 0.50 s, at least 3.5 s
# however much compute DDP's overlap hides, so 240 epochs last at least the 14 minutes. Top-K and
# PacTrain get the same passes over the data (the paper's Top-K steps are slower than DDP's, sec. 5.4).
# If Puhti's DDP steps are faster than the paper says (the performance model's compute-bound Puhti
# estimate has 2.0 s per epoch: 8 minutes for 240), the curves of Fig. 5 end before its window.
PAPER_WINDOW_S = 14 * 60
PAPER_DDP_STEP_S = 0.50
PAPER_BATCH, PAPER_GPUS, CIFAR10_TRAIN_IMAGES = 128, 16 * 4, 50_000
PAPER_STEPS_PER_EPOCH = math.ceil((CIFAR10_TRAIN_IMAGES // PAPER_GPUS) / PAPER_BATCH)
PAPER_SGD_EPOCHS = math.ceil(PAPER_WINDOW_S / (PAPER_STEPS_PER_EPOCH * PAPER_DDP_STEP_S))
# DataLoader workers per GPU process (issue 27: the default 0 decodes and augments CIFAR-10 in the training
# process, between steps). Puhti's site preset gives each GPU task 10 CPU cores (prunex/cluster/sites.py): 4
# workers, persistent across epochs, leave the rest to the training process and NCCL's threads.
PAPER_LOADER_WORKERS = 4


@dataclass(frozen=True, kw_only=True)
class Profile:
    name: str
    executor: str
    dataset: str
    model: str
    nodes: int
    procs_per_node: int
    epochs: int  # SGD methods
    admm: ADMMConfig
    device: str = "cpu"  # RunConfig.device
    link: LinkConfig = field(default_factory=LinkConfig)
    train_subset: int = 0
    extra: dict[str, Any] = field(default_factory=dict)  # other RunConfig fields
    scale_procs_per_node: int | None = None  # processes per node of the strong-scaling series (None: procs_per_node)
    scale_nodes: tuple[int, ...] = (1,)  # node counts of the strong-scaling series (Fig. 9: 2 to 16 nodes of 4 GPUs)
    repeat_seeds: tuple[int, ...] = (0,)  # seeds of the experiments that repeat a measurement (latency)
    # one run at a time on every executor (Slurm runs jobs side by side otherwise; there, arrays of %1)
    serial: bool = False
    # The accuracy experiments' data (time to accuracy, Pareto), where it differs from `dataset`: a set on
    # which pruning costs accuracy (issue 26), with its training subset (0: all of it).
    accuracy_dataset: str | None = None
    accuracy_train_subset: int = 0

    def accuracy_data(self) -> dict[str, Any]:
        """The RunConfig fields of the accuracy experiments' runs: `accuracy_dataset` if set, else `dataset`."""
        if self.accuracy_dataset is None:
            return {}
        return {"dataset": self.accuracy_dataset, "train_subset": self.accuracy_train_subset}


# -- the profiles, as data (what each one is: the module docstring) -----------------------------------
_LOCAL = Profile(
    name="local",
    executor="local",
    dataset="digits",
    model="resnet20",
    nodes=2,
    procs_per_node=2,
    epochs=6,
    admm=ADMMConfig(
        iterations=6, local_epochs=1, rho_intra=0.05, rho_inter=0.005, freeze_iteration=4, retrain_epochs=2
    ),
    link=LinkConfig(model="alpha-beta", alpha_s=5e-5, bandwidth_gbit=1.0),
    scale_nodes=(1, 2),
    # Fashion-MNIST (issue 26): on digits one-shot pruning to a quarter of the channels cost nothing and the
    # 359-image test split moved in steps of 0.28 points; 2,000 training images (500 per rank); the whole
    # 10,000-image test split. A dataset named by PRUNEX_LOCAL_DATASET is used for every experiment instead.
    accuracy_dataset="fashion-mnist",
    accuracy_train_subset=2000,
)
PROFILES: dict[str, Profile] = {
    "smoke": Profile(
        name="smoke",
        executor="debug",
        dataset="digits",
        model="resnet20",
        nodes=1,
        procs_per_node=1,
        epochs=1,
        admm=ADMMConfig(iterations=2, local_epochs=1, freeze_iteration=1),
        train_subset=128,
        extra={"bn_batches": 2, "bench_budget_s": 0.05, "bench_batch": 8},
    ),
    "local": _LOCAL,
    # `local` at the link rate of RESULTS/regime.json (set by `profile`), bound to cores, one run at a time
    "regime": dataclasses.replace(
        _LOCAL,
        name="regime",
        extra={**_LOCAL.extra, "bind_cores": True},
        scale_procs_per_node=1,
        repeat_seeds=(0, 1, 2),
        serial=True,  # its timings are its results: no two runs share the machine's cores
    ),
    "paper": Profile(
        name="paper",
        executor="slurm",
        dataset="cifar10",
        model="resnet152",
        nodes=16,
        procs_per_node=4,
        epochs=PAPER_SGD_EPOCHS,
        admm=ADMMConfig(
            iterations=PAPER_ADMM_ITERATIONS,
            local_epochs=PAPER_LOCAL_EPOCHS,
            stop_on_convergence=True,
            freeze_iteration=PAPER_FREEZE_ITERATION,
            freeze_patience=PAPER_FREEZE_PATIENCE,
            retrain_epochs=0,  # sec. 4.5: retraining is the outer loop's frozen-mask iterations
        ),
        device="cuda",
        scale_nodes=(2, 4, 8, 16),
        extra={"num_workers": PAPER_LOADER_WORKERS},
    ),
}
PROFILE_NAMES = tuple(PROFILES)
ONE_MACHINE = ("local", "regime")  # the profiles PRUNEX_LOCAL_DATASET applies to


def profile(name: str, executor: str | None = None, regime: dict[str, Any] | None = None) -> Profile:
    """The named profile (`PROFILES`), for the given executor (the link model follows the executor). `regime`:
    the `regime` profile's `regime.json` (`prunex.cluster.regime`), which sets its link rate; without it the
    profile can be listed (dry run) but its alpha-beta rate is a placeholder."""
    if name not in PROFILES:
        raise ValueError(f"unknown profile {name!r}; known: {', '.join(PROFILE_NAMES)}")
    p = PROFILES[name]
    dataset = os.environ.get("PRUNEX_LOCAL_DATASET")
    if dataset and name in ONE_MACHINE:
        p = dataclasses.replace(p, dataset=dataset, accuracy_dataset=None, accuracy_train_subset=0)
    if name == "regime":
        mbit = float(regime["bandwidth_mbit"]) if regime else 1000.0
        p = dataclasses.replace(p, link=dataclasses.replace(p.link, bandwidth_gbit=mbit / 1e3))
    if executor is not None and executor != p.executor:
        # On Slurm the links are what they are (netns-tc on the mini cluster, detected at run time);
        # the alpha-beta model stands in only where nothing shapes them.
        link = LinkConfig() if executor == "slurm" else p.link
        p = dataclasses.replace(p, executor=executor, link=link)
    return p


# Experiments whose results do not depend on the inter-node link: the Pareto's accuracies and FLOPs (a run's
# numbers are the same at any link rate: the collectives sum the same values in the same order; the local and
# regime profiles' logs of 2026-11-27 trained each of their 35 common runs identically, every train_loss equal,
# and the Pareto's 21 runs ended at the same final accuracy at 27.7 and at 1000 Mbit/s in the 2026-11-26 logs). The
# regime profile runs them at the local profile's link (`link_free`); each run's meta.json says the rate it had.
LINK_FREE = ("pareto",)
# the local profile's inter-node rate as a tc rate: what ./run_all.sh shapes a mini cluster to for `local`, and
# for the regime profile's LINK_FREE experiments (experiments/run_all.py LOCAL_INTER_BW)
LOCAL_TC_RATE = f"{_LOCAL.link.bandwidth_gbit:g}gbit"


def link_free(p: Profile) -> Profile:
    """`p` for an experiment of `LINK_FREE`: the `regime` profile at the `local` profile's link, any other
    profile as it is. With the alpha-beta model (the local executor) that is the modelled rate; on Slurm the
    links are what the cluster's are: ./run_all.sh reshapes its mini cluster to `LOCAL_TC_RATE` before these
    experiments (`python -m prunex.minicluster shape`)."""
    if p.name != "regime" or p.link.model != "alpha-beta":
        return p
    return dataclasses.replace(p, link=_LOCAL.link)


# RunConfig.eval_every of a run whose only evaluated model is its final one (beyond every run's length).
FINAL_ONLY = 1000
# The experiments that read a run's accuracy at every evaluation (its curve); the others read only the final model's.
CURVE_EXPERIMENTS = ("time_to_accuracy",)


def eval_every(p: Profile, experiment: str) -> int:
    """How often `experiment`'s runs of `p` evaluate. Every epoch or outer iteration, except the runs of an
    experiment outside `CURVE_EXPERIMENTS` in a profile whose accuracy experiments have data of their own
    (`accuracy_dataset`: the one-machine profiles): those runs are never shared with an accuracy experiment's,
    nothing reads their accuracy before the end, so only the final model is evaluated (`FINAL_ONLY`). Training
    is the same either way (evaluation gives back every random number it draws, `rng_untouched`), and so is the
    final accuracy; in the regime logs of 4a83fde the 20 digits runs spent 3.3 min evaluating, 0.45 min of it
    on their final models. Elsewhere (the paper profile, or one dataset for every experiment) runs are shared
    across experiments and the paper profile checkpoints at evaluation points: every epoch."""
    if p.accuracy_dataset is not None and experiment not in CURVE_EXPERIMENTS:
        return FINAL_ONLY
    return 1


def run(p: Profile, experiment: str, method: str, name: str, **overrides: Any) -> RunConfig:
    """A RunConfig of `p` for one run of `experiment`; `overrides` are RunConfig fields."""
    kwargs: dict[str, Any] = {
        "method": method,
        "model": p.model,
        "dataset": p.dataset,
        "nodes": p.nodes,
        "procs_per_node": p.procs_per_node,
        "epochs": p.epochs,
        "admm": p.admm,
        "link": p.link,
        "executor": p.executor,
        "device": p.device,
        "train_subset": p.train_subset,
        "experiment": experiment,
        "profile": p.name,
        "name": name,
        "eval_every": eval_every(p, experiment),
        **p.extra,
    }
    kwargs.update(overrides)
    return RunConfig(**kwargs)


def admm(p: Profile, **changes: Any) -> ADMMConfig:
    return dataclasses.replace(p.admm, **changes)
