"""Bad input, as a new user types it (issue 19): each is one line on stderr and exit code 2 before
anything is launched or written, naming the file or path and the command that fixes it; a corrupt
digits cache is made again on its own. The commands' own `main` functions are called in this
process (a subprocess would spend seconds importing torch for each refusal), except where the
refusal needs a process of its own (a private read-only mount)."""

from __future__ import annotations

import json
import os
import pickle
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
from fixtures.logs import write_run

from analysis import all as analysis_all
from prunex.run import main as run_main
from prunex.training import train

ROOT = Path(__file__).resolve().parents[2]


def _run(args: list[str], timeout: float = 180, **kw) -> tuple[subprocess.CompletedProcess, float]:
    t0 = time.monotonic()
    proc = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=timeout, **kw)
    return proc, time.monotonic() - t0


def _one_line(proc: subprocess.CompletedProcess) -> str:
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    return lines[0]


def _main(fn: Callable[[list[str]], int], argv: list[str], capsys) -> tuple[int, str, float]:
    """A command's main in this process: exit code, its one stderr line, seconds."""
    capsys.readouterr()
    t0 = time.monotonic()
    rc = fn(argv)
    elapsed = time.monotonic() - t0
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(lines) == 1, lines
    return rc, lines[0], elapsed


DDP = ["--method", "ddp", "--epochs", "1"]


def test_read_only_results_directory(data_root: Path, tmp_path: Path, fault_report) -> None:
    """A results directory that exists but cannot be written (a read-only mount: root ignores mode bits)."""
    ro = tmp_path / "ro"
    ro.mkdir()
    mounted = shutil.which("unshare") and os.geteuid() == 0
    if not mounted:
        ro.chmod(0o555)
        if os.access(ro, os.W_OK):
            pytest.skip("cannot make a read-only directory here (root without unshare)")
    # the driver's results lock (prunex/cluster/lock.py) raised an OSError here; prunex.run's own path (preflight's
    # mkdir) is tests/test_config.py's unwritable-results test
    for what, cmd in (
        (
            "experiments.latency",
            [sys.executable, "-m", "experiments.latency", "--profile", "smoke", "--results", str(ro)],
        ),
    ):
        if mounted:  # a private mount namespace: a read-only tmpfs over the directory, for this command only
            script = f"mount -t tmpfs -o ro tmpfs {ro} && exec {subprocess.list2cmdline(map(str, cmd))}"
            cmd = ["unshare", "-m", "sh", "-c", script]
        proc, elapsed = _run(list(map(str, cmd)))
        line = _one_line(proc)
        assert proc.returncode == 2 and "is not writable" in line and str(ro) in line and "chmod u+w" in line, line
        fault_report(f"read-only results directory ({what})", elapsed, line, "nothing")


