"""Session-scoped 2-node minicluster (2 CPUs per node, 1 Gbit/s links) for the tests in this folder.

Skipped, with the reason, only when the machine cannot host one: not Linux, not root, or the Slurm /
munge / iproute2 binaries are missing (CI installs them with .ci/install-minicluster.sh).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import prunex
from prunex.minicluster import MiniCluster, missing_requirements
from prunex.minicluster.accounting import cluster_owner_alive, running_cluster_dirs
from prunex.minicluster.host import requirements_message


def minicluster_skip_reason() -> str | None:
    missing = missing_requirements()
    return requirements_message(missing) if missing else None


@pytest.fixture(scope="session")
def minicluster_session(tmp_path_factory):
    reason = minicluster_skip_reason()
    if reason:
        pytest.skip(reason)
    # clusters left by an earlier, killed test session (under pytest's temp root, owner process gone)
    temp_root = tmp_path_factory.getbasetemp().parent
    for d in running_cluster_dirs():
        if temp_root in d.parents and not cluster_owner_alive(d):
            MiniCluster(d).down()
    cluster = MiniCluster(tmp_path_factory.mktemp("minicluster"), nodes=2, cpus_per_node=2, inter_bw="1gbit")
    cluster.up()
    yield cluster
    cluster.down()


@pytest.fixture
def minicluster(minicluster_session, monkeypatch):
    """The session cluster (brought back up if a test took it down), with its client environment in
    os.environ; jobs inherit that environment, including a PYTHONPATH that finds this prunex."""
    if not minicluster_session.is_up():
        minicluster_session.up()
    src = str(Path(prunex.__file__).resolve().parents[1])
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([src] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    with minicluster_session.activated():
        yield minicluster_session
