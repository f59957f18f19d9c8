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

from prunex.cluster.options import Option, _field, config_from_args, epoch_methods, options
from prunex.methods.registry import readers
from prunex.run import build_parser
from prunex.run import main as run_main
from prunex.training.config import ConfigError

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
        argv = [*_method_for(o), o.flag, value]
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


def _method_for(o: Option) -> list[str]:
    """A method that reads the option (an option of another method's section is refused for that alone)."""
    method = readers(o.section)[0]  # RunConfig's own and the link's: every method's, hsadmm first
    if o.field == "epochs" and not o.section:  # read by the methods whose iteration is an SGD step only
        method = epoch_methods()[0]
    return ["--method", method] + (["--init-from", "a-start"] if method == "prune_finetune" else [])


def _flat(d: dict) -> list:
    out = []
    for v in d.values():
        out += _flat(v) if isinstance(v, dict) else [v]
    return out


def test_an_option_the_method_does_not_read_is_refused_and_not_part_of_a_run(tmp_path: Path) -> None:
    """Issue 29 item 4: `--method ddp --filter-keep 0.5` trained, ignoring the option, under a new run id.
    Now the command line refuses it in one line, naming the methods that read it, and an experiment's
    profile that hands an ADMM schedule to a DDP run does not make that run another training."""
    import dataclasses

    from prunex.training.config import ADMMConfig, RunConfig

    for argv, flag, readers_ in (
        (["--method", "ddp", "--filter-keep", "0.5"], "--filter-keep", "hsadmm, flat_admm"),
        (["--method", "hsadmm", "--topk-ratio", "0.1", "--results", "x"], "--topk-ratio", "topk"),
        (["--method", "topk", "--grad-dtype", "bf16"], "--grad-dtype", "ddp, prune_finetune"),
    ):
        results = tmp_path / flag.strip("-")
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            rc = run_main([*argv, "--results", str(results)])
        lines = [ln for ln in err.getvalue().splitlines() if ln.strip()]
        assert rc == 2 and len(lines) == 1 and flag in lines[0] and f"options of {readers_}," in lines[0], lines
        assert not results.exists()
    ddp = RunConfig(method="ddp")
    assert dataclasses.replace(ddp, admm=ADMMConfig(filter_keep=0.5)).training_key() == ddp.training_key()
    hsadmm = RunConfig(method="hsadmm")
    assert dataclasses.replace(hsadmm, admm=ADMMConfig(filter_keep=0.5)).training_key() != hsadmm.training_key()
    ptf = RunConfig(method="prune_finetune", init_from="s")
    changed = dataclasses.replace(ptf, ddp=dataclasses.replace(ptf.ddp, bucket_cap_mb=5.0))
    assert changed.training_key() != ptf.training_key()  # prune_finetune fine-tunes with DDP: it reads ddp


def test_a_layer_pattern_that_matches_nothing_is_refused_before_launch(tmp_path: Path) -> None:
    """Issue 29 item 4: `--layers 'nothing*'` trained without pruning anything."""
    results = tmp_path / "r"
    err = io.StringIO()
    argv = ["--method", "hsadmm", "--layers", "nothing*", "--executor", "debug", "--results", str(results)]
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        rc = run_main(argv)
    lines = [ln for ln in err.getvalue().splitlines() if ln.strip()]
    assert rc == 2 and len(lines) == 1 and "--layers 'nothing*' matches no convolution weight of resnet20" in lines[0]
    assert "layer1.0.conv1.weight" in lines[0] and not (results / "runs").exists()
