"""Wait-free communication time: what a collective costs without the time its members wait for each other.

A member that enters a collective early waits inside it for the last one to arrive, so the seconds a
rank logs for a call (`comm.parquet`) are its own wait plus the transfer. The *last-arriving* member
waits for nobody: its seconds are the collective's own ("wait-free") time. Without synchronised
clocks the last arriver is found as the member with the fewest seconds for that call (every member
leaves a ring collective at about the same moment, so the one that entered last logs the least).
For a broadcast the root may leave once it has sent, so the minimum can be the root's send alone:
a lower bound on the broadcast's own time.

A call is matched across members by (iteration, level, op, k): the k-th call of that (level, op) in
that iteration on each member (every member of a group issues its collectives in the same order).
Groups: the node for `intra`; for `inter` and `shard`, the ranks of one local index across nodes (the
leaders in the paper's exchange, one group per local rank in the sharded exchange, whose calls are logged at
level `shard`); everyone for `flat`.
Concurrent groups of one call (the nodes' intra-node AllReduces) run side by side: the slowest one
is the call's time on the critical path.

A `barrier` (H-SADMM and flat ADMM wait at one before their consensus) moves no data: its seconds
are waiting for ranks still in local training. `wait_split` counts all of them as wait, and the
figures leave barriers out of the wait-free time (`last_arriver_comm(..., exclude_ops=WAIT_OPS)`).

Torch-free: read by `analysis/` (Figs. 7 and 8, the paper's sec. 5.3.2-5.3.3) and `prunex.perfmodel`.
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

WAIT_OPS = ("barrier",)  # calls that are pure waiting: no payload, only synchronisation
# the definition, as the figures' captions give it
DEFINITION = "per call the seconds of its last-arriving member, who waited for nobody"
_CALL_COLUMNS = ["iteration", "rank", "node", "level", "op", "seconds"]


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
    # the sharded exchange's `shard` calls are one inter-node group per local rank, side by side, as `inter`'s
    c["group"] = c["node"].where(c["level"] == "intra", local.where(c["level"].isin(["inter", "shard"]), -1))
    c["waitfree_s"] = c.groupby(["iteration", "level", "op", "k", "group"])["seconds"].transform("min")
    c["wait_s"] = c["seconds"] - c["waitfree_s"]
    return c


def wait_split(comm: pd.DataFrame, wait_ops: Iterable[str] = WAIT_OPS) -> pd.DataFrame:
    """`per_call` with each member's seconds split into ``own_s`` + ``wait_s`` (they sum to ``seconds``).

    ``own_s`` is the call's wait-free seconds (its group's minimum); ``wait_s`` is the rest. A call of
    one of ``wait_ops`` (a barrier) is waiting as a whole: ``own_s`` 0, ``wait_s`` all its seconds.
    """
    c = per_call(comm)
    pure = c["op"].isin(list(wait_ops))
    c["own_s"] = c["waitfree_s"].where(~pure, 0.0)
    c["wait_s"] = c["seconds"] - c["own_s"]
    return c


def last_arriver_comm(comm: pd.DataFrame, exclude_ops: Iterable[str] = ()) -> pd.Series:
    """Wait-free communication seconds per iteration on the critical path: per call the minimum over
    the members of its group (of the seconds it adds to the rank's union of spans), the maximum over
    concurrent groups, summed per iteration. Calls whose
    op is in ``exclude_ops`` (e.g. `WAIT_OPS`) are left out; an iteration with no call left is absent."""
    cols = _CALL_COLUMNS + (["local_rank"] if "local_rank" in comm.columns else [])
    # calls in flight together (pipelined buckets) count once: each call's seconds outside the spans of
    # the calls that started before it (`exclusive_s`, logged since issue 27; older logs: whole seconds)
    c = comm.assign(seconds=comm["exclusive_s"]) if "exclusive_s" in comm.columns else comm
    c = c[cols]
    excluded = list(exclude_ops)
    if excluded:
        c = c[~c["op"].isin(excluded)]
    c = per_call(c)
    calls = c.groupby(["iteration", "level", "op", "k", "group"])["waitfree_s"].first()
    return calls.groupby(["iteration", "level", "op", "k"]).max().groupby("iteration").sum()
