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


def test_the_link_rate_is_read_from_tcs_token_bucket(monkeypatch) -> None:
    """meta.json's `link_mbit` on a mini cluster node: the rate of its veth's tbf, as tc prints it; None
    where there is no token bucket (the live reading in a node: tests/minicluster/test_minicluster.py)."""
    from prunex.minicluster import wire

    shown = {
        "qdisc tbf 1: root refcnt 3 rate 27733Kbit burst 64Kb lat 100ms": 27.733,
        "qdisc tbf 1: root refcnt 3 rate 1Gbit burst 125000b lat 100ms\nqdisc netem 10: parent 1:1": 1000.0,
        "qdisc noqueue 0: root refcnt 2": None,
    }
    monkeypatch.setattr(wire.shutil, "which", lambda name, path=None: f"/usr/sbin/{name}")  # tc or not on this machine
    for text, mbit in shown.items():
        monkeypatch.setattr(wire.subprocess, "run", lambda *a, text_=text, **k: type("R", (), {"stdout": text_})())
        assert wire.observed_link_mbit("veth0") == mbit
    assert wire.observed_link_mbit() is None  # not in a node: no veth to read
