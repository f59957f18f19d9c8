"""prunex.minicluster: a real Slurm cluster of M nodes on one Linux machine.

Each node is a network namespace holding one ``slurmd``; nodes are joined through a bridge in the root
namespace (which also holds ``slurmctld``) by veth links shaped with ``tc tbf``.  After ``up`` the
ordinary submitit ``AutoExecutor(cluster="slurm")`` path (sbatch, srun) runs unchanged, given
``MiniCluster.env()`` in the environment.

CLI: ``python -m prunex.minicluster up --nodes 2 --cpus-per-node 2 --inter-bw 1gbit`` / ``down`` /
``status`` / ``env`` (default dir ``.prunex-cluster``).
"""

from .cluster import DEFAULT_DIR, INSTALL_CMD, PARTITION, MiniCluster, MiniClusterError, missing_requirements
from .helpers import adapt_slurm_params, dist_env_overrides, export_torch_env, master_addr
from .wire import LINK_MODEL, WireRecorder, link_model_active, node_iface, read_counters

__all__ = [
    "DEFAULT_DIR",
    "INSTALL_CMD",
    "LINK_MODEL",
    "PARTITION",
    "MiniCluster",
    "MiniClusterError",
    "WireRecorder",
    "adapt_slurm_params",
    "dist_env_overrides",
    "export_torch_env",
    "link_model_active",
    "master_addr",
    "missing_requirements",
    "node_iface",
    "read_counters",
]