def test_truncated_digits_cache_is_made_again(tmp_path: Path, capsys, fault_report) -> None:
    from prunex.training.data import DIGITS_DIR, load_dataset, make_digits

    root = tmp_path / "data"
    make_digits(root)
    batch = root / DIGITS_DIR / "data_batch_1"
    good = batch.read_bytes()
    batch.write_bytes(good[: len(good) // 3])  # a torn copy
    with pytest.raises(pickle.UnpicklingError):
        pickle.loads(batch.read_bytes())
    capsys.readouterr()
    t0 = time.monotonic()
    assert len(load_dataset("digits", root, train=True)) == 1438  # what preflight and every rank call
    note = capsys.readouterr().err.strip()
    assert str(root / DIGITS_DIR) in note and "made it again" in note and len(note.splitlines()) == 1
    assert batch.read_bytes() == good
    fault_report("truncated digits batch file", time.monotonic() - t0, note, "the digits cache, made again")


def test_garbage_cifar10_batch(tmp_path: Path, capsys, fault_report) -> None:
    folder = tmp_path / "data" / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    for name in ("batches.meta", "test_batch", *(f"data_batch_{i}" for i in range(1, 6))):
        (folder / name).write_bytes(os.urandom(64))
    results = tmp_path / "r"
    argv = [*DDP, "--dataset", "cifar10", "--data-root", str(tmp_path / "data"), "--results", str(results)]
    rc, line, elapsed = _main(run_main, argv, capsys)
    assert rc == 2 and str(folder) in line and "data_batch_1" in line, line
    assert f"python -m prunex.training.data download --root {tmp_path / 'data'}" in line and not results.exists()
    fault_report("CIFAR-10 batch files of garbage", elapsed, line, "nothing")


def test_zero_iterations_refused_before_launch(data_root: Path, tmp_path: Path, capsys, fault_report) -> None:
    results = tmp_path / "r"
    argv = [*DDP, "--train-subset", "3", "--nodes", "2", "--procs-per-node", "2", "--results", str(results)]
    rc, line, elapsed = _main(run_main, argv, capsys)
    assert rc == 2 and "would train 0 iterations" in line and "--train-subset 3" in line, line
    assert not results.exists()  # nothing launched, nothing written (no DONE of nothing)
    fault_report("--train-subset 3 on 2x2 (an empty shard per rank)", elapsed, line, "nothing")


def test_missing_dataset_creates_nothing(tmp_path: Path, capsys, fault_report) -> None:
    results = tmp_path / "r"
    argv = [*DDP, "--dataset", "cifar10", "--data-root", str(tmp_path / "none"), "--results", str(results)]
    rc, line, elapsed = _main(run_main, argv, capsys)
    assert rc == 2 and "python -m prunex.training.data download --root" in line
    assert not results.exists()  # not even an empty adhoc/<name>/
    fault_report("missing CIFAR-10", elapsed, line, "nothing (no empty run directory)")


def test_config_json_of_the_wrong_type(tmp_path: Path, capsys, fault_report) -> None:
    results, out = tmp_path / "results", tmp_path / "figures"
    run = write_run(results, "volume", "ddp", iterations=2)
    write_run(results, "volume", "hsadmm", iterations=2)
    config = json.loads((run / "config.json").read_text())
    config["nodes"] = "two"
    (run / "config.json").write_text(json.dumps(config))
    rc, line, elapsed = _main(analysis_all.main, ["--results", str(results), "--out", str(out)], capsys)
    assert rc == 2 and str(run / "config.json") in line and "'nodes' must be an integer" in line, line
    assert f"remove {run}" in line and not out.exists()  # refused before anything was written
    fault_report("config.json with a wrong type (analysis.all)", elapsed, line, "nothing written")
    # the same file handed to the torchrun entry point
    rc, line, elapsed = _main(train.main, [str(run / "config.json"), str(tmp_path / "x")], capsys)
    assert rc == 2 and str(run / "config.json") in line and "field nodes must be int" in line, line
    fault_report("config.json with a wrong type (torchrun -m prunex.training.train)", elapsed, line, "nothing")


def test_missing_or_empty_results_for_the_figures(tmp_path: Path, capsys, fault_report) -> None:
    out = tmp_path / "figures"
    for what, results in (("a missing", tmp_path / "typo"), ("an empty", tmp_path)):
        rc, line, elapsed = _main(analysis_all.main, ["--results", str(results), "--out", str(out)], capsys)
        assert rc == 2 and str(results) in line and "saved-logs/local" in line, line
        assert not out.exists()
        fault_report(f"analysis.all on {what} results directory", elapsed, line, "nothing written")


def test_done_run_without_steps_is_reported_incomplete(tmp_path: Path, capsys, fault_report) -> None:
    from analysis import report

    results, out = tmp_path / "results", tmp_path / "figures"
    write_run(results, "volume", "hsadmm", iterations=3)
    ddp = write_run(results, "volume", "ddp", iterations=3)
    (ddp / "steps.parquet").unlink()  # DONE, but no iteration logged
    t0 = time.monotonic()
    assert analysis_all.main(["--results", str(results), "--out", str(out)]) == 1
    elapsed = time.monotonic() - t0
    assert f"incomplete run {ddp}: DONE but no logged iteration" in capsys.readouterr().err
    claims = pd.read_csv(out / "claims.csv").set_index("claim_id")
    volume = claims[claims.index.str.startswith("volume")]
    assert len(volume) and set(volume["verdict"]) == {report.INCOMPLETE}
    assert all(str(ddp) in d for d in volume["detail"])
    md = (out / "REPORT.md").read_text()
    assert "## Incomplete runs" in md and f"`{ddp}` (volume): DONE but no logged iteration" in md
    fault_report(
        "a DONE run without steps.parquet",
        elapsed,
        f"incomplete run {ddp.name}: DONE but no logged iteration (steps.parquet missing or empty)",
        f"figures drawn without it; REPORT.md lists it; {len(volume)} volume verdicts: incomplete logs; exit 1",
    )


def test_a_mistyped_option_is_one_line(tmp_path: Path, capsys, fault_report) -> None:
    from experiments import all as all_experiments

    t0 = time.monotonic()
    with pytest.raises(SystemExit) as exit_:
        all_experiments.main(["--profile", "nosuch", "--results", str(tmp_path / "r")])
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert exit_.value.code == 2 and len(err) == 1 and "invalid choice: 'nosuch'" in err[0]
    assert err[0].endswith("(see python -m experiments.all --help)") and not (tmp_path / "r").exists()
    fault_report(
        "--profile nosuch (experiments.all, as ./run_all.sh calls it first)", time.monotonic() - t0, err[0], "nothing"
    )


def test_an_only_glob_that_matches_no_run_is_one_line(tmp_path: Path, capsys, fault_report) -> None:
    """`--only` with a mistyped glob ran nothing and said "0 runs", exit code 0."""
    from experiments import cli, pareto

    argv = ["--profile", "smoke", "--executor", "local", "--results", str(tmp_path / "r"), "--only", "hsdamm*"]
    for dry in ([], ["--dry-run"]):
        rc, line, elapsed = _main(lambda a: cli.main("pareto", pareto.runs, None, a), [*argv, *dry], capsys)
        assert rc == 2 and "--only 'hsdamm*' matches none of experiment pareto's 4 runs" in line, line
        assert "hsadmm-resnet20-keep0.5-s0" in line and not (tmp_path / "r").exists(), line
    fault_report("--only 'hsdamm*' (experiments.pareto, smoke)", elapsed, line, "nothing")
    # a glob that matches keeps its runs: here the one that names it
    assert [c.name for c in cli.resolve("pareto", pareto.runs, "smoke", "local", "r", only="hsadmm*")] == [
        "hsadmm-resnet20-keep0.5-s0"
    ]


def test_an_only_glob_that_leaves_out_a_runs_start_is_refused_before_anything_is_made(
    tmp_path: Path, capsys, fault_report
) -> None:
    """`--only 'ptf*'` selects prune-then-finetune without the DDP start it is initialised from: it made the
    results directory, the run's directory and its link, then refused at the launch (2026-12-08)."""
    from experiments import cli, pareto

    results = tmp_path / "r"
    argv = ["--profile", "smoke", "--executor", "local", "--results", str(results), "--only", "ptf*"]
    rc, line, elapsed = _main(lambda a: cli.main("pareto", pareto.runs, None, a), argv, capsys)
    assert rc == 2 and line.startswith("error: --init-from start-resnet20-s0: "), line
    assert line.endswith("is not a finished run (no DONE)") and not results.exists(), line
    fault_report("--only 'ptf*' (experiments.pareto, smoke; its start not run)", elapsed, line, "nothing")
    # with the runs it reads selected too, the driver runs those first: nothing outside the selection is checked
    configs = cli.resolve("pareto", pareto.runs, "smoke", "local", str(results), only="[psh]*")
    assert [c.name for c in configs if c.method == "ddp"] == ["start-resnet20-s0"]  # the dense run left out
    cli.check_outside(configs)
    assert not results.exists()


def test_a_skip_glob_that_matches_no_experiment_is_one_line(tmp_path: Path, capsys, fault_report) -> None:
    """`experiments.all --skip` with a mistyped name skipped nothing: the experiment meant to be left out ran."""
    from experiments import all as all_experiments

    argv = ["--profile", "smoke", "--results", str(tmp_path / "r"), "--skip", "pareto,sparsity_pattern", "--dry-run"]
    rc, line, elapsed = _main(all_experiments.main, argv, capsys)
    assert rc == 2 and line.startswith("error: --skip sparsity_pattern matches no experiment; known: "), line
    assert "sparsity_patterns" in line and not (tmp_path / "r").exists(), line
    fault_report("--skip sparsity_pattern (experiments.all)", elapsed, line, "nothing")


# Issue 29's refusals: each value passed validation and failed after launch (a half-written run directory)
# or trained without complaint; now one line and exit code 2 before anything is written.
REFUSED_BEFORE_LAUNCH = [
    ("--weight-decay nan", ["--weight-decay", "nan"], "weight_decay"),
    ("--seed 99999999999999999999999", ["--seed", "99999999999999999999999"], "seed"),
    ("--collective-timeout-s inf", ["--collective-timeout-s", "inf"], "collective_timeout_s"),
    ("--bucket-cap-mb inf", ["--bucket-cap-mb", "inf"], "bucket_cap_mb"),
    ("--rho-mu nan (hsadmm)", ["--method", "hsadmm", "--rho-mu", "nan"], "rho_mu"),
    ("--eps-abs -1 (hsadmm)", ["--method", "hsadmm", "--eps-abs", "-1"], "eps_abs"),
    ("--inter-latency-s nan", ["--link-model", "alpha-beta", "--inter-latency-s", "nan"], "alpha_s"),
    # 2026-12-08: trained without an export, so without the bench these options set
    ("--bench-batch 8 without --export", ["--bench-batch", "8"], "runs with --export only"),
    # 2026-12-08: pruned to the FLOPs of --flops-from's run; --flops-keep was ignored
    (
        "--flops-from RUN --flops-keep 0.3",
        ["--method", "prune_finetune", "--flops-from", "start", "--flops-keep", "0.3"],
        "give one FLOPs target",
    ),
    # 2026-12-08: trained on the links as they are, its config.json holding the 5 Gbit/s it never had
    ("--inter-bw-gbit 5 (link model none)", ["--inter-bw-gbit", "5"], "which --link-model none does not read"),
    ("--layers 'nothing*' (hsadmm)", ["--method", "hsadmm", "--layers", "nothing*"], "matches no convolution"),
    ("--method ddp --filter-keep 0.5", ["--filter-keep", "0.5"], "which --method ddp does not read"),
    # 2026-12-07: trained hsadmm's default schedule (16 iterations on digits) where 3 epochs were asked for
    ("--method hsadmm --epochs 3", ["--method", "hsadmm", "--epochs", "3"], "which --method hsadmm does not read"),
    ("--method flat_admm --epochs 3", ["--method", "flat_admm", "--epochs", "3"], "--iterations outer iterations"),
    ("--init-from nosuchrun", ["--init-from", "nosuchrun"], "nosuchrun"),
    ("--data-root naming a file", ["--data-root", "/etc/passwd"], "/etc/passwd"),
]


@pytest.mark.parametrize(("what", "argv", "named"), REFUSED_BEFORE_LAUNCH, ids=[r[0] for r in REFUSED_BEFORE_LAUNCH])
def test_a_value_that_failed_after_launch_is_refused_before(
    what: str, argv: list[str], named: str, data_root: Path, tmp_path: Path, capsys, fault_report
) -> None:
    method = [] if "--method" in argv else ["--method", "ddp"]
    root = [] if "--data-root" in argv else ["--data-root", str(data_root)]
    results = tmp_path / "r"
    full = [*method, *argv, *root, "--executor", "debug", "--results", str(results)]
    rc, line, elapsed = _main(run_main, full, capsys)
    assert rc == 2 and line.startswith(("error:", "python -m prunex.run: error:")) and named in line, line
    assert not results.exists() or not any((results / "runs").glob("*")), "a run directory was made"
    fault_report(what, elapsed, line, "nothing")


def test_a_run_read_at_the_start_must_hold_what_is_read_of_it(data_root: Path, tmp_path: Path, capsys) -> None:
    """Review (2026-12-07): a start of another model, or a `--flops-from` / `--mask-from` run with no export or
    mask, launched the run, which then failed in its job (rank 0: a `load_state_dict` error; prune_finetune: no
    achieved FLOPs / no final mask). `prunex.cluster.preflight.check_start` now refuses each in one line, before
    anything is made. `start` is a finished run of resnet20 as a DDP run leaves it: no export, no mask."""
    results = tmp_path / "r"
    start = results / "adhoc" / "start"
    start.mkdir(parents=True)
    (start / "DONE").write_text("")
    (start / "config.json").write_text(json.dumps({"method": "ddp", "model": "resnet20"}))
    (start / "final_model.pt").write_bytes(b"")  # refused before its checksum is read
    ptf = ["--method", "prune_finetune", "--init-from", "start"]
    cases = [
        (["--method", "hsadmm", "--model", "resnet18", "--init-from", "start"], "--init-from start: a run of resnet20"),
        ([*ptf, "--flops-from", "start"], f"--flops-from start: {start} has no export.json: it ran without --export"),
        ([*ptf, "--mask-from", "start"], f"--mask-from start: {start} has no final_masks.parquet: a run that prunes"),
        ([*ptf, "--mask-from", "hs"], f"--mask-from hs: {results / 'adhoc' / 'hs'} is not a finished run (no DONE)"),
    ]
    for argv, message in cases:
        full = [*argv, "--data-root", str(data_root), "--executor", "debug", "--results", str(results)]
        rc, line, _ = _main(run_main, full, capsys)
        assert rc == 2 and line.startswith(f"error: {message}"), line
        assert sorted(p.name for p in results.iterdir()) == ["adhoc"], "a run directory was made"
        assert sorted(p.name for p in (results / "adhoc").iterdir()) == ["start"]


# A benchmark writes its table once every run has ended (benchmarks.pruned: an hour and more), the figures their files
# one by one: an output the command could not write is refused before it runs, in one line naming the option, and
# nothing is made. `{file}` is an existing file (a folder under it cannot be made, even by root), `{dir}` an existing
# folder (not a file to write a table to).
OUTPUTS = [
    ("benchmarks.pruned", ["--keeps", "0.5", "--results", "{file}/runs"], "--results", "is a file, not a directory"),
    ("benchmarks.pruned", ["--keeps", "0.5", "--out", "{dir}"], "--out", "is a directory"),
    ("benchmarks.pruned", ["--seeds", "0,x"], "--seeds", "not a comma-separated list of whole numbers"),
    # 2026-12-07: a KeyError traceback after the header; a seed or keep given twice ran and was counted twice
    ("benchmarks.pruned", ["--seeds", ""], "--seeds", "no value given"),
    ("benchmarks.pruned", ["--seeds", "0,1,0"], "--seeds", "0 given more than once"),
    ("benchmarks.pruned", ["--keeps", "0.5,0.50"], "--keeps", "0.5 given more than once"),
    ("benchmarks.pruned", ["--keeps", "0.5", "--results", "{link}/runs"], "--results", "which does not exist"),
    ("benchmarks.learning", ["--results", "{file}/runs"], "--results", "is a file, not a directory"),
    ("benchmarks.methods", ["--results", "{file}/runs"], "--results", "is a file, not a directory"),
    ("benchmarks.gpu_round", ["--device", "cpu", "--out", "{dir}"], "--out", "is a directory"),
    ("prunex.bench.collectives", ["--out", "{file}/c.parquet"], "--out", "is a file, not a directory"),
    ("analysis.all", ["--results", "{root}/saved-logs/local", "--out", "{file}/figs"], "--out", "is a file, not a"),
    ("analysis.compare_runs", ["{runs}", "{runs}", "--out", "{dir}"], "--out", "is a directory"),
]


@pytest.mark.parametrize(
    ("module", "argv", "option", "message"), OUTPUTS, ids=[f"{m} {' '.join(a)}" for m, a, _, _ in OUTPUTS]
)
def test_an_output_a_command_could_not_write_is_refused_before_it_runs(
    module: str, argv: list[str], option: str, message: str, tmp_path: Path, capsys, fault_report
) -> None:
    import importlib

    (tmp_path / "file").write_text("not a folder")
    (tmp_path / "dir").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "gone")  # a dangling link: a results folder cannot be made there
    before = sorted(tmp_path.rglob("*"))
    runs = ROOT / "saved-logs" / "regime" / "runs"
    paths = {"file": tmp_path / "file", "dir": tmp_path / "dir", "link": tmp_path / "link"}
    full = [a.format(**paths, root=ROOT, runs=runs) for a in argv]
    rc, line, elapsed = _main(importlib.import_module(module).main, full, capsys)
    assert rc == 2 and option in line and message in line, line
    assert sorted(tmp_path.rglob("*")) == before, "something was made"
    fault_report(f"{module} {' '.join(argv)}", elapsed, line, "nothing")


def test_the_exchange_benchs_unwritable_table_is_refused_before_its_runs(tmp_path: Path, capsys) -> None:
    from prunex.bench import exchange

    (tmp_path / "file").write_text("not a folder")
    with pytest.raises(SystemExit) as exit_:
        exchange.main(["--measure", "--out", str(tmp_path / "file" / "x.csv")])
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_.value.code == 2 and "--out" in err[-1] and "is a file, not a directory" in err[-1], err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_check_writable_makes_nothing_and_names_what_it_refuses(tmp_path: Path) -> None:
    from prunex.cluster.preflight import check_writable
    from prunex.training.config import ConfigError

    check_writable(tmp_path / "new" / "deeper", "--results")  # folders it would make: nothing made for the check
    check_writable(tmp_path / "new" / "table.csv", "--out", folder=False)
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "table.csv").write_text("an existing table is overwritten")
    check_writable(tmp_path / "table.csv", "--out", folder=False)
    for path, folder, message in (
        (tmp_path / "table.csv", True, "--x {p} is not a directory"),
        (tmp_path, False, "--x {p} is a directory"),
        (tmp_path / "table.csv" / "r", True, "is a file, not a directory"),
        (Path("/proc/prunex-nosuch/r"), True, "--x /proc/prunex-nosuch/r is not writable"),  # /proc: no files made
    ):
        with pytest.raises(ConfigError) as e:
            check_writable(path, "--x", folder)
        assert message.format(p=path) in str(e.value) and "\n" not in str(e.value), e.value
    assert sorted(p.name for p in tmp_path.iterdir()) == ["table.csv"]


