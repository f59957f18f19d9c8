"""Where the test suite's CPU goes: every process's CPU time, sampled once a second, by kind and by test.

    python tests/cpu_sampler.py record OUT.jsonl -- ./run_all.sh test --durations=0
    python tests/cpu_sampler.py report OUT.jsonl

`record` runs the command and, until it ends, reads `/proc/<pid>/stat` of every process once a second
(user + system time, the process's own threads, not its children), with the command line, the process name
(a local job's task forked from its controller is `prunex-task<k>`: `prunex.cluster.local_fork`) and the test
that started it (`PYTEST_CURRENT_TEST` in the environment the process started with; a pytest-xdist worker
itself has none). A process that lived less than a second, or the CPU of its last second, can be missed.
Processes that were running before the command are left out and every process started meanwhile is in: run
it on an otherwise idle machine. `report` sums by kind of process (pool processes, job ranks, pytest
workers, launchers) and by test.

docs/testing.md says what it found: on 2026-11-27 the 4-process pool of the pool modules took 60-70 s of CPU
per process in the suite against ~23 s alone, from idle gloo transport threads (tests/distributed.py).
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import time
from typing import Any

KINDS = {  # a substring of the command line -> its kind
    "multiprocessing.spawn": "pool or probe process (spawn)",
    "submitit.core._submit": "job rank (submitit)",
    "prunex.cluster.jobs controller": "local job controller",
    "exec(eval(sys.stdin.readline()))": "pytest-xdist worker",
    "prunex.run": "launcher (python -m prunex.run)",
    "experiments.": "driver (python -m experiments.*)",
    "slurm": "Slurm daemons and steps",
}


def _env_value(raw: bytes, name: str) -> str:
    prefix = name.encode() + b"="
    return next((e[len(prefix) :].decode(errors="replace") for e in raw.split(b"\0") if e.startswith(prefix)), "")


def _sample(seen: dict[tuple[int, int], dict[str, Any]], skip: set[tuple[int, int]] | None, tick: int) -> None:
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
            fields = stat[stat.rindex(")") + 2 :].split()  # fields 3 on: state, ppid, ...
            key = (int(name), int(fields[19]))  # pid and start time (field 22): a reused pid is another process
            cpu = (int(fields[11]) + int(fields[12])) / tick  # utime, stime (fields 14, 15)
            if skip is not None and key in skip:
                continue
            rec = seen.get(key)
            if rec is None:
                with open(f"/proc/{name}/cmdline", "rb") as f:
                    cmd = f.read().replace(b"\0", b" ").decode(errors="replace")[:300]
                with open(f"/proc/{name}/environ", "rb") as f:
                    test = _env_value(f.read(), "PYTEST_CURRENT_TEST").split(" (")[0]
                rec = seen[key] = {"pid": key[0], "cmd": cmd, "test": test}
            rec["cpu_s"] = cpu
            with open(f"/proc/{name}/comm") as f:  # a forked task names itself after it starts (prunex-task<k>)
                rec["comm"] = f.read().strip()
        except (OSError, ValueError, IndexError):  # the process ended while being read
            continue


def record(out: str, command: list[str]) -> int:
    tick = os.sysconf("SC_CLK_TCK")
    before: dict[tuple[int, int], dict[str, Any]] = {}
    _sample(before, None, tick)
    seen: dict[tuple[int, int], dict[str, Any]] = {}
    started = time.monotonic()
    proc = subprocess.Popen(command)
    while proc.poll() is None:
        _sample(seen, set(before), tick)
        time.sleep(1.0)
    with open(out, "w") as f:
        for rec in seen.values():
            f.write(json.dumps(rec) + "\n")
    total = sum(r["cpu_s"] for r in seen.values())
    print(
        f"cpu_sampler: {len(seen)} processes, {total:.0f} s of CPU in {time.monotonic() - started:.0f} s",
        file=sys.stderr,
    )
    return proc.returncode


def report(path: str) -> int:
    with open(path) as f:
        recs = [json.loads(line) for line in f]
    by_kind: collections.Counter[str] = collections.Counter()
    by_test: collections.Counter[str] = collections.Counter()
    for r in recs:
        kind = next((k for s, k in KINDS.items() if s in r["cmd"]), "other")
        if r.get("comm", "").startswith("prunex-task"):  # its command line is its controller's (local_fork)
            kind = "job rank (forked from its local controller)"
        by_kind[kind] += r["cpu_s"]
        by_test[r["test"] or f"(no test: {kind})"] += r["cpu_s"]
    print(f"{len(recs)} processes, {sum(by_kind.values()):.0f} s of CPU")
    for kind, s in by_kind.most_common():
        print(f"{s:8.1f} s  {kind}")
    print("\nby test (its processes; a pool's CPU goes to the test that started the pool):")
    for test, s in by_test.most_common(25):
        print(f"{s:8.1f} s  {test}")
    return 0


def main(argv: list[str]) -> int:
    if len(argv) >= 4 and argv[0] == "record" and argv[2] == "--":
        return record(argv[1], argv[3:])
    if len(argv) == 2 and argv[0] == "report":
        return report(argv[1])
    print(__doc__.split("\n\n")[1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
