"""The experiment suite: every module, every profile, dry runs, smoke (golden Slurm parameters: test_slurm.py)."""

import dataclasses
import importlib
import json
from pathlib import Path

import pandas as pd
import pytest

from analysis.report import wire_dtype_section
from experiments import all as all_experiments
from experiments import cli, wire_dtype
from experiments.common import PROFILE_NAMES, profile
from experiments.time_to_accuracy import runs as tta_runs
from prunex.cluster.rundir import run_dir_for
from prunex.training.config import ConfigError, RunConfig

MODULES = all_experiments.EXPERIMENTS


@pytest.mark.parametrize("name", MODULES)
@pytest.mark.parametrize("profile", PROFILE_NAMES)
def test_runs_are_unique_and_valid(name: str, profile: str) -> None:
    module = importlib.import_module(f"experiments.{name}")
    assert module.NAME == name and "Paper claim" in module.__doc__
    configs = cli.resolve(name, module.runs, profile, None, "results")
    assert configs and all(isinstance(c, RunConfig) for c in configs)
    assert len({c.name for c in configs}) == len(configs)
    assert {c.experiment for c in configs} == {name} and {c.profile for c in configs} == {profile}
    if profile == "paper":
        assert {c.dataset for c in configs} == {"cifar10"} and {c.executor for c in configs} == {"slurm"}
        assert {c.device for c in configs} == {"cuda"}  # no silent CPU in the paper profile
        assert all(c.procs_per_node == 4 and c.batch_size == 128 and c.lr == 1e-3 for c in configs)
    else:
        assert {c.device for c in configs} == {"cpu"}


