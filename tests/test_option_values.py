"""Every numeric option of the command line against NaN, inf, zero, negative and huge values (issue 29).

Each value is either refused before anything is launched (exit code 2, one line on stderr, nothing
written under --results) or makes a configuration whose every number is finite and within the bounds the
configuration states, which `config.json` can hold as standard JSON. What an accepted value then does in
training is not run here (a run per value would take minutes); the bounds exist where a value passed
validation and failed only after launch (timedelta, time.sleep and DDP bucket overflows, a benchmark
budget that never ends).
"""

from __future__ import annotations

import contextlib
import io
import json
import math
from pathlib import Path

import pytest

from prunex.config import ConfigError
from prunex.options import _field, config_from_args, options
from prunex.run import build_parser
from prunex.run import main as run_main

VALUES = ("nan", "inf", "-inf", "0", "-1", "99999999999999999999999", "1e300")


def _numeric() -> list:
    out = []
    for o in options():
        kinds = [k.strip() for k in str(_field(o).type).split("|") if k.strip() != "None"]
        if kinds[0] in ("int", "float"):
            out.append(o)
    return out


NUMERIC = _numeric()


def test_the_property_covers_every_numeric_option() -> None:
    assert len(NUMERIC) >= 40, [o.flag for o in NUMERIC]


@pytest.mark.parametrize("value", VALUES)
def test_a_value_is_refused_in_one_line_before_anything_or_makes_a_sound_config(value: str, tmp_path: Path) -> None:
    accepted = refused = 0
    for o in NUMERIC:
        argv = ["--method", "hsadmm", o.flag, value]
        try:
            with contextlib.redirect_stderr(io.StringIO()):
                config = config_from_args(build_parser().parse_args(argv))
        except (SystemExit, ConfigError):
            results = tmp_path / o.dest
            err = io.StringIO()
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                try:
                    rc = run_main([*argv, "--results", str(results)])
                except SystemExit as e:  # argparse: not a number of the option's type
                    rc = e.code
            lines = [ln for ln in err.getvalue().splitlines() if ln.strip()]
            assert rc == 2, (o.flag, value, rc)
            assert lines and lines[-1].startswith(("error:", "python -m prunex.run: error:")), (o.flag, value, lines)
            assert not results.exists(), f"{o.flag} {value}: refused, yet {results} was written"
            refused += 1
            continue
        accepted += 1
        numbers = [v for v in _flat(config.to_dict()) if isinstance(v, float | int) and not isinstance(v, bool)]
        assert all(math.isfinite(v) for v in numbers), (o.flag, value)
        json.dumps(config.to_dict(), allow_nan=False)  # standard JSON: no NaN or Infinity in config.json
    assert accepted + refused == len(NUMERIC)
    if value in ("nan", "inf", "-inf"):
        assert accepted == 0, f"{accepted} options took {value}"


def _flat(d: dict) -> list:
    out = []
    for v in d.values():
        out += _flat(v) if isinstance(v, dict) else [v]
    return out
