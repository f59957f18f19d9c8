"""Profiles shared by every experiment: what `paper`, `local` and `smoke` mean.

- `paper`: the paper's setup (sec. 5.1): Puhti, nodes of 4 V100, 16 nodes unless the experiment
  scales, CIFAR-10, ResNet-152 unless the experiment names others, hyperparameters of sec. 5.1.5
  (batch 128 per GPU, SGD lr 1e-3, momentum 0.9, weight decay 1e-4; H-SADMM rho_1 = 1.5e-3,
  rho_2 = 1.5e-4, caps 10, channel keep 0.5, 5 local epochs). The paper does not give an epoch
  budget; we give every method the same number of passes over the data: 80 epochs for the SGD
  methods, 16 outer iterations x 5 local epochs for the ADMM methods (Fig. 5 spans 14 minutes).
- `local`: what one machine without a GPU can show honestly: 2 emulated nodes x 2 processes,
  ResNet-20 on the offline digits dataset (or CIFAR-10 when `PRUNEX_LOCAL_DATASET=cifar10`), on the
  mini Slurm cluster (`--executor slurm`, links shaped by tc: `netns-tc`) where root allows, else
  the local executor with the `alpha-beta` link model at 1 Gbit/s. ADMM: 6 outer iterations of 1
  local epoch, larger initial penalties (rho_1 = 0.05, rho_2 = 0.005: with 6 iterations the
  paper's 1.5e-3 has no time to grow), mask frozen after 4 iterations, 2 retraining iterations.
- `smoke`: seconds per run for tests: one process in the foreground (debug executor), 128
  training images, 1 epoch / 2 outer iterations.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any

from prunex.config import ADMMConfig, LinkConfig, RunConfig

PROFILE_NAMES = ("smoke", "local", "paper")


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
    link: LinkConfig = field(default_factory=LinkConfig)
    train_subset: int = 0
    extra: dict[str, Any] = field(default_factory=dict)  # other RunConfig fields

    @property
    def scale_nodes(self) -> tuple[int, ...]:
        """Node counts of the strong-scaling series (Fig. 9: 2 to 16 nodes of 4 GPUs)."""
        return {"paper": (2, 4, 8, 16), "local": (1, 2), "smoke": (1,)}[self.name]


def profile(name: str, executor: str | None = None) -> Profile:
    """The named profile, for the given executor (the link model follows the executor)."""
    if name == "paper":
        p = Profile(
            name="paper",
            executor="slurm",
            dataset="cifar10",
            model="resnet152",
            nodes=16,
            procs_per_node=4,
            epochs=80,
            admm=ADMMConfig(iterations=16, local_epochs=5),
        )
    elif name == "local":
        p = Profile(
            name="local",
            executor="local",
            dataset=os.environ.get("PRUNEX_LOCAL_DATASET", "digits"),
            model="resnet20",
            nodes=2,
            procs_per_node=2,
            epochs=6,
            admm=ADMMConfig(
                iterations=6, local_epochs=1, rho_intra=0.05, rho_inter=0.005, freeze_iteration=4, retrain_epochs=2
            ),
            link=LinkConfig(model="alpha-beta", alpha_s=5e-5, bandwidth_gbit=1.0),
        )
    elif name == "smoke":
        p = Profile(
            name="smoke",
            executor="debug",
            dataset="digits",
            model="resnet20",
            nodes=1,
            procs_per_node=1,
            epochs=1,
            admm=ADMMConfig(iterations=2, local_epochs=1, freeze_iteration=1),
            train_subset=128,
            extra={"bn_batches": 2, "bench_budget_s": 0.05},
        )
    else:
        raise ValueError(f"unknown profile {name!r}; known: {', '.join(PROFILE_NAMES)}")
    if executor is not None and executor != p.executor:
        # On Slurm the links are what they are (netns-tc on the mini cluster, detected at run time);
        # the alpha-beta model stands in only where nothing shapes them.
        link = LinkConfig() if executor == "slurm" else p.link
        p = dataclasses.replace(p, executor=executor, link=link)
    return p


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
        "train_subset": p.train_subset,
        "experiment": experiment,
        "profile": p.name,
        "name": name,
        **p.extra,
    }
    kwargs.update(overrides)
    if p.executor == "debug":  # one foreground process
        kwargs["nodes"] = kwargs["procs_per_node"] = 1
    return RunConfig(**kwargs)


def admm(p: Profile, **changes: Any) -> ADMMConfig:
    return dataclasses.replace(p.admm, **changes)
