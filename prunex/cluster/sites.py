"""Site presets: what a cluster's Slurm wants for a GPU job, in one file per site.

    python -c "from prunex.cluster.sites import load_site; print(load_site('puhti'))"

`--site NAME` (or `PRUNEX_SITE=NAME`) reads `clusters/sites/NAME.json` (or a path). Every key but
`name` is optional::

    {
      "name": "puhti",
      "description": "free text",
      "cluster": "puhti",                      # perf-model cluster file (clusters/<cluster>.json): time estimates
      "gpu": {"name": "Tesla V100-SXM2-32GB", "capability": "7.0"},   # checked against torch's arch list
      "slurm": {
        "partition": "gpu",
        "gres": "gpu:v100:{gpus}",             # {gpus}: GPUs per node = tasks per node (one GPU per task)
        "gpus_per_node": 4,                    # what a node has (a run may use fewer)
        "cpus_per_task": 10,
        "mem_per_gpu_gb": 80,                  # --mem = this x GPUs per node
        "max_time_min": 4320,                  # the partition's limit: time limits are clamped to it
        "max_nodes": 20
      },
      "setup": ["module purge", "module load pytorch"],   # lines the job script runs before srun
      "env": {"NCCL_DEBUG": "WARN"},           # exported in the job script; a value set at submission wins
      "time_limit": {"factor": 2.0, "add_min": 20, "round_min": 10},   # limit = factor x estimate + add
      "notes": ["why each value"], "sources": ["https://..."]
    }

Command-line options and `PRUNEX_SLURM_*` variables override a site's values (`prunex.cluster.slurm`).
A bad or unknown site is a `ConfigError` (one line).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prunex.cluster.compat import parse_capability
from prunex.training.config import ConfigError

SITES_DIR = Path(__file__).resolve().parents[2] / "clusters" / "sites"
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class TimeLimitPolicy:
    """Slurm time limit from an estimate: ``ceil((factor x estimate + add) / round) x round`` minutes,
    at most the site's ``max_time_min``."""

    factor: float = 2.0
    add_min: float = 20.0
    round_min: int = 10

    def limit_min(self, estimate_s: float, max_min: int | None = None) -> int:
        raw = self.factor * estimate_s / 60.0 + self.add_min
        limit = int(math.ceil(raw / self.round_min - 1e-9) * self.round_min)
        return min(limit, max_min) if max_min else limit

    def describe(self) -> str:
        return f"{self.factor:g} x estimate + {self.add_min:g} min, rounded up to {self.round_min} min"


@dataclass(frozen=True)
class Site:
    name: str
    path: str
    description: str = ""
    cluster: str | None = None
    gpu_name: str = ""
    gpu_capability: tuple[int, int] | None = None
    partition: str | None = None
    gres: str | None = None  # may hold {gpus}
    gpus_per_node: int | None = None
    cpus_per_task: int | None = None
    mem_per_gpu_gb: float | None = None
    max_time_min: int | None = None
    max_nodes: int | None = None
    setup: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    time_limit: TimeLimitPolicy = field(default_factory=TimeLimitPolicy)
    notes: tuple[str, ...] = ()

    def gres_for(self, gpus: int) -> str | None:
        return self.gres.format(gpus=gpus) if self.gres else None

    def mem_for(self, gpus: int) -> str | None:
        return f"{math.ceil(self.mem_per_gpu_gb * gpus)}G" if self.mem_per_gpu_gb else None

    def setup_lines(self) -> list[str]:
        """The site's setup, then its environment (``export K=${K:-v}``: a value set at submission wins)."""
        return list(self.setup) + [f"export {k}=${{{k}:-{v}}}" for k, v in self.env]


def known_sites() -> list[str]:
    return sorted(p.stem for p in SITES_DIR.glob("*.json"))


def load_site(name_or_path: str | Path) -> Site:
    """Read a site preset by name (`clusters/sites/NAME.json`) or path."""
    path = Path(name_or_path)
    if not path.suffix and not path.exists():
        path = SITES_DIR / f"{name_or_path}.json"
    if not path.is_file():
        raise ConfigError(f"no site file {path} (known sites: {', '.join(known_sites()) or 'none'})")
    try:
        raw = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ConfigError(f"site file {path} is not valid JSON: {e}") from None
    try:
        return _parse(raw, path)
    except (KeyError, TypeError, ValueError) as e:
        raise ConfigError(f"site file {path}: {e}") from None


def _positive(raw: dict[str, Any], key: str, kind: type = int) -> Any:
    if key not in raw or raw[key] is None:
        return None
    value = raw[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"{key} must be a positive number, got {value!r}")
    return kind(value)


def _section(raw: dict[str, Any], key: str) -> dict[str, Any]:
    """An object of the site file (absent or null: empty), refused when it is anything else."""
    value = raw.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"'{key}' must be an object ({{...}}), got {type(value).__name__} {value!r}")
    return value


def _parse(raw: dict[str, Any], path: Path) -> Site:
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
        raise ValueError("needs a 'name'")
    slurm, gpu, env, tl = (_section(raw, key) for key in ("slurm", "gpu", "env", "time_limit"))
    for k, v in env.items():
        if not _ENV_NAME.match(k) or not re.fullmatch(r"[A-Za-z0-9_.,:/=+-]*", str(v)):
            raise ValueError(f"env {k}={v!r}: names are identifiers, values plain words")
    gres = slurm.get("gres")
    if gres is not None:
        if not isinstance(gres, str):
            raise ValueError(f"slurm.gres must be a string such as 'gpu:v100:{{gpus}}', got {gres!r}")
        gres.format(gpus=1)  # a bad template fails here, not at submission
    policy = TimeLimitPolicy(
        factor=float(tl.get("factor", 2.0)),
        add_min=float(tl.get("add_min", 20)),
        round_min=int(tl.get("round_min", 10)),
    )
    if policy.factor < 1 or policy.add_min < 0 or policy.round_min < 1:
        raise ValueError("time_limit needs factor >= 1, add_min >= 0, round_min >= 1")
    return Site(
        name=raw["name"],
        path=str(path),
        description=raw.get("description", ""),
        cluster=raw.get("cluster"),
        gpu_name=gpu.get("name", ""),
        gpu_capability=parse_capability(gpu["capability"]) if "capability" in gpu else None,
        partition=slurm.get("partition"),
        gres=gres,
        gpus_per_node=_positive(slurm, "gpus_per_node"),
        cpus_per_task=_positive(slurm, "cpus_per_task"),
        mem_per_gpu_gb=_positive(slurm, "mem_per_gpu_gb", float),
        max_time_min=_positive(slurm, "max_time_min"),
        max_nodes=_positive(slurm, "max_nodes"),
        setup=tuple(str(x) for x in raw.get("setup", [])),
        env=tuple((str(k), str(v)) for k, v in env.items()),
        time_limit=policy,
        notes=tuple(str(x) for x in raw.get("notes", [])),
    )
