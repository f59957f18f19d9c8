import pytest

from prunex.training.topology import Topology, TopologyError, discover


def test_explicit_emulated_nodes_on_one_machine() -> None:
    env = {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "3", "LOCAL_WORLD_SIZE": "4"}
    t = discover(2, 2, env)
    assert (t.node, t.local_rank, t.is_leader, t.emulated) == (1, 1, False, True)
    assert t.leaders == [0, 2] and t.node_ranks(1) == [2, 3]


def test_torchrun_multi_node() -> None:
    env = {"RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4", "GROUP_RANK": "1"}
    t = discover(env=env)
    assert (t.nodes, t.procs_per_node, t.node, t.local_rank, t.emulated) == (2, 4, 1, 1, False)


def test_slurm_environment() -> None:
    env = {
        "SLURM_JOB_ID": "1",
        "SLURM_PROCID": "4",
        "SLURM_NTASKS": "8",
        "SLURM_LOCALID": "0",
        "SLURM_NODEID": "1",
        "SLURM_TASKS_PER_NODE": "4(x2)",
    }
    t = discover(env=env)
    assert (t.nodes, t.procs_per_node, t.node, t.is_leader, t.role) == (2, 4, 1, True, "leader")


def test_heterogeneous_nodes_are_refused() -> None:
    env = {"SLURM_JOB_ID": "1", "SLURM_PROCID": "0", "SLURM_NTASKS": "7", "SLURM_TASKS_PER_NODE": "4,3"}
    with pytest.raises(TopologyError, match="heterogeneous"):
        discover(env=env)


def test_world_that_is_not_m_times_p() -> None:
    with pytest.raises(TopologyError, match="world size 4 is not nodes 3"):
        discover(3, 2, {"RANK": "0", "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "4"})
    with pytest.raises(TopologyError):
        Topology(0, 6, nodes=4, procs_per_node=2)


def test_non_blockwise_placement_is_refused() -> None:
    env = {
        "SLURM_JOB_ID": "1",
        "SLURM_PROCID": "1",
        "SLURM_NTASKS": "4",
        "SLURM_LOCALID": "0",
        "SLURM_NODEID": "1",
        "SLURM_TASKS_PER_NODE": "2(x2)",
    }
    with pytest.raises(TopologyError, match="blockwise"):
        discover(env=env)
