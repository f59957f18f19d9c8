"""Command-line options generated from the configuration dataclasses' fields (`prunex.training.config`).

    python -m prunex.run --help

Every field of `RunConfig` and of its nested configurations is one option, so a field added to a
dataclass is an option without further code, and a value is validated in one place, the dataclass:

- `RunConfig`'s own fields: ``--field-name`` (``batch_size`` -> ``--batch-size``); ``device`` is
  `prunex.cluster.slurm.add_cluster_options`' (shared with the experiments' command line).
- a nested configuration's fields, in an option group of their own, named by `SECTIONS`: ADMM,
  PacTrain, DDP and prune-then-finetune fields as they are (``--channel-keep``, ``--density``,
  ``--grad-dtype``, ``--init-from``), Top-K's with a ``topk-`` prefix (``--topk-ratio``), the
  link model's under the network's names (``--link-model --inter-latency-s --inter-bw-gbit``).

An option's type is its field's annotation (a ``bool`` field is ``--x/--no-x``); every option
defaults to None, "the configuration's default", which its help states. `config_from_args` builds
the `RunConfig` from the options given.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from prunex.methods.registry import METHOD_NAMES, REGISTRY, readers
from prunex.training.config import INTER_EXCHANGES, RHO_SCHEDULES, WIRE_DTYPES, ConfigError, LinkConfig, RunConfig

T = TypeVar("T")


@dataclass(frozen=True)
class Section:
    """How a nested configuration's fields are named on the command line."""

    prefix: str = ""
    renames: dict[str, str] = field(default_factory=dict)  # field -> option name (without dashes)
    choices: dict[str, tuple[str, ...]] = field(default_factory=dict)  # field -> argparse choices

    def option(self, name: str) -> str:
        return self.renames.get(name, self.prefix + name)


SECTIONS: dict[str, Section] = {
    "admm": Section(
        choices={
            "wire_dtype": WIRE_DTYPES,
            "inter_exchange": INTER_EXCHANGES,
            "rho_schedule": RHO_SCHEDULES,
        }
    ),
    "topk": Section(prefix="topk_"),
    "pactrain": Section(),
    "ddp": Section(choices={"grad_dtype": WIRE_DTYPES}),
    "prune_finetune": Section(),
    "link": Section(renames={"model": "link_model", "alpha_s": "inter_latency_s", "bandwidth_gbit": "inter_bw_gbit"}),
}
SHARED = ("device",)  # RunConfig fields whose option another module defines (prunex.cluster.slurm)

# What a field's default does not say by itself (the option's help adds the field and its default).
HELP = {
    "experiment": "directory level above the run",
    "name": "run name (part of its run_id and directory)",
    "bn_batches": "BatchNorm re-estimation batches before evaluating (0: off)",
    "epochs": "the length of a method whose iteration is an SGD step; an ADMM method's is --iterations outer "
    "iterations of --local-epochs, then --retrain-epochs",
    "train_subset": "use only the first n training images",
    "checkpoint_every_min": "minutes between checkpoints, taken at the next evaluation point (0: at every one)",
    "export": "after training: export the compact model and bench inference (prunex.pruning.export, "
    "prunex.bench.inference); a run of several tasks does it in a one-task job of its own",
    "bench_batch": "--export: the inference bench's large batch (batch 1 is always measured)",
    "admm.layers": "fnmatch glob of the constrained parameter names",
    "admm.momentum_policy": "ADMM: SGD momentum across outer iterations, carry or reset",
    "admm.phase1_start": "ADMM: every phase 1 starts from the rank's own theta (Alg. 1 line 4) or from z (a variant)",
    "admm.retraining": "ADMM: phase 1 on the frozen mask as Alg. 1 (admm), or from z (admm_from_z, a variant), or "
    "from z pulled to z_i not z_i - u (admm_from_z_anchor_z, a variant), or from z without the pull "
    "(local_sgd, a variant)",
    "admm.rho_schedule": "ADMM: penalties grow to rho_max by T_freeze besides residual balancing (grow), or balance",
    "admm.average_bn_stats": "ADMM: average BatchNorm statistics at every consensus (unset: only with --bn-batches 0)",
    "link.model": "none, alpha-beta or netns-tc",
    "init_from": "finished run (same experiment) whose final model every rank starts from (prune_finetune prunes it)",
    "prune_finetune.flops_from": "prune_finetune: run whose exported FLOPs fraction is the target",
    "prune_finetune.mask_from": "prune_finetune: run whose final mask is applied instead of L1 filters",
}
_TYPES = {"int": int, "float": float, "str": str}


