"""One writer per results directory: a lock file holding the owner's pid and host.

Two suite runs pointed at the same results directory would interleave their files; the second one
finds `<results>/.prunex.lock`, says who holds it, and exits. A lock whose owner is a dead process
on this host is stale and taken over (with a note). The lock is re-entrant for its own process.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from prunex.config import ConfigError

LOCK_NAME = ".prunex.lock"


class LockHeld(RuntimeError):
    """Another live process writes to this results directory."""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def results_lock(results: str | Path) -> Iterator[None]:
    """Hold the results directory's lock for the duration of the block."""
    results = Path(results)
    try:
        results.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError(f"results path {str(results)!r} is not writable: {e.strerror}") from None
    path = results / LOCK_NAME
    me = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    for _ in range(2):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                owner = json.loads(path.read_text())
            except (OSError, ValueError):
                owner = {}
            if owner.get("pid") == me["pid"] and owner.get("host") == me["host"]:
                yield  # re-entrant: this process already holds it
                return
            local = owner.get("host") == me["host"]
            if local and isinstance(owner.get("pid"), int) and not _alive(owner["pid"]):
                print(f"note: removing the stale lock of dead process {owner['pid']} in {results}", file=sys.stderr)
                path.unlink(missing_ok=True)
                continue
            raise LockHeld(
                f"results directory {results} is in use by pid {owner.get('pid')} on {owner.get('host')} since "
                f"{owner.get('started')}; wait for it to finish or use another --results"
            ) from None
        with os.fdopen(fd, "w") as f:
            json.dump(me, f)
        try:
            yield
        finally:
            path.unlink(missing_ok=True)
        return
    raise LockHeld(f"could not take the lock {path}")
