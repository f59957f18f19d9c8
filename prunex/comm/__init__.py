"""Instrumented communication: every collective, its bytes and seconds, and physical shrinkage."""

from prunex.comm.collectives import AlphaBetaLink, Comm, CommRecord
from prunex.comm.volume import group_members, wire_bytes

__all__ = ["AlphaBetaLink", "Comm", "CommRecord", "group_members", "wire_bytes"]

try:  # physical shrinkage (sec. 4.4); lives in its own module
    from prunex.comm.shrink import compress, decompress  # noqa: F401

    __all__ += ["compress", "decompress"]
except ImportError:  # pragma: no cover - while the module is being written
    pass
