"""Wait-free communication time: what a collective costs without the time its members wait for each other.

A member that enters a collective early waits inside it for the last one to arrive, so the seconds a
rank logs for a call (`comm.parquet`) are its own wait plus the transfer. The *last-arriving* member
waits for nobody: its seconds are the collective's own ("wait-free") time. Without synchronised
clocks the last arriver is found as the member with the fewest seconds for that call (every member
leaves a ring collective at about the same moment, so the one that entered last logs the least).

A call is matched across members by (iteration, level, op, k): the k-th call of that (level, op) in
that iteration on each member (every member of a group issues its collectives in the same order).
Groups: the node for `intra`; for `inter`, the ranks of one local index across nodes (the leaders
in the paper's exchange, one group per local rank in the sharded exchange); everyone for `flat`.
Concurrent groups of one call (the nodes' intra-node AllReduces) run side by side: the slowest one
is the call's time on the critical path.

Torch-free: read by `analysis/` and `prunex.perfmodel`.
"""

from __future__ import annotations

import pandas as pd


def per_call(comm: pd.DataFrame) -> pd.DataFrame:
    """One row per logged call with its group's wait-free seconds and this member's wait.

    Adds columns ``k`` (call index), ``group``, ``waitfree_s`` (the group's minimum seconds for the
    call) and ``wait_s`` (this member's seconds minus ``waitfree_s``) to a copy of ``comm``.
    """
    c = comm.copy()
    c["k"] = c.groupby(["iteration", "rank", "level", "op"]).cumcount()
    if "local_rank" in c.columns:
        local = c["local_rank"]
    else:  # block placement: the node's lowest rank is its leader
        local = c["rank"] - c.groupby("node")["rank"].transform("min")
    c["group"] = c["node"].where(c["level"] == "intra", local.where(c["level"] == "inter", -1))
    c["waitfree_s"] = c.groupby(["iteration", "level", "op", "k", "group"])["seconds"].transform("min")
    c["wait_s"] = c["seconds"] - c["waitfree_s"]
    return c


def last_arriver_comm(comm: pd.DataFrame) -> pd.Series:
    """Wait-free communication seconds per iteration on the critical path: per call the minimum over
    the members of its group, the maximum over concurrent groups, summed per iteration."""
    c = per_call(comm[["iteration", "rank", "node", "level", "op", "seconds"]])
    calls = c.groupby(["iteration", "level", "op", "k", "group"])["waitfree_s"].first()
    return calls.groupby(["iteration", "level", "op", "k"]).max().groupby("iteration").sum()