@dataclass(frozen=True)
class Option:
    """One generated option: the config field it sets (``section`` "" for RunConfig's own)."""

    section: str
    field: str
    dest: str  # argparse's attribute name; the option is --dest with dashes

    @property
    def flag(self) -> str:
        return "--" + self.dest.replace("_", "-")

    @property
    def dotted(self) -> str:
        return f"{self.section}.{self.field}" if self.section else self.field


def _nested() -> dict[str, type]:
    """RunConfig's nested configurations: section name -> dataclass."""
    return {
        f.name: f.default_factory  # type: ignore[misc]
        for f in dataclasses.fields(RunConfig)
        if f.default_factory is not dataclasses.MISSING and dataclasses.is_dataclass(f.default_factory)
    }


def options() -> list[Option]:
    """Every generated option, RunConfig's own fields first, then each section's."""
    nested = _nested()
    out = [Option("", f.name, f.name) for f in dataclasses.fields(RunConfig) if f.name not in nested]
    out = [o for o in out if o.field not in SHARED]
    for section, cls in nested.items():
        naming = SECTIONS.get(section, Section(prefix=section + "_"))
        out += [Option(section, f.name, naming.option(f.name)) for f in dataclasses.fields(cls)]
    dests = [o.dest for o in out]
    clashes = sorted({d for d in dests if dests.count(d) > 1})
    if clashes:  # a field added to a section under a name another section or RunConfig already uses
        raise RuntimeError(
            f"configuration fields share option names: {', '.join(clashes)}; see prunex.cluster.options.SECTIONS"
        )
    return out


def _field(o: Option) -> dataclasses.Field:
    cls = _nested()[o.section] if o.section else RunConfig
    return next(f for f in dataclasses.fields(cls) if f.name == o.field)


def _default(f: dataclasses.Field) -> Any:
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default


def add_config_options(p: argparse.ArgumentParser, only: Iterable[str] | None = None) -> None:
    """Add the generated options to `p` (`only`: dotted field names, e.g. ``("checkpoint_every_min",)``)."""
    wanted = None if only is None else set(only)
    groups: dict[str, Any] = {}
    nested = _nested()
    for o in options():
        if wanted is not None and o.dotted not in wanted:
            continue
        f = _field(o)
        kinds = [k.strip() for k in str(f.type).split("|") if k.strip() != "None"]
        default = _default(f)
        shown = "the dataset's" if default is None and o.field in ("epochs", "batch_size", "lr") else repr(default)
        note = HELP.get(o.dotted, "")
        kwargs: dict[str, Any] = {"dest": o.dest, "default": None, "help": f"{note}{'; ' if note else ''}"}
        kwargs["help"] += f"{o.dotted}, default {shown}"
        if o.field == "method" and not o.section:
            kwargs.update(required=True, help=note or "the training method (prunex.methods.registry)")
        if kinds == ["bool"]:
            kwargs["action"] = argparse.BooleanOptionalAction
        else:
            kwargs["type"] = _TYPES[kinds[0]]
            choices = SECTIONS[o.section].choices.get(o.field) if o.section in SECTIONS else None
            if choices:
                kwargs["choices"] = choices
        if o.section:
            if o.section not in groups:
                groups[o.section] = p.add_argument_group(f"{o.section} options ({nested[o.section].__name__})")
            groups[o.section].add_argument(o.flag, **kwargs)
        else:
            p.add_argument(o.flag, **kwargs)