def test_dry_run_prints_every_run_and_submits_nothing(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.delenv("PRUNEX_MINICLUSTER_DIR", raising=False)
    results = tmp_path / "r"
    argv = ["--profile", "paper", "--results", str(results), "--dry-run", "--partition", "gpu"]
    assert cli.main("pareto", importlib.import_module("experiments.pareto").runs, None, argv) == 0
    out, err = capsys.readouterr()
    lines = [json.loads(x) for x in out.splitlines() if x.startswith("{")]
    assert len(lines) == 3 * (1 + 10 + 1 + 9)  # per model: the start, hsadmm at 10 keep rates, dense ddp, 9 ptf
    assert all(x["params"]["slurm_partition"] == "gpu" for x in lines)
    assert all(x["params"]["gpus_per_node"] == 4 for x in lines)  # one GPU per task, without a site too
    assert all(x["device"] == "cuda" and x["estimate"] is None for x in lines)  # no site: nothing to estimate on
    assert "[pareto] 63 runs; no GPU-hour estimate" in out
    assert "--account is required" in err  # what a real submission would refuse, said once
    assert not results.exists()


def test_dry_run_of_all_experiments_totals_the_estimated_gpu_hours(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.delenv("PRUNEX_MINICLUSTER_DIR", raising=False)
    argv = ["--profile", "paper", "--site", "puhti", "--account", "X", "--dry-run", "--results", str(tmp_path / "r")]
    assert all_experiments.main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    rows = [json.loads(x) for x in out if x.startswith("{")]
    per_experiment = [x for x in out if x.startswith("[") and "GPU-hours estimated" in x and not x.startswith("[all]")]
    asked = sum(len(importlib.import_module(f"experiments.{m}").runs(profile("paper", "slurm"))) for m in MODULES)
    assert len(rows) == asked and len(per_experiment) == len(MODULES)
    total = sum(r["estimate"]["gpu_hours"] for r in rows)
    assert all(r["estimate"]["cluster"] == "puhti" and r["estimate"]["gpu_hours"] > 0 for r in rows)
    assert all(r["params"]["timeout_min"] == r["estimate"]["time_limit_min"] for r in rows)
    # the total counts each distinct training once (experiments share identical runs: issue 14), with its
    # export job where it has one (a multi-task --export: one GPU after training, prunex.training.export_step)
    exported = [r for r in rows if "export_estimate" in r]
    assert exported and all(r["export_estimate"]["gpu_hours"] > 0 for r in exported)
    distinct = {
        r["shared_run"]: r["estimate"]["gpu_hours"] + (r.get("export_estimate") or {}).get("gpu_hours", 0.0)
        for r in rows
    }
    assert len(distinct) < len(rows)
    summary = out[-1]
    assert summary.startswith(
        f"[all] {asked} runs asked for in {len(MODULES)} experiments, {len(distinct)} distinct trainings"
    )
    assert "GPU-hours estimated" in summary and sum(distinct.values()) < total
    assert float(summary.split(": ")[1].split()[0]) == pytest.approx(sum(distinct.values()), abs=0.1 + 0.01 * len(rows))


def test_bad_input_is_one_line_before_launch(tmp_path: Path, capsys) -> None:
    runs = importlib.import_module("experiments.latency").runs
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert cli.main("latency", runs, None, ["--profile", "smoke", "--results", str(blocker / "r")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not writable" in err[0]


@pytest.mark.parametrize("profile_name", ["local", "regime", "paper"])
def test_the_debug_executor_is_refused_for_a_profile_of_several_processes(
    profile_name: str, tmp_path: Path, capsys
) -> None:
    """Review (2026-12-07): `--executor debug` made every run of a multi-process profile 1 x 1 in silence:
    strong_scaling's `hsadmm-resnet20-2x2` trained one process, volume's runs sent no inter-node byte. It is refused
    now, in one line, before anything is made; the smoke profile, one process per run, is the debug executor's."""
    runs = importlib.import_module("experiments.strong_scaling").runs
    results = tmp_path / "r"
    argv = ["--profile", profile_name, "--executor", "debug", "--results", str(results), "--dry-run"]
    assert cli.main("strong_scaling", runs, None, argv) == 2
    (err,) = capsys.readouterr().err.strip().splitlines()
    assert err.startswith("error: the debug executor runs one process in the foreground; use --executor local for "), (
        err
    )
    assert not results.exists()
    smoke = cli.resolve("strong_scaling", runs, "smoke", "debug", str(results))
    assert smoke and all(c.executor == "debug" and c.world_size == 1 for c in smoke)


def test_cuda_on_a_profile_with_emulated_links_names_what_to_do(tmp_path: Path, capsys) -> None:
    """Review (2026-12-07): `--profile local --device cuda` (local executor) was refused with RunConfig's advice to
    use `--link-model none`, an option the experiments do not have."""
    runs = importlib.import_module("experiments.volume").runs
    argv = ["--profile", "local", "--device", "cuda", "--results", str(tmp_path / "r"), "--dry-run"]
    assert cli.main("volume", runs, None, argv) == 2
    (err,) = capsys.readouterr().err.strip().splitlines()
    assert err == (
        "error: --device cuda: profile local on the local executor emulates its inter-node link with the alpha-beta "
        "model, which is for CPU runs; run it with --device cpu, or on GPUs with --executor slurm (the cluster's own "
        "links)"
    )
    assert [c.device for c in cli.resolve("volume", runs, "local", "slurm", str(tmp_path), device="cuda")] == [
        "cuda",
        "cuda",
    ]


@pytest.mark.slow
def test_whole_smoke_profile_end_to_end(data_root: Path, tmp_path: Path) -> None:
    results = tmp_path / "smoke"
    assert all_experiments.main(["--profile", "smoke", "--results", str(results)]) == 0
    for name in MODULES:
        module = importlib.import_module(f"experiments.{name}")
        for c in cli.resolve(name, module.runs, "smoke", None, str(results)):
            run_dir = results / name / c.name
            assert (run_dir / "DONE").exists(), run_dir
            steps = pd.read_parquet(run_dir / "steps.parquet")
            assert len(steps) > 0 and steps["test_acc"].notna().any()
    # a second invocation finds everything done and runs nothing
    assert all_experiments.main(["--profile", "smoke", "--results", str(results)]) == 0
    # bf16 on the wire beside fp32 (not a paper result): its fp32 run is time_to_accuracy's, only bf16 trains
    assert cli.main("wire_dtype", wire_dtype.runs, None, ["--profile", "smoke", "--results", str(results)]) == 0
    assert (results / "wire_dtype" / "hsadmm-resnet20-fp32").resolve() == (
        results / "time_to_accuracy" / "hsadmm-resnet20"
    ).resolve()
    out = tmp_path / "report"
    out.mkdir()
    section = "\n".join(wire_dtype_section(results, out))
    table = pd.read_csv(out / "wire_dtype.csv")
    assert list(table["seed"]) == [0] and "## bf16 on the wire" in section
    diff = float(table["bf16_minus_fp32_pts"].iloc[0])
    assert diff == pytest.approx(table["bf16_pct"].iloc[0] - table["fp32_pct"].iloc[0])
    assert ("**met**" if abs(diff) <= 0.5 else "**not met**") in section


def test_wire_dtype_pairs_bf16_with_fp32_per_seed_outside_the_paper_profile(capsys) -> None:
    for name in ("local", "regime"):
        configs = cli.resolve("wire_dtype", wire_dtype.runs, name, None, "results")
        seeds = profile(name).repeat_seeds
        assert [(c.seed, c.admm.wire_dtype) for c in configs] == [(s, w) for s in seeds for w in ("fp32", "bf16")]
        assert all(c.method == "hsadmm" for c in configs)
        # on the profile's dataset (digits), where time to accuracy runs on Fashion-MNIST: not the same training
        (tta,) = [c for c in cli.resolve("time_to_accuracy", tta_runs, name, None, "results") if c.method == "hsadmm"]
        assert {c.dataset for c in configs} == {"digits"} and tta.dataset == "fashion-mnist"
        assert run_dir_for(configs[0]) != run_dir_for(configs[1])
    argv = ["--profile", "paper", "--results", "results", "--dry-run"]
    assert cli.main("wire_dtype", wire_dtype.runs, None, argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a result of the paper" in err[0]


def test_only_the_curve_experiments_evaluate_before_the_end_where_accuracy_has_its_own_data() -> None:
    from experiments.common import CURVE_EXPERIMENTS, FINAL_ONLY

    for name in PROFILE_NAMES:
        p = profile(name)
        configs = []
        for exp in MODULES + ("wire_dtype",):
            module = importlib.import_module(f"experiments.{exp}")
            if exp == "wire_dtype" and name == "paper":
                continue  # not a result of the paper
            for c in cli.resolve(exp, module.runs, name, None, "results"):
                configs.append(c)
                if exp == "pareto":  # its points are final models in the one-machine profiles (its own Budget)
                    continue
                final_only = p.accuracy_dataset is not None and exp not in CURVE_EXPERIMENTS
                assert c.eval_every == (FINAL_ONLY if final_only else 1), (name, exp, c.name)
                if final_only:  # nothing reads its accuracy before the end: no run is shared with a curve's
                    assert c.dataset != p.accuracy_dataset, (name, exp, c.name)
        # the cadence never splits a training that several experiments ask for into two
        same_cadence = {dataclasses.replace(c, eval_every=1).shared_id for c in configs}
        assert len({c.shared_id for c in configs}) == len(same_cadence), name


def test_prune_finetune_runs_wait_for_the_runs_they_need() -> None:
    from experiments import pareto

    configs = cli.resolve("pareto", pareto.runs, "local", None, "/tmp/unused")
    waves = cli.waves(configs)
    # the common starts, then every method from them, then prune-then-finetune (it matches H-SADMM's FLOPs)
    assert [sorted({c.method for c in w}) for w in waves] == [["ddp"], ["ddp", "hsadmm"], ["prune_finetune"]]
    assert sorted(c.name for c in waves[0]) == [f"start-resnet20-s{s}" for s in (0, 1, 2)]
    earlier = {c.name for c in waves[0] + waves[1]}
    for c in waves[1] + waves[2]:
        assert set(c.depends_on) <= earlier and c.init_from == f"start-resnet20-s{c.seed}"
        assert c.export and c.dataset == "fashion-mnist" and c.train_subset == 2000
        assert c.eval_every == pareto.FINAL_ONLY  # a point is a final model: nothing evaluated before it
    # the same SGD budget from the start for every method (epochs of one pass over the rank's shard each)
    budget = pareto.budget(profile("local"))
    assert budget.epochs == 6 and not budget.admm.stop_on_convergence
    for c in waves[1] + waves[2]:
        a = c.admm
        assert (a.iterations * a.local_epochs + a.retrain_epochs if c.method == "hsadmm" else c.epochs) == 6
    # a dependency that is already done (not in the list) does not hold a run back
    assert cli.waves(waves[2]) == [waves[2]]
    with pytest.raises(ConfigError, match="init-from"):
        dataclasses.replace(configs[0], method="prune_finetune")


def _every_run(profile_name: str, executor: str | None = None) -> list[RunConfig]:
    """Every experiment's runs of a profile, as `experiments.all` hands them to `cli.run_experiments`."""
    return [
        c
        for name in all_experiments.EXPERIMENTS
        for c in cli.resolve(name, importlib.import_module(f"experiments.{name}").runs, profile_name, executor, "/r")
    ]


@pytest.mark.parametrize("profile_name", PROFILE_NAMES)
def test_a_run_kept_for_an_equal_one_of_another_name_is_still_waited_for(profile_name: str) -> None:
    """One run per training keeps the first of equal runs, which may carry another experiment's name: the smoke
    profile's Pareto start is time_to_accuracy's DDP run. Its dependents must still come in a later wave. Before,
    they went in the same wave, and `./run_all.sh --profile smoke` on Slurm stopped at once with
    "--init-from start-resnet20-s0: ... is not a finished run (no DONE)"."""
    configs = _every_run(profile_name)
    unique: dict[Path, RunConfig] = {}
    for c in configs:
        unique.setdefault(run_dir_for(c), c)
    todo = list(unique.values())
    wave_of = {run_dir_for(c): w for w, wave in enumerate(cli.waves(todo, configs)) for c in wave}
    dir_of = {(c.experiment, c.name): run_dir_for(c) for c in configs}
    needs = [(c, d, dir_of[(c.experiment, d)]) for c in todo for d in c.depends_on]
    assert needs and all(wave_of[need] < wave_of[run_dir_for(c)] for c, d, need in needs)
    # the dependencies kept under another run's name: the case that stopped the smoke profile
    renamed = [(c.name, d) for c, d, need in needs if (unique[need].experiment, unique[need].name) != (c.experiment, d)]
    assert bool(renamed) == (profile_name == "smoke"), renamed


def test_a_failed_run_blocks_its_dependents_under_any_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """The blocked-by-failure rule also goes by run directory: the start fails under the name it was kept
    under, and the Pareto runs that start from it are not run (not launched to fail at `--init-from`)."""
    configs = _every_run("smoke", "slurm")
    starts = {run_dir_for(c) for c in configs if c.name.startswith("start-")}
    launched: list[str] = []

    def fake_wave(todo: list[RunConfig], slurm: object, **kw: object) -> list[tuple[str, str]]:
        """The launcher's part, not a collective: every run "succeeds" but the Pareto's start, which fails."""
        launched.extend(c.name for c in todo)
        return [(c.name, "failed here") for c in todo if run_dir_for(c) in starts]

    monkeypatch.setattr(cli, "_execute_wave", fake_wave)
    failures = dict(cli.execute(configs, cli.SlurmOptions()))
    pareto = [c.name for c in configs if c.experiment == "pareto" and c.depends_on]
    assert pareto and all(n not in launched for n in pareto), launched
    assert all(failures[n].startswith("not run: ") and failures[n].endswith(" failed") for n in pareto), failures


def test_exported_runs_bench_with_their_profiles_budget() -> None:
    """Every exported run times its inference for its profile's `bench_budget_s`, except the Pareto's one-machine
    points (1 s, their budget's). The smoke profile's 0.05 s was overridden by a Pareto default of 5 s until
    2026-11-27."""
    from experiments import pareto, sparsity_patterns

    for name in PROFILE_NAMES:
        p = profile(name)
        profiles = p.extra.get("bench_budget_s", RunConfig.bench_budget_s)
        want = 1.0 if name in ("local", "regime") else profiles
        configs = cli.resolve("pareto", pareto.runs, name, None, "results")
        assert {c.bench_budget_s for c in configs if c.export} == {want}, name
        (patterns,) = cli.resolve("sparsity_patterns", sparsity_patterns.runs, name, None, "results")
        assert patterns.export and patterns.bench_budget_s == profiles, name
    assert profile("smoke").extra["bench_budget_s"] < 1
