"""prune_finetune --mask-from: another run's final mask, read from its `final_masks.parquet`, applied to the start."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import torch

from prunex.methods.prune_finetune import masks_from
from prunex.pruning.oneshot import flops_fraction
from prunex.training.config import ConfigError, PruneFinetuneConfig, RunConfig
from prunex.training.models import build_model


def _ctx(tmp_path: Path) -> SimpleNamespace:
    torch.manual_seed(0)
    config = RunConfig(method="prune_finetune", init_from="start", results=str(tmp_path), experiment="x")
    return SimpleNamespace(config=config, model=build_model("resnet20"))


def test_a_runs_final_mask_becomes_element_masks_of_filters_times_input_channels(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    w = dict(ctx.model.named_parameters())["layer1.0.conv2.weight"]  # 16 x 16 x 3 x 3
    in_keep = "10" * (w.shape[1] // 2)
    run = tmp_path / "x" / "hs"
    run.mkdir(parents=True)
    rows = [{"layer": "layer1.0.conv2.weight", "out_keep": "1" * w.shape[0], "in_keep": in_keep, "density": 0.5}]
    pd.DataFrame(rows).to_parquet(run / "final_masks.parquet")
    (mask,) = masks_from(ctx, "hs").values()
    assert mask.shape == w.shape and mask.dtype == torch.bool
    assert mask[:, 0::2].all() and not mask[:, 1::2].any()
    assert 0 < flops_fraction(ctx.model, {"layer1.0.conv2.weight": mask}) < 1


def test_a_mask_that_does_not_fit_or_is_missing_is_one_line(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    with pytest.raises(RuntimeError, match="no final mask in .*final_masks.parquet"):
        masks_from(ctx, "nowhere")
    run = tmp_path / "x" / "hs"
    run.mkdir(parents=True)
    pd.DataFrame([{"layer": "layer1.0.conv2.weight", "out_keep": "1", "in_keep": "1", "density": 1.0}]).to_parquet(
        run / "final_masks.parquet"
    )
    with pytest.raises(RuntimeError, match="layer layer1.0.conv2.weight does not fit this model"):
        masks_from(ctx, "hs")
    (run / "config.json").write_text(json.dumps({"method": "hsadmm", "admm": {"shape_keep": 0.5}}))
    with pytest.raises(RuntimeError, match="hs pruned kernel shapes .shape_keep 0.5., which final_masks.parquet"):
        masks_from(ctx, "hs")


def test_a_mask_and_a_flops_target_are_refused_together() -> None:
    with pytest.raises(ConfigError, match="give mask_from or a FLOPs target"):
        PruneFinetuneConfig(mask_from="hs", flops_from="hs")
    a = RunConfig(method="prune_finetune", init_from="s", prune_finetune=PruneFinetuneConfig(mask_from="hs"))
    assert a.training_key() != RunConfig(method="prune_finetune", init_from="s").training_key()


def test_a_run_that_reads_another_runs_mask_waits_for_it() -> None:
    from experiments import cli

    hs = RunConfig(method="hsadmm", name="hs", init_from="s")
    ptf = RunConfig(
        method="prune_finetune", name="p", init_from="s", prune_finetune=PruneFinetuneConfig(mask_from="hs")
    )
    assert ptf.depends_on == ["s", "hs"]
    assert [[c.name for c in w] for w in cli.waves([ptf, hs])] == [["hs"], ["p"]]
    assert RunConfig(method="ddp", name="d", init_from="s").depends_on == ["s"]