def config_from_args(args: argparse.Namespace) -> RunConfig:
    """A validated RunConfig from parsed options: the options given, every other field at its default."""
    nested = _nested()
    top = {
        f.name: getattr(args, f.name)
        for f in dataclasses.fields(RunConfig)
        if f.name not in nested and getattr(args, f.name, None) is not None
    }
    sections: dict[str, dict[str, Any]] = {}
    for o in options():
        value = getattr(args, o.dest, None)
        if o.section and value is not None:
            sections.setdefault(o.section, {})[o.field] = value
    method = top.get("method")
    for section in sections:
        if method in METHOD_NAMES and method not in readers(section):  # an unknown method: RunConfig says so
            given = " ".join(o.flag for o in options() if o.section == section and getattr(args, o.dest) is not None)
            raise ConfigError(
                f"{given}: options of {', '.join(readers(section))}, which --method {method} does not read; "
                "leave them out"
            )
    # `--epochs` is a field of RunConfig's own, read by the methods whose iteration is an SGD step only: an ADMM
    # method's length is its schedule, and the option given to one would be ignored in silence (the run trains its
    # schedule, perhaps ten times longer than asked)
    if top.get("epochs") is not None and method in METHOD_NAMES and REGISTRY[method].outer_iterations:
        raise ConfigError(
            f"--epochs: the length of the methods whose iteration is an SGD step ({', '.join(epoch_methods())}), "
            f"which --method {method} does not read: its length is --iterations outer iterations of --local-epochs "
            "each, then --retrain-epochs; leave --epochs out"
        )
    bench = [f"--{k.replace('_', '-')}" for k in ("bench_budget_s", "bench_batch") if top.get(k) is not None]
    if bench and not top.get("export"):  # the inference bench runs after an export only: ignored in silence before
        raise ConfigError(
            f"{' '.join(bench)}: the inference bench's, which runs with --export only; add --export, or leave them out"
        )
    link = sections.get("link", {})
    check_link_options(
        link.get("model", LinkConfig.model),
        [o.flag for o in options() if o.section == "link" and o.field != "model" and o.field in link],
    )
    for section, values in sections.items():
        top[section] = nested[section](**values)
    return RunConfig(**top)


LINK_WITHOUT_ALPHA_BETA = {
    "none": "the links as they are",
    "netns-tc": "the mini cluster's tc-shaped links: python -m prunex.minicluster shape --inter-bw RATE",
}


def check_link_options(model: str, given: Sequence[str]) -> None:
    """`--inter-latency-s` and `--inter-bw-gbit` (`given`) are the alpha-beta link model's: with another `model` the
    run went on the links as they are, and its config.json kept the rate it never had (2026-12-08)."""
    if given and model != "alpha-beta":
        raise ConfigError(
            f"{' '.join(given)}: the alpha-beta link model's, which --link-model {model} does not read "
            f"({LINK_WITHOUT_ALPHA_BETA.get(model, model)}); add --link-model alpha-beta, or leave them out"
        )


def epoch_methods() -> tuple[str, ...]:
    """The methods that read `RunConfig.epochs`: those whose iteration is an SGD step (not an outer iteration)."""
    return tuple(m.name for m in REGISTRY.values() if not m.outer_iterations)


def comma_list(text: str, option: str, kind: Callable[[str], T] = str) -> list[T]:
    """A comma-separated option's values (`--seeds 0,1,2`, `--methods ddp,hsadmm`), blanks dropped; ValueError, one
    line naming the option, for a value `kind` refuses, for none at all (a command that measured nothing and said so
    with exit code 0, or failed on its empty table), or for one given twice (counted twice in a median, or a row
    twice in a table)."""
    noun = {int: "whole numbers", float: "numbers"}.get(kind, "names")
    try:
        values = [kind(v.strip()) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"{option} {text!r}: not a comma-separated list of {noun}") from None
    if not values:
        raise ValueError(f"{option} {text!r}: no value given; a comma-separated list of {noun}")
    if twice := [v for v in dict.fromkeys(values) if values.count(v) > 1]:
        shown = ", ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in twice)
        raise ValueError(f"{option} {text!r}: {shown} given more than once")
    return values