def test_check_writable_follows_links_where_writing_would(tmp_path: Path) -> None:
    """A dangling link is where `mkdir` fails for a folder (refused), and where writing a file makes its target."""
    from prunex.cluster.preflight import check_writable
    from prunex.training.config import ConfigError

    (tmp_path / "gone").symlink_to(tmp_path / "nosuch")
    (tmp_path / "table.csv").symlink_to(tmp_path / "made-by-writing.csv")
    (tmp_path / "lost.csv").symlink_to(tmp_path / "nosuch" / "t.csv")
    (tmp_path / "real").mkdir()
    (tmp_path / "alive").symlink_to(tmp_path / "real")
    check_writable(tmp_path / "table.csv", "--out", folder=False)  # the target's folder exists
    check_writable(tmp_path / "alive" / "runs", "--results")  # a link to a folder is a folder
    for path, folder, message in (
        (tmp_path / "gone", True, "--x {p}: {p} is a link to {t}, which does not exist"),
        (tmp_path / "gone" / "runs", True, "is a link to {t}, which does not exist"),
        (tmp_path / "gone" / "t.csv", False, "is a link to {t}, which does not exist"),
        (tmp_path / "lost.csv", False, "--x {p} is a link to {t}/t.csv, whose folder does not exist"),
    ):
        with pytest.raises(ConfigError) as e:
            check_writable(path, "--x", folder)
        expected = message.format(p=path, t=tmp_path / "nosuch")
        assert expected in str(e.value) and "\n" not in str(e.value), e.value
    assert sorted(p.name for p in tmp_path.iterdir()) == ["alive", "gone", "lost.csv", "real", "table.csv"]
    assert list((tmp_path / "real").iterdir()) == []


