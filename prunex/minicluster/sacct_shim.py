"""A small ``sacct`` for a cluster without slurmdbd.

The minicluster runs no accounting database (``AccountingStorageType=accounting_storage/none``), so the
real ``sacct`` only prints "Slurm accounting storage is disabled".  submitit polls job states with
``sacct -o JobID,State,NodeList --parsable2 -j ID``; without an answer a job that died without writing
its result file would be waited on forever.  ``MiniCluster.up`` copies this file to ``<dir>/bin/sacct``
(``MiniCluster.env()`` puts that directory first on PATH) and it answers from ``scontrol show job -o``
(slurmctld keeps finished jobs for ``MinJobAge``) and, for jobs already purged, from the
``jobcomp/filetxt`` log.

Self-contained on purpose (standard library only, no prunex import): it runs as a plain script.
Supported: ``-o/--format`` (JobID, JobIDRaw, JobName, State, NodeList, ExitCode, Partition, Start, End,
Elapsed, NNodes, NCPUS), ``-j/--jobs``, ``-P/--parsable2``, ``-p/--parsable``, ``-n/--noheader``,
``-X/--allocations``; other options are accepted and ignored.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

FIELDS = {
    "jobid": "JobID",
    "jobidraw": "JobIDRaw",
    "jobname": "JobName",
    "state": "State",
    "nodelist": "NodeList",
    "exitcode": "ExitCode",
    "partition": "Partition",
    "start": "Start",
    "end": "End",
    "elapsed": "Elapsed",
    "nnodes": "NNodes",
    "ncpus": "NCPUS",
}
# scontrol / jobcomp key for each field
SOURCE = {
    "JobIDRaw": "JobId",
    "JobName": "Name",
    "State": "JobState",
    "NodeList": "NodeList",
    "ExitCode": "ExitCode",
    "Partition": "Partition",
    "Start": "StartTime",
    "End": "EndTime",
    "Elapsed": "RunTime",
    "NNodes": "NumNodes",
    "NCPUS": "NumCPUs",
}
_KV = re.compile(r"(\w+)=(\S*)")


def _parse_record(line: str) -> dict[str, str]:
    rec: dict[str, str] = {}
    for key, value in _KV.findall(line):
        rec.setdefault(key, value)
    # jobcomp/filetxt spells a few keys differently
    if "NodeCnt" in rec:
        rec.setdefault("NumNodes", rec["NodeCnt"])
    if "ProcCnt" in rec:
        rec.setdefault("NumCPUs", rec["ProcCnt"])
    return rec


def _scontrol(job: str | None) -> list[dict[str, str]]:
    cmd = ["scontrol", "-o", "show", "job"] + ([job] if job else [])
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return []
    if out.returncode != 0:
        return []
    return [_parse_record(line) for line in out.stdout.splitlines() if line.startswith("JobId=")]


def _jobcomp_path() -> str | None:
    conf = os.environ.get("SLURM_CONF", "/etc/slurm/slurm.conf")
    try:
        with open(conf) as fh:
            for line in fh:
                m = re.match(r"\s*JobCompLoc\s*=\s*(\S+)", line, re.I)
                if m:
                    return m.group(1)
    except OSError:
        pass
    return None


def _jobcomp() -> list[dict[str, str]]:
    path = _jobcomp_path()
    if not path or not os.path.exists(path):
        return []
    with open(path, errors="replace") as fh:
        return [_parse_record(line) for line in fh if line.startswith("JobId=")]


def _job_id(rec: dict[str, str]) -> str:
    array_job, array_task = rec.get("ArrayJobId"), rec.get("ArrayTaskId")
    if array_job and array_task and array_task not in ("N/A", "(null)"):
        return f"{array_job}_{array_task}"
    return rec.get("JobId", "")


def _matches(rec: dict[str, str], wanted: set[str]) -> bool:
    if not wanted:
        return True
    ids = {rec.get("JobId", ""), rec.get("ArrayJobId", ""), _job_id(rec)}
    return bool(ids & wanted)


def _value(rec: dict[str, str], field: str) -> str:
    if field == "JobID":
        return _job_id(rec)
    value = rec.get(SOURCE.get(field, field), "")
    if field == "State":
        value = value.split()[0] if value else "UNKNOWN"
    return value


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    fields = ["JobID", "JobName", "Partition", "State", "ExitCode"]
    wanted: set[str] = set()
    sep, header = None, True
    i = 0
    while i < len(argv):
        arg = argv[i]
        value = None
        if "=" in arg and arg.startswith("--"):
            arg, value = arg.split("=", 1)
        needs_value = arg in ("-o", "--format", "-j", "--jobs")
        if needs_value and value is None:
            i += 1
            value = argv[i] if i < len(argv) else ""
        if arg in ("-o", "--format"):
            fields = [FIELDS.get(f.split("%")[0].strip().lower(), f) for f in value.split(",") if f]
        elif arg in ("-j", "--jobs"):
            wanted.update(j.strip() for j in value.split(",") if j.strip())
        elif arg in ("-P", "--parsable2"):
            sep = "|"
        elif arg in ("-p", "--parsable"):
            sep = "|"
        elif arg in ("-n", "--noheader"):
            header = False
        i += 1

    records: dict[str, dict[str, str]] = {}
    for rec in _jobcomp():  # older, purged jobs first; live scontrol data overrides them
        if _matches(rec, wanted):
            records[_job_id(rec)] = rec
    if wanted:
        for job in sorted({w.split("_")[0] for w in wanted}):
            for rec in _scontrol(job):
                records[_job_id(rec)] = rec
    else:
        for rec in _scontrol(None):
            records[_job_id(rec)] = rec

    lines = []
    if header:
        lines.append(fields)
    for _, rec in sorted(records.items(), key=lambda kv: kv[0]):
        lines.append([_value(rec, f) for f in fields])
    for row in lines:
        if sep:
            print(sep.join(row))
        else:
            print(" ".join(f"{c:>12}" for c in row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
