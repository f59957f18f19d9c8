"""Communication: what crosses the links, what it costs, and how long it takes.

- `collectives` (`Comm`: every collective timed and byte-counted, eager or asynchronous), `bucket`
  (bucketed dense AllReduce), `shrink` (`compress`/`decompress`: physical buffer shrinkage of a mask's
  kept slices), `native` (the one C kernel), `bitset` (packed masks for the bitwise-OR sync), `wire`
  (dtypes on the wire), `volume` (bytes per member);
- `cost`: the one communication cost model (ring steps, bytes per member, bucket plan, alpha-beta time
  and fit; torch-free, read by the collectives and the performance model);
- `waitfree`: the wait-free time of a logged collective (the last arriver's), torch-free;
- `clocks`: one clock per device (CUDA events on the stream a collective runs on, or the host's).

The package imports nothing itself; `from prunex.comm import Comm` loads `collectives` on first use, so
that the torch-free modules (`cost`, `waitfree`) import without torch.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "AlphaBetaLink": "collectives",
    "Comm": "collectives",
    "CommRecord": "collectives",
    "compress": "shrink",
    "decompress": "shrink",
    "group_members": "volume",
    "wire_bytes": "volume",
}
__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:  # PEP 562: load the submodule that defines `name` on first use
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"prunex.comm.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'prunex.comm' has no attribute {name!r}")