# The one-process commands' own bad input (benches, the performance model, the report), as a user types it. Each
# was a traceback, a hang or a silent overwrite before (the thirty-third session's probes): `project --gpus 0`
# doubled 0 for ever, `analysis.report --results TYPO` overwrote the report in `--out` with "no logs" verdicts.
PERFMODEL = "prunex.perfmodel.__main__"  # the module `python -m prunex.perfmodel` runs
REFUSALS = [
    (PERFMODEL, ["project", "--gpus", "0"], "--gpus '0': GPU counts must be >= 1"),
    (PERFMODEL, ["project", "--gpus", "8,x"], "--gpus '8,x': not a comma-separated list"),
    (PERFMODEL, ["project", "--out", "{file}/p"], "--out {file}/p: {file} is a file"),
    (PERFMODEL, ["loopback", "--out", "{link}/l.parquet"], "which does not exist"),
    ("prunex.bench.shrink", ["--keep", "0"], "--keep must be in (0, 1], got 0.0"),
    ("prunex.bench.shrink", ["--repeats", "0"], "--repeats must be >= 1, got 0"),
    ("prunex.bench.shrink", ["--device", "nosuch"], "--device 'nosuch' is not a device"),
    ("prunex.bench.inference", ["--model", "resnet20", "--out", "{file}/i"], "--out {file}/i: {file} is a file"),
    ("analysis.report", ["--results", "{dir}/nosuch", "--out", "{dir}"], "results directory {dir}/nosuch does not"),
    ("analysis.report", ["--results", "{root}/saved-logs/local", "--out", "{file}/r"], "{file} is a file"),
    ("benchmarks.checkpoints", ["--profile", "nosuch"], "unknown profile 'nosuch'"),
    ("benchmarks.checkpoints", ["--cluster", "nosuch"], "no cluster file"),
    ("benchmarks.checkpoints", ["--sgd-epochs", "0"], "--sgd-epochs must be >= 1, got 0"),
    ("benchmarks.checkpoints", ["--every-min", "-1"], "--every-min must be >= 0"),
    ("prunex.bench.allocator", ["--model", "nosuch"], "unknown --model 'nosuch'"),
    ("prunex.bench.startup", ["--module", "nosuch.module"], "--module nosuch.module: no such module"),
    ("prunex.bench.collectives", ["--sizes", "4MB", "--out", "{dir}/c.parquet"], "needs two or more distinct sizes"),
    ("prunex.bench.exchange", ["--nodes", "0"], "--nodes and --iterations must be >= 1, got 0 and 3"),
    ("prunex.bench.exchange", ["--model", "nosuch"], "unknown model 'nosuch'"),
    ("prunex.bench.exchange", ["--cluster", "nosuch"], "no cluster file"),
    ("prunex.bench.exchange", ["--measure", "--bucket-mb", "0"], "bucket size must be in (0,"),
    ("benchmarks.methods", ["--model", "nosuch"], "unknown model 'nosuch'"),
    ("benchmarks.methods", ["--nodes", "0"], "impossible topology: nodes=0"),
    ("benchmarks.methods", ["--inter-bw-gbit", "5"], "--inter-bw-gbit: the alpha-beta link model's"),  # 2026-12-08
    ("benchmarks.gpu_round", ["--device", "cpu", "--keep", "0"], "channel_keep must be in (0, 1], got 0.0"),
    ("benchmarks.gpu_round", ["--device", "cuda:99"], "--device cuda:99: "),  # no GPU here, or too few
    ("prunex.cluster.regime", ["show", "{file}"], "{file} is not a regime file (JSONDecodeError"),
    ("prunex.cluster.regime", ["probe", "--out", "{file}/r.json"], "--out {file}/r.json: {file} is a file"),
    ("prunex.cluster.regime", ["probe", "--out", "{dir}/r.json", "--model", "nosuch"], "--model nosuch"),
    ("prunex.cluster.regime", ["probe", "--out", "{dir}/r.json", "--lr", "-1"], "--lr must be a positive finite"),
    # 2026-12-07, comma-separated lists (`prunex.cluster.options.comma_list`): an empty one was a KeyError traceback
    # (perfmodel), or measured nothing and exited 0 (benchmarks.learning, prunex.bench.collectives, which wrote an
    # empty table); a value given twice made a row twice
    (PERFMODEL, ["project", "--methods", ""], "--methods '': no value given"),
    (PERFMODEL, ["project", "--gpus", "8,16,8", "--out", "{dir}"], "--gpus '8,16,8': 8 given"),
    # 2026-12-08: each made a projection; --inter-beta-scale 0 was taken as no scaling at all
    (PERFMODEL, ["project", "--ddp-overlap", "2", "--out", "{dir}"], "ddp_overlap must be a share"),
    (PERFMODEL, ["project", "--dynamic-fraction", "-1", "--out", "{dir}"], "dynamic_fraction must"),
    (
        PERFMODEL,
        ["project", "--inter-beta-scale", "0", "--out", "{dir}"],
        "--inter-beta-scale must be positive finite, got 0",
    ),
    (PERFMODEL, ["project", "--compute-s-per-sample", "-1", "--out", "{dir}"], "positive finite"),
    (PERFMODEL, ["project", "--extend-to", "-1", "--out", "{dir}"], "--extend-to must be >= 0"),
    (PERFMODEL, ["validate-iterations", "--tolerance", "-1", "--results", "{dir}"], "--tolerance must be a positive"),
    (PERFMODEL, ["validate", "--tolerance", "nan", "--results", "{dir}"], "--tolerance must be a positive"),
    (PERFMODEL, ["validate-iterations", "--min-nodes", "0", "--results", "{dir}"], "--min-nodes must be >= 1, got 0"),
    (
        PERFMODEL,
        ["validate-iterations", "--procs-per-node", "-1", "--results", "{dir}"],
        "--procs-per-node must be >= 0",
    ),
    (
        PERFMODEL,
        ["validate", "--loopback-alpha-s", "0", "--loopback-beta", "-5", "--results", "{dir}"],
        "--loopback-beta",
    ),
    ("benchmarks.learning", ["--methods", "", "--results", "{dir}/r"], "--methods '': no value given"),
    ("benchmarks.learning", ["--methods", "ddp,ddp", "--results", "{dir}/r"], "ddp given more than once"),
    ("prunex.bench.collectives", ["--levels", ",", "--out", "{dir}/c/c.parquet"], "--levels ',': no value given"),
    ("prunex.bench.collectives", ["--ops", "nosuch", "--out", "{dir}/c/c.parquet"], "unknown level/op ['nosuch']"),
    ("prunex.bench.inference", ["--model", "resnet20", "--out", "{dir}", "--batches", "1,1"], "1 given more than once"),
    # 2026-12-08: timed 100000 threads' contention on the cores this process may use
    ("prunex.bench.inference", ["--model", "resnet20", "--out", "{dir}", "--threads", "100000"], "--threads 100000: "),
]


