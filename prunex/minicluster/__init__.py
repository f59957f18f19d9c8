"""prunex.minicluster: a real Slurm cluster of M nodes on one Linux machine.

Each node is a network namespace holding one ``slurmd``; nodes are joined through a bridge in the root
namespace (which also holds ``slurmctld``) by veth links shaped with ``tc tbf``.  After ``up`` the
ordinary submitit ``AutoExecutor(cluster="slurm")`` path (sbatch, srun) runs unchanged, given
``MiniCluster.env()`` in the environment.

CLI: ``python -m prunex.minicluster up --nodes 2 --cpus-per-node 2 --inter-bw 1gbit`` / ``down`` /
``status`` / ``env`` (default dir ``.prunex-cluster``).

Modules: `cluster` (bring-up and teardown), `accounting` (what a cluster made and what of it is still
there: its record, daemons, namespaces and links; the ``sacct`` stand-in for its jobs), `host` (commands,
prerequisites and processes of the machine), `helpers` (for launchers and jobs), `wire` (a node's wire
counters), `sacct_shim`, `probe`.
"""

from .cluster import DEFAULT_DIR, PARTITION, MiniCluster
from .helpers import adapt_slurm_params, dist_env_overrides, export_torch_env, master_addr
from .host import INSTALL_CMD, MiniClusterError, missing_requirements
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
