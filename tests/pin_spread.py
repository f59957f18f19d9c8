"""Measure how far the behaviour pins' values move when the CPU kernels change: the tolerance's source.

The pins (tests/test_golden_runs.py) must hold on any x86-64 host. What differs between hosts is which
kernels the libraries pick (ATen's vector width, MKL's code branch, oneDNN on or off, thread blocking).
This script runs every pinned case under the pinned numerics and under variants that force each of
those choices the other way on this one host, and writes the largest scaled deviation of each variant
from the pinned numerics (`tests/pins.py`'s `deviation`) to tests/golden/spread.json. The same variants
in float32 with oneDNN (the numerics of the pins before float64) show the size of the effect the
float64 design has to absorb.

    PYTHONPATH=. python tests/pin_spread.py [CASE ...]   # ~17 min on the 2-core VM for all six cases

Naming cases measures only those and keeps the other cases' rows (after a deliberate change to some
methods' math, their spread is measured again with their pins).
"""

from __future__ import annotations

import json
import platform
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from distributed import close_pool, run_distributed  # noqa: E402
from pins import CASES, PIN_ENV, SPREAD, deviation, pin_data, run_case  # noqa: E402

# name -> (environment changes against PIN_ENV (None: unset), run_case keyword arguments). Not among them,
# measured once on hsadmm-2x1 (AMD EPYC): MKL_CBWR=AVX2 and =AVX512 gave exactly MKL's own dispatch (Intel
# documents that on other processors a named branch falls back to AUTO), and oneDNN on changed nothing
# (it has no float64 kernels).
VARIANTS: dict[str, tuple[dict[str, str | None], dict[str, object]]] = {
    "aten-default": ({"ATEN_CPU_CAPABILITY": "default"}, {}),
    "aten-avx512": ({"ATEN_CPU_CAPABILITY": "avx512"}, {}),
    "mkl-own-dispatch": ({"MKL_CBWR": None}, {}),
    "2-threads": ({"OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2"}, {"threads": 2}),
}
# float32 with oneDNN (the former pins' numerics) against the same with AVX-512 kernels
FLOAT32 = ({"MKL_CBWR": None, "ONEDNN_MAX_CPU_ISA": "AVX2"}, {"mkldnn": True, "float64": False})
FLOAT32_AVX512 = ({"MKL_CBWR": None, "ONEDNN_MAX_CPU_ISA": None, "ATEN_CPU_CAPABILITY": "avx512"}, FLOAT32[1])


def _env(changes: dict[str, str | None]) -> dict[str, str]:
    env = {**PIN_ENV, **{k: v for k, v in changes.items() if v is not None}}
    return {k: v for k, v in env.items() if changes.get(k, "") is not None}


def _run(name: str, variant: tuple[dict[str, str | None], dict[str, object]], data_root: str) -> dict:
    changes, kwargs = variant
    try:
        with tempfile.TemporaryDirectory() as root:
            return run_distributed(_call, 2, name, root, data_root, kwargs, timeout_s=600, env=_env(changes))[0]
    finally:
        close_pool(2, _env(changes))


def _call(rank: int, name: str, root: str, data_root: str, kwargs: dict) -> dict | None:
    return run_case(rank, name, root, data_root, None, **kwargs)


def main(argv: list[str] | None = None) -> int:
    from prunex.training.log import hardware_name

    names = sys.argv[1:] if argv is None else argv
    unknown = sorted(set(names) - set(CASES))
    if unknown:
        print(f"error: unknown case(s) {', '.join(unknown)}; known: {', '.join(CASES)}", file=sys.stderr)
        return 2
    full = tempfile.mkdtemp(prefix="pin-data-")  # digits made here, then the pins' cut of it beside
    data_root = str(pin_data(full, Path(full) / "pins"))
    out: dict = json.loads(SPREAD.read_text()) if names and SPREAD.exists() else {"cases": {}}
    out.update(host=platform.processor() or platform.machine(), cpu=hardware_name("cpu"))
    out.setdefault("measured", dict.fromkeys(out["cases"], out.get("date", "unknown")))
    for name in names or CASES:
        base = _run(name, ({}, {}), data_root)
        rows = {}
        for vname, variant in VARIANTS.items():
            exact, worst, where = deviation(_run(name, variant, data_root), base)
            rows[vname] = {"scaled_deviation": worst, "where": where, "exact_differences": exact[:3]}
            print(f"{name:26s} {vname:18s} {worst:10.3g}  exact {len(exact)}  {where}", flush=True)
        f32 = _run(name, FLOAT32, data_root)
        exact, worst, where = deviation(_run(name, FLOAT32_AVX512, data_root), f32)
        rows["float32: oneDNN/ATen AVX2 vs AVX-512"] = {
            "scaled_deviation": worst,
            "where": where,
            "exact_differences": exact[:3],
        }
        print(f"{name:26s} {'float32 avx2/512':18s} {worst:10.3g}  exact {len(exact)}  {where}", flush=True)
        out["cases"][name] = rows
        out["measured"][name] = time.strftime("%Y-%m-%d")
    out.pop("date", None)
    out["cases"] = {n: out["cases"][n] for n in CASES if n in out["cases"]}
    SPREAD.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