@pytest.mark.parametrize(("module", "argv", "message"), REFUSALS, ids=[f"{m} {' '.join(a)}" for m, a, _ in REFUSALS])
def test_a_one_process_commands_bad_input_is_its_last_line_and_exit_2(
    module: str, argv: list[str], message: str, tmp_path: Path, capsys
) -> None:
    """argparse's own refusals print the usage above the line; nothing else may come before it, and no traceback."""
    import importlib

    (tmp_path / "file").write_text("not a folder")
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "REPORT.md").write_text("the report a typo must not overwrite")
    (tmp_path / "link").symlink_to(tmp_path / "gone")
    paths = {"file": tmp_path / "file", "dir": tmp_path / "dir", "link": tmp_path / "link", "root": ROOT}
    before = {p: p.read_bytes() if p.is_file() else None for p in tmp_path.rglob("*")}
    capsys.readouterr()
    try:
        rc = importlib.import_module(module).main([a.format(**paths) for a in argv])
    except SystemExit as e:  # argparse's error()
        rc = e.code
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert rc == 2 and err and message.format(**paths) in err[-1], err
    assert all(ln.startswith(("usage:", " ")) for ln in err[:-1]), err
    # as the user typed it (2026-12-08: "usage: startup.py ...", "shrink.py: error: ..." for six of these)
    said = [ln for ln in err if ln.startswith("usage:") or ": error:" in ln]
    assert all(re.match(r"(usage: )?python -m (prunex|benchmarks)\.", ln) for ln in said), err
    assert {p: p.read_bytes() if p.is_file() else None for p in tmp_path.rglob("*")} == before, "something was written"


def test_a_gpu_series_of_no_gpus_is_refused_not_doubled_for_ever() -> None:
    from prunex.perfmodel.project import gpu_series

    assert gpu_series([8, 16], 64) == [8, 16, 32, 64]
    for base in ([0], [8, 0], [-4], []):
        with pytest.raises(ValueError, match="GPU counts must be >= 1"):
            gpu_series(base, 4096)
