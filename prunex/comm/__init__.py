"""Instrumented communication: every collective, its bytes and seconds, and physical shrinkage.

What a collective sends and costs is `prunex.commcost` (the model the performance model prices with).
"""

from prunex.comm.collectives import AlphaBetaLink, Comm, CommRecord
from prunex.comm.shrink import compress, decompress
from prunex.comm.volume import group_members, wire_bytes

__all__ = ["AlphaBetaLink", "Comm", "CommRecord", "compress", "decompress", "group_members", "wire_bytes"]
