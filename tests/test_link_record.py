"""The link model a run's logs record: what shaped its links (meta.json), with config.json as asked."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from prunex.minicluster.wire import LINK_MODEL, link_model_active, observed_link_model
from prunex.training.config import RunConfig
from prunex.training.log import RunLog, merge_parts, write_json


def test_rows_name_the_observed_link_model_and_the_config_stays_as_asked(tmp_path: Path) -> None:
    config = RunConfig(method="ddp", results=str(tmp_path), name="r").to_dict()
    write_json(tmp_path / "config.json", config)
    write_json(tmp_path / "meta.json", {"link_model": LINK_MODEL})  # as train writes it in a mini cluster node
    log = RunLog(tmp_path, 0)
    row = {"iteration": 0, "rank": 0, "epoch": 1.0, "wall_s": 1.0, "train_loss": 2.0, "test_acc": 0.5}
    log.append("rank_steps", [{**row, "comm_s": 0.1, "compute_s": 0.9, "iter_s": 1.0}])
    comm = {"iteration": 0, "rank": 0, "node": 0, "level": "inter", "op": "allreduce", "bytes": 8, "seconds": 0.1}
    log.append("comm", [{**comm, "inter_bytes": 8.0, "intra_bytes": 0.0}])
    log.flush()
    tables = merge_parts(tmp_path)
    assert set(tables["steps"]["link_model"]) == {LINK_MODEL} == set(tables["comm"]["link_model"])
    assert set(pd.read_parquet(tmp_path / "steps.parquet")["link_model"]) == {LINK_MODEL}
    assert json.loads((tmp_path / "config.json").read_text())["link"]["model"] == "none"
    # without meta.json (a run killed before rank 0 wrote it): what the configuration asked
    (tmp_path / "meta.json").unlink()
    assert set(merge_parts(tmp_path)["steps"]["link_model"]) == {"none"}


def test_outside_a_mini_cluster_node_the_asked_model_is_observed() -> None:
    assert not link_model_active()  # the test machine's own namespace
    assert [observed_link_model(m) for m in ("none", "alpha-beta")] == ["none", "alpha-beta"]
