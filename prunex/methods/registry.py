"""Every training method described once: its name, label, colour, what one of its iterations is, how
the performance model prices it, and where its implementation lives.

Plain data, torch-free, read by config validation (`prunex.training.config`), the trainer (:func:`method_class`
imports the implementation on first use), the performance model (`prunex.perfmodel.workload` looks
up the workload builder named here) and the analysis (`analysis.style`: labels, colours, order).
Adding a method is one entry here plus its module; a method of your own can also stay outside prunex: a module
named in `PRUNEX_METHODS` calls :func:`register` when it is imported (docs/methods-of-your-own.md).
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class MethodInfo:
    """One method.

    Attributes:
        name: the ``--method`` value and the directory/log name.
        label: how figures and reports name it.
        color: its one colour in every figure (the paper's Fig. 5 colours where it has one).
        implementation: ``"module:Class"`` of its `prunex.methods.base.Method`, imported on use.
        outer_iterations: one logged iteration is an outer ADMM iteration of E local epochs followed by a
            consensus (else one optimizer step); such methods log residuals and masks.
        workload: what the performance model prices per iteration, a key of
            `prunex.perfmodel.workload.WORKLOADS`.
        summary: one line on what it communicates.
        reads: the nested configurations of `prunex.training.config.RunConfig` (of `METHOD_SECTIONS`) the method
            reads; the others are not part of its run's identity, and their options are refused with it.
    """

    name: str
    label: str
    color: str
    implementation: str
    outer_iterations: bool
    workload: str
    summary: str
    reads: tuple[str, ...] = ()


_METHODS = (
    MethodInfo(
        "hsadmm",
        "PruneX (H-SADMM)",
        "#2ca02c",  # green, as in the paper's Fig. 5
        "prunex.methods.hsadmm:HSADMMMethod",
        True,
        "hsadmm",
        "intra-node AllReduce of theta + u; leaders' AllReduce of the compressed z_i + v_i; Broadcast to the node",
        ("admm",),
    ),
    MethodInfo(
        "ddp",
        "DDP (dense)",
        "#1f77b4",  # blue
        "prunex.methods.ddp:DDP",
        False,
        "ddp",
        "flat AllReduce of the gradients in DDP's buckets, overlapped with the backward pass",
        ("ddp",),
    ),
    MethodInfo(
        "topk",
        "Top-K SGD",
        "#e377c2",  # pink
        "prunex.methods.topk:TopK",
        False,
        "topk",
        "flat AllGather of the top-k gradient values and indices per tensor, with error feedback",
        ("topk",),
    ),
    MethodInfo(
        "flat_admm",
        "PruneX (AR, flat ADMM)",
        "#d4a017",  # gold ("yellow" flat PruneX AllReduce baseline of Fig. 7)
        "prunex.methods.flat_admm:FlatADMMMethod",
        True,
        "flat_admm",
        "dense flat AllReduce of theta + u; the global z projected after synchronisation",
        ("admm",),
    ),
    MethodInfo(
        "pactrain",
        "PacTrain",
        "#8c564b",  # brown
        "prunex.methods.pactrain:PacTrain",
        False,
        "pactrain",
        "flat AllReduce of the gradients' kept entries, packed densely without indices",
        ("pactrain",),
    ),
    MethodInfo(
        "prune_finetune",
        "Prune-then-finetune (L1)",
        "#d62728",  # red
        "prunex.methods.prune_finetune:PruneFinetune",
        False,
        "ddp",
        "a dense DDP-trained model pruned once by L1 norms, fine-tuned with DDP (dense AllReduce, mask re-applied)",
        ("ddp", "prune_finetune"),
    ),
)
# The method-specific nested configurations: each is read by the methods whose `reads` name it.
METHOD_SECTIONS: tuple[str, ...] = ("admm", "topk", "pactrain", "ddp", "prune_finetune")

# Methods of your own: `PRUNEX_METHODS=pkg.mod[,pkg.other]` names modules, importable in every process of a run
# (the launcher, every rank, the analysis: the variable travels with the environment, as Slurm's sbatch exports
# it by default), that each call `register` once when imported, here, before the tables below are made. Such a
# module should not import torch (the launchers and the analysis read the registry without it): its entry names
# the implementation, which `method_class` imports on first use. It imports `MethodInfo` and `register` from
# here, nothing else: the rest of this module is made after it.
PLUGINS_ENV = "PRUNEX_METHODS"
OWN_METHODS_HINT = f"a method of your own is registered through {PLUGINS_ENV}, see docs/methods-of-your-own.md"
_REGISTERED: list[MethodInfo] = []


def register(info: MethodInfo) -> None:
    """Add a method of your own, from a module named in `PRUNEX_METHODS` while it is imported."""
    if not isinstance(info, MethodInfo):
        raise TypeError(f"register takes a MethodInfo, got {type(info).__name__}")
    if "REGISTRY" in globals():
        raise RuntimeError(
            f"register({info.name!r}) after the registry was made: name its module in {PLUGINS_ENV} instead of "
            "importing it yourself"
        )
    if info.name in {m.name for m in (*_METHODS, *_REGISTERED)}:
        raise ValueError(f"method {info.name!r} is registered twice")
    if info.implementation.count(":") != 1:
        raise ValueError(f"method {info.name!r}: implementation must be 'module:Class', got {info.implementation!r}")
    if info.outer_iterations and "admm" not in info.reads:  # its iterations are counted from the admm section
        raise ValueError(f"method {info.name!r}: outer iterations are ADMM's; it must read the 'admm' section")
    if unknown := sorted(set(info.reads) - set(METHOD_SECTIONS)):
        raise ValueError(f"method {info.name!r} reads {unknown}; RunConfig's sections: {', '.join(METHOD_SECTIONS)}")
    _REGISTERED.append(info)


# A module that fails to import is not raised here, at import time, as a traceback: every RunConfig and
# `method_info` refuses with this one line instead, so that the commands print it as their other refusals. So is
# a module that imports and registers nothing (a name that happens to be importable, `os`, or a module whose
# `register` call was left out): otherwise it is silently no method at all, and the run asked for refuses later
# as an unknown method, or the experiments' `--with-method` finds nothing, with no word on the variable's module.
# A name given twice is imported once.
PLUGIN_ERROR = ""
for _module in dict.fromkeys(filter(None, (m.strip() for m in os.environ.get(PLUGINS_ENV, "").split(",")))):
    _before = len(_REGISTERED)
    try:
        importlib.import_module(_module)
    except Exception as e:  # ImportError, or what the module itself raised (a bad `register` call)
        PLUGIN_ERROR = f"{PLUGINS_ENV} names {_module!r}, which failed to import: {type(e).__name__}: {e}"
        break
    if len(_REGISTERED) == _before:
        PLUGIN_ERROR = (
            f"{PLUGINS_ENV} names {_module!r}, which imported but registered no method: a module named there calls "
            "prunex.methods.registry.register(MethodInfo(...)) when imported (docs/methods-of-your-own.md)"
        )
        break

PAPER_METHODS: tuple[str, ...] = tuple(m.name for m in _METHODS)  # H-SADMM and its baselines: not registered ones
REGISTRY: dict[str, MethodInfo] = {m.name: m for m in (*_METHODS, *_REGISTERED)}
METHOD_NAMES: tuple[str, ...] = tuple(REGISTRY)  # in the order figures list them (yours after the paper's)


def readers(section: str) -> tuple[str, ...]:
    """The methods that read the nested configuration `section` (every method for one not in METHOD_SECTIONS)."""
    if section not in METHOD_SECTIONS:
        return METHOD_NAMES
    return tuple(m.name for m in REGISTRY.values() if section in m.reads)


def method_info(name: str) -> MethodInfo:
    """The entry of ``name``; ValueError naming the known methods otherwise."""
    if PLUGIN_ERROR:
        raise ValueError(PLUGIN_ERROR)
    try:
        return REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown method {name!r}; known: {', '.join(METHOD_NAMES)} ({OWN_METHODS_HINT})") from None


def method_class(name: str) -> Any:
    """The `prunex.methods.base.Method` subclass of ``name`` (imports torch and the implementation)."""
    module, cls = method_info(name).implementation.split(":")
    return getattr(importlib.import_module(module), cls)
