"""What Slurm is asked for (`prunex.cluster.slurm`, `prunex.cluster.sites`, `prunex.cluster.estimate`) and every
refusal before submission.

The golden file pins exactly what submitit receives for `--site puhti --account project_2001234` in
the paper profile, and the job script sbatch then gets for one run. After an intended change (site
file, perf model, profile): `PRUNEX_UPDATE_GOLDEN=1 pytest tests/test_slurm.py -k golden`, then
review the diff.
"""

import dataclasses
import importlib
import json
import os
import re
import stat
from pathlib import Path

import pytest
import submitit

from experiments import all as all_experiments
from experiments import cli
from prunex import run as prunex_run
from prunex.cluster.estimate import EstimateError, estimate_run
from prunex.cluster.executor import submitit_parameters
from prunex.cluster.sites import TimeLimitPolicy, load_site
from prunex.cluster.slurm import SlurmOptions, check_submission, executor_parameters, parse_sbatch
from prunex.training.config import ConfigError, RunConfig

GOLDEN = Path(__file__).parent / "golden" / "slurm_paper.json"
ACCOUNT = "project_2001234"
GOLDEN_ARGS = ["--profile", "paper", "--site", "puhti", "--account", ACCOUNT]
SCRIPT_RUN = ("time_to_accuracy", "hsadmm-resnet152")
SLURM_REFUSAL = "sbatch: error: Batch job submission failed: Invalid account or account/partition combination specified"


@pytest.fixture
def real_slurm_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """As on a cluster's login node: not the mini cluster, nothing from PRUNEX_SLURM_* or PRUNEX_SITE."""
    for k in list(os.environ):
        if k.startswith("PRUNEX_SLURM_") or k in ("PRUNEX_SITE", "PRUNEX_MINICLUSTER_DIR"):
            monkeypatch.delenv(k)


def _sbatch_script(params: dict, folder: Path) -> list[str]:
    """The job script submitit would hand to sbatch for these parameters (folder shown as <folder>)."""
    executor = submitit.AutoExecutor(folder=str(folder), cluster="slurm")
    executor.update_parameters(**params)
    text = executor._executor._make_submission_file_text(f"python -u -m submitit.core._submit {folder}", "uid")
    return [ln.replace(str(folder), "<folder>") for ln in text.splitlines() if ln.strip()]


def test_golden_submitit_parameters_of_the_paper_profile_on_puhti(real_slurm_env, tmp_path: Path) -> None:
    args = cli.parser("all", None).parse_args(GOLDEN_ARGS)
    slurm = cli.slurm_options(args)
    got: dict = {"command": "python -m experiments.all " + " ".join(GOLDEN_ARGS), "params": {}, "sbatch": {}}
    for name in all_experiments.EXPERIMENTS:
        module = importlib.import_module(f"experiments.{name}")
        configs = cli.resolve(name, module.runs, args.profile, args.executor, "r", device=args.device)
        got["params"][name] = {c.name: submitit_parameters(c, slurm)[0] for c in configs}
    params = got["params"][SCRIPT_RUN[0]][SCRIPT_RUN[1]]
    got["sbatch"]["/".join(SCRIPT_RUN)] = _sbatch_script(params, tmp_path / "submitit")
    if os.environ.get("PRUNEX_UPDATE_GOLDEN"):
        GOLDEN.write_text(json.dumps(got, indent=2, sort_keys=True) + "\n")
    golden = json.loads(GOLDEN.read_text())
    assert got["params"] == golden["params"]
    assert got["sbatch"] == golden["sbatch"]
    # what the golden file says, in words: a GPU per task, the site's resources, the account, a modelled limit
    for runs in got["params"].values():
        for p in runs.values():
            assert p["slurm_gres"] == f"gpu:v100:{p['tasks_per_node']}" and p["slurm_account"] == ACCOUNT
            assert p["slurm_partition"] == "gpu" and p["cpus_per_task"] == 10 and p["slurm_mem"] == "320G"
            assert 30 <= p["timeout_min"] <= 4320 and p["timeout_min"] % 10 == 0
    script = got["sbatch"]["/".join(SCRIPT_RUN)]
    assert "#SBATCH --gres=gpu:v100:4" in script and "module load pytorch" in script


def test_time_limit_follows_the_estimate_with_the_sites_margin() -> None:
    policy = TimeLimitPolicy(factor=2.0, add_min=20, round_min=10)
    assert policy.limit_min(600) == 40  # 2 x 10 min + 20
    assert policy.limit_min(601) == 50  # rounded up
    assert policy.limit_min(10 * 3600, max_min=4320) == 1220
    assert policy.limit_min(40 * 3600, max_min=4320) == 4320  # the partition's 3 days; requeue resumes the rest
    site = load_site("puhti")
    base = cli.resolve("strong_scaling", importlib.import_module("experiments.strong_scaling").runs, "paper", None, "r")
    small = next(c for c in base if c.name == "ddp-resnet152-2x4")
    large = next(c for c in base if c.name == "ddp-resnet152-16x4")
    e_small, e_large = (estimate_run(c, site.cluster, site.time_limit, site.max_time_min) for c in (small, large))
    # strong scaling: 8x the GPUs, compute-bound on Puhti's model: ~8x less training time
    assert 6.0 < e_small.train_s / e_large.train_s < 8.5
    assert e_small.time_limit_min == site.time_limit.limit_min(e_small.seconds, site.max_time_min)
    assert e_large.gpu_hours == pytest.approx(e_large.seconds * 64 / 3600)


def test_estimate_counts_retraining_and_evaluations() -> None:
    import dataclasses

    site = load_site("puhti")
    c = cli.resolve("residuals", importlib.import_module("experiments.residuals").runs, "paper", None, "r")[0]
    base = estimate_run(c, site.cluster)
    more = estimate_run(dataclasses.replace(c, admm=dataclasses.replace(c.admm, retrain_epochs=4)), site.cluster)
    assert more.train_s > base.train_s and more.eval_s > base.eval_s
    fewer_evals = estimate_run(dataclasses.replace(c, eval_every=4), site.cluster)
    assert fewer_evals.eval_s == pytest.approx(base.eval_s / 4) and fewer_evals.train_s == base.train_s


def test_model_without_a_compute_time_needs_a_given_time_limit(real_slurm_env) -> None:
    config = RunConfig(method="ddp", model="resnet20", dataset="cifar10", executor="slurm", nodes=2, procs_per_node=4)
    with pytest.raises(EstimateError, match="no compute_s_per_sample for 'resnet20'"):
        estimate_run(config, "puhti")
    site = load_site("puhti")
    with pytest.raises(ConfigError, match="give --time-min"):
        executor_parameters(config, SlurmOptions(site=site, account="a"))
    assert executor_parameters(config, SlurmOptions(site=site, account="a", time_min=90))["timeout_min"] == 90


def test_options_override_the_site_and_cpu_runs_ask_for_no_gpu(real_slurm_env) -> None:
    site = load_site("puhti")
    gpu = RunConfig(method="ddp", executor="slurm", nodes=2, procs_per_node=2, dataset="cifar10", model="resnet18")
    p = executor_parameters(gpu, SlurmOptions(site=site, partition="gputest", gres="gpu:v100:2,nvme:10", mem="64G"))
    assert (p["slurm_partition"], p["slurm_gres"], p["slurm_mem"]) == ("gputest", "gpu:v100:2,nvme:10", "64G")
    assert executor_parameters(gpu, SlurmOptions(site=site))["slurm_gres"] == "gpu:v100:2"  # one GPU per task
    cpu = RunConfig(method="ddp", executor="slurm", device="cpu", dataset="cifar10", model="resnet18")
    assert "slurm_gres" not in executor_parameters(cpu, SlurmOptions(site=site))
    assert executor_parameters(cpu, SlurmOptions())["timeout_min"] == 60  # no site: nothing to estimate from
    assert executor_parameters(gpu, SlurmOptions())["gpus_per_node"] == 2  # no site: still a GPU per task


def test_sbatch_passthrough_reaches_the_job_script(real_slurm_env, tmp_path: Path) -> None:
    args = cli.parser("x", None).parse_args(["--sbatch", "qos=normal", "--sbatch", "exclusive", "--account", "a"])
    slurm = cli.slurm_options(args)
    assert slurm.sbatch == (("qos", "normal"), ("exclusive", True))
    config = RunConfig(method="ddp", executor="slurm", device="cpu")
    script = _sbatch_script(submitit_parameters(config, slurm)[0], tmp_path / "s")
    assert "#SBATCH --qos=normal" in script and "#SBATCH --exclusive" in script
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        parse_sbatch(["qos="])
    # an option prunex sets itself would override what the dry run prints (review, 2026-11-28): refused
    for item, instead in (("time=10", "--time-min"), ("--gres=gpu:v100:1", "--gres"), ("array=0-3", "one array")):
        with pytest.raises(ConfigError, match=f"prunex sets .* itself .*{instead}"):
            parse_sbatch([item])


def test_unknown_site_is_one_line_naming_the_known_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="known sites: puhti"):
        load_site("nowhere")
    monkeypatch.setenv("PRUNEX_SITE", "nowhere")
    with pytest.raises(ConfigError, match="no site file"):
        SlurmOptions()


@pytest.mark.parametrize(
    "change, message",
    [
        ({"slurm": []}, "'slurm' must be an object"),
        ({"env": ["A=1"]}, "'env' must be an object"),
        ({"time_limit": 5}, "'time_limit' must be an object"),
        ({"slurm": {"gres": 4}}, "slurm.gres must be a string"),
    ],
)
def test_a_site_file_of_the_wrong_shape_is_one_line(tmp_path: Path, change: dict, message: str) -> None:
    """Review (2026-11-28): these gave an AttributeError traceback."""
    raw = json.loads((Path(load_site("puhti").path)).read_text()) | change
    path = tmp_path / "site.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(ConfigError, match=message):
        load_site(path)


def test_a_site_naming_a_missing_cluster_file_is_one_line(tmp_path: Path) -> None:
    """Review (2026-11-28): an uncaught CalibrationError, even in --dry-run."""
    raw = json.loads((Path(load_site("puhti").path)).read_text()) | {"cluster": "nope"}
    path = tmp_path / "site.json"
    path.write_text(json.dumps(raw))
    config = RunConfig(method="ddp", executor="slurm", dataset="cifar10", model="resnet18")
    with pytest.raises(ConfigError, match="its cluster file"):
        executor_parameters(config, SlurmOptions(site=load_site(path)))


# ------------------------------------------------------------------------------------ refusals, end to end
def _run_argv(data_root: Path, results: Path, *extra: str) -> list[str]:
    return ["--method", "ddp", "--executor", "slurm", "--data-root", str(data_root), "--results", str(results), *extra]


def test_no_account_on_a_real_slurm_is_refused_before_anything(real_slurm_env, data_root, tmp_path, capsys) -> None:
    results = tmp_path / "r"
    assert prunex_run.main(_run_argv(data_root, results, "--device", "cpu")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--account is required" in err[0]
    assert not results.exists()  # nothing made, nothing submitted


def test_torch_without_kernels_for_the_sites_gpu_is_refused(real_slurm_env, data_root, tmp_path, capsys) -> None:
    import torch

    site = load_site("puhti")
    config = RunConfig(method="ddp", executor="slurm", dataset="cifar10", model="resnet18")
    if torch.cuda.is_available() or any(a in ("sm_70", "compute_70") for a in torch.cuda.get_arch_list()):
        pytest.skip("this torch or host decides the arch check itself; tests/test_compat.py fakes it")
    with pytest.raises(ConfigError, match="none of which runs on puhti's Tesla V100"):
        check_submission(config, SlurmOptions(site=site, account="a"))


@pytest.mark.parametrize(
    ("visible", "topology", "export", "refused"),
    [
        (0, (1, 1), False, "runs 1 process(es) on this machine, where torch"),
        (1, (1, 2), False, "runs 2 process(es) on this machine, where torch"),
        (1, (2, 2), False, "runs 4 process(es) on this machine, where torch"),
        (1, (1, 2), True, ""),  # its export job: one process
        (2, (1, 2), False, ""),
        (4, (2, 2), False, ""),
    ],
)
def test_a_local_cuda_run_this_machine_cannot_place_is_refused_before_its_launch(
    visible: int, topology: tuple[int, int], export: bool, refused: str, monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    """Review (2026-12-08): `--device cuda` on the local or debug executor, on a machine with fewer GPUs than the
    job's processes, was launched, made its run directory, and every rank stopped at start. What torch reports of
    this machine's GPUs is set here (`torch.cuda.is_available`, `device_count`): the rule, on any host."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: visible > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: visible)
    nodes, per_node = topology
    for executor in ("local", "debug") if topology == (1, 1) else ("local",):
        config = RunConfig(
            method="ddp", executor=executor, device="cuda", nodes=nodes, procs_per_node=per_node, results=str(tmp_path)
        )
        if refused:
            with pytest.raises(
                ConfigError, match="^" + re.escape(f"--device cuda on the {executor} executor {refused}")
            ) as e:
                check_submission(config, export=export)
            assert str(e.value).endswith(
                "each needs a GPU of its own: run with --device cpu, or on a cluster with --executor slurm"
            )
            assert ("sees no CUDA GPU" if visible == 0 else f"sees {visible} GPU(s)") in str(e.value)
        else:
            check_submission(config, export=export)
        check_submission(dataclasses.replace(config, device="cpu"))  # the CPU needs none
    assert not list(tmp_path.iterdir())


def test_a_trained_local_cuda_run_needs_a_gpu_for_its_export_job_only(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A run of 2 processes that trained elsewhere (TRAINED) goes on with its export job of one process: one GPU."""
    import torch

    from prunex.cluster.rundir import run_dir_for

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    config = RunConfig(method="ddp", executor="local", device="cuda", procs_per_node=2, results=str(tmp_path))
    with pytest.raises(ConfigError, match="runs 2 process"):  # its training job: 2
        check_submission(config)
    run_dir_for(config).mkdir(parents=True)
    (run_dir_for(config) / "TRAINED").write_text("")
    check_submission(config)


def test_a_local_cuda_run_on_a_cpu_host_makes_nothing(data_root: Path, tmp_path: Path, capsys) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this host has a GPU; the rule itself is tested on any host above")
    results = tmp_path / "r"
    argv = ["--method", "ddp", "--device", "cuda", "--data-root", str(data_root), "--results", str(results)]
    assert prunex_run.main(argv) == 2
    (err,) = capsys.readouterr().err.strip().splitlines()
    assert err.startswith("error: --device cuda on the local executor runs 1 process(es) on this machine"), err
    assert not results.exists()


def test_cuda_on_the_mini_cluster_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRUNEX_MINICLUSTER_DIR", "/tmp/some-cluster")
    with pytest.raises(ConfigError, match="mini cluster has no GPUs"):
        check_submission(RunConfig(method="ddp", executor="slurm"), SlurmOptions())
    check_submission(RunConfig(method="ddp", executor="slurm", device="cpu"), SlurmOptions())  # no account needed


def test_slurm_limits_out_of_range_are_refused_before_anything() -> None:
    """Review (2026-11-28): a time limit over the site's partition limit went out as it was (sbatch refuses it or the
    job pends for ever), negative CPUs passed through, and a cuda run with --gpus-per-node 0 asked for no GPU."""
    site = load_site("puhti")
    with pytest.raises(ConfigError, match="over site puhti's limit of 4320 minutes"):
        SlurmOptions(site=site, time_min=5000)
    assert SlurmOptions(site=site, time_min=4320).time_min == 4320
    with pytest.raises(ConfigError, match="--cpus-per-task must be >= 1"):
        SlurmOptions(cpus_per_task=-3)
    with pytest.raises(ConfigError, match="--gpus-per-node must be >= 0"):
        SlurmOptions(gpus_per_node=-1)
    for mem in ("lots", "320 G", "-1G", "1.5G", ""):  # 2026-12-07: passed on to sbatch, which refused the job
        with pytest.raises(ConfigError, match="a size as sbatch takes it"):
            SlurmOptions(mem=mem)
    assert [SlurmOptions(mem=m).mem for m in ("320G", "64000", "1t")] == ["320G", "64000", "1t"]
    with pytest.raises(ConfigError, match="asks for no GPU"):
        check_submission(
            RunConfig(method="ddp", executor="slurm", device="cuda"), SlurmOptions(account="a", gpus_per_node=0)
        )


def test_more_than_the_sites_nodes_hold_is_refused_before_the_queue() -> None:
    """Review (2026-12-07): clusters/sites/puhti.json says its nodes have 4 GPUs and its partition takes 20 nodes a job;
    8 tasks per node (gres gpu:v100:8) or 32 nodes went out to sbatch, to be refused or to pend for ever."""
    site = load_site("puhti")
    slurm = SlurmOptions(site=site, account="a")
    run = RunConfig(method="ddp", executor="slurm", device="cuda", dataset="cifar10", model="resnet18")
    with pytest.raises(ConfigError, match="^8 tasks per node on cuda, and site puhti's nodes have 4 GPUs"):
        check_submission(dataclasses.replace(run, nodes=2, procs_per_node=8), slurm)
    with pytest.raises(ConfigError, match="^32 nodes: site puhti's partition gpu takes at most 20 per job"):
        check_submission(dataclasses.replace(run, nodes=32, procs_per_node=4), slurm)
    # another partition, given by name, has limits the site file does not hold; and on the CPU no GPU is asked for
    for config, options in (
        (dataclasses.replace(run, nodes=32, procs_per_node=4), SlurmOptions(site=site, account="a", partition="big")),
        (dataclasses.replace(run, nodes=2, procs_per_node=8, device="cpu"), slurm),
        (dataclasses.replace(run, nodes=20, procs_per_node=4), slurm),
    ):
        try:
            check_submission(config, options)
        except ConfigError as e:  # this host's torch has no V100 kernels (sm_70): refused for that, not the site
            assert "sm_70" in str(e), e


@pytest.mark.parametrize(
    ("options", "given"),
    [({"gres": "gpu:v100:2"}, "--gres gpu:v100:2"), ({"gpus_per_node": 2}, "--gpus-per-node 2"), ({"gres": "gpu"}, "")],
)
def test_fewer_gpus_on_a_node_than_its_cuda_tasks_are_refused(options: dict, given: str) -> None:
    """Review (2026-12-07): `--gres gpu:v100:2` for 4 tasks per node went out; every rank then stopped in the job
    (`prunex.training.device.cuda_index`: 4 processes but 2 GPUs visible to each). A GPU per task is checked before."""
    config = RunConfig(method="ddp", executor="slurm", device="cuda", nodes=2, procs_per_node=4)
    with pytest.raises(ConfigError, match=f"^{given}.* GPU\\(s\\) for its 4 tasks on cuda, and each task needs one"):
        check_submission(config, SlurmOptions(account="a", **options))
    for fine in (
        {"gres": "gpu:v100:4"},
        {"gpus_per_node": 4},
        {"gres": "gpu:v100:2", "sbatch": (("gpus-per-task", "1"),)},
    ):
        try:
            check_submission(config, SlurmOptions(account="a", **fine))
        except ConfigError as e:  # this host's torch or Python may be refused; not for its GPUs per node
            assert "tasks on cuda" not in str(e), (fine, e)
    check_submission(dataclasses.replace(config, device="cpu"), SlurmOptions(account="a", gres="gpu:v100:2"))


def _fake_sbatch(folder: Path) -> Path:
    """An `sbatch` that refuses every job the way Slurm does (message on stderr, exit code 1)."""
    folder.mkdir()
    script = folder / "sbatch"
    script.write_text(f"#!/bin/sh\necho '{SLURM_REFUSAL}' >&2\nexit 1\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return folder


def test_sbatch_refusal_is_one_line_with_slurms_message(
    real_slurm_env, data_root, tmp_path, capsys, monkeypatch
) -> None:
    monkeypatch.setenv("PATH", f"{_fake_sbatch(tmp_path / 'bin')}{os.pathsep}{os.environ['PATH']}")
    argv = _run_argv(data_root, tmp_path / "r", "--device", "cpu", "--account", "nosuchproject")
    assert prunex_run.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("error: sbatch refused run ddp-resnet20-digits-1x1-s0: ") and SLURM_REFUSAL in err[0]


def test_sbatch_refusal_of_a_job_array_is_one_line(real_slurm_env, data_root, tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("PATH", f"{_fake_sbatch(tmp_path / 'bin')}{os.pathsep}{os.environ['PATH']}")
    runs = importlib.import_module("experiments.latency").runs
    argv = ["--profile", "smoke", "--executor", "slurm", "--account", "x", "--results", str(tmp_path / "r")]
    assert cli.main("latency", runs, None, argv) == 2
    err = [ln for ln in capsys.readouterr().err.strip().splitlines() if ln]
    assert len(err) == 1 and "sbatch refused the 3 runs of latency" in err[0] and SLURM_REFUSAL in err[0], err


def test_a_submission_refused_part_way_cancels_what_it_submitted(
    real_slurm_env, data_root, tmp_path, capsys, monkeypatch
) -> None:
    """Review (2026-11-28): when sbatch accepted the first array and refused the next, the first kept running
    with nobody waiting for it. It is now cancelled, and the one-line error says so."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    sbatch = bin_dir / "sbatch"
    sbatch.write_text(
        f"#!/bin/sh\nif [ -e {calls}.first ]; then echo '{SLURM_REFUSAL}' >&2; exit 1; fi\n"
        f"touch {calls}.first\necho 'Submitted batch job 41'\n"
    )
    scancel = bin_dir / "scancel"
    scancel.write_text(f'#!/bin/sh\necho "$@" >> {calls}.scancel\n')
    for f in (sbatch, scancel):
        f.chmod(f.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    from prunex.cluster.launch import submit
    from prunex.cluster.slurm import SubmitError

    common = {"method": "ddp", "executor": "slurm", "device": "cpu", "data_root": str(data_root)}
    configs = [  # two shapes: two arrays, the first accepted, the second refused
        RunConfig(**common, name=f"n{n}", nodes=n, results=str(tmp_path / "r"), epochs=1) for n in (1, 2)
    ]
    from prunex.cluster.rundir import run_dir_for

    for c in configs:
        run_dir_for(c).mkdir(parents=True)
    with pytest.raises(SubmitError) as refused:
        submit(configs, SlurmOptions(account="x"), tmp_path / "submitit", echo=False)
    message = str(refused.value)
    assert SLURM_REFUSAL in message and "cancelled the 1 job(s) it had submitted before: 41" in message, message
    assert (tmp_path / "calls.scancel").read_text().split() == ["41"]


def test_every_run_of_a_job_array_gets_its_own_time_limit(real_slurm_env, capsys) -> None:
    """Issue 27: a job array went out with its first run's limit (18 runs estimated at 50 min asked for 30).
    Runs are now grouped by their limit too, and the dry run prints each submission's limit: every run
    listed under a submission has that limit in its own parameters."""
    import re

    from prunex.cluster.launch import submission_key

    args = cli.parser("pareto", None).parse_args(GOLDEN_ARGS)
    slurm = cli.slurm_options(args)
    runs = importlib.import_module("experiments.pareto").runs
    configs = cli.resolve("pareto", runs, args.profile, args.executor, "r", device=args.device)
    cli.dry_run("pareto", configs, slurm)
    out = capsys.readouterr().out.splitlines()
    rows = [json.loads(ln) for ln in out if ln.startswith("{")]
    limits = {row["run"]: row["params"]["timeout_min"] for row in rows}
    # a multi-task run's --export is a one-task job of its own after training, with its own limit
    export_limits = {row["run"]: row["export_params"]["timeout_min"] for row in rows if "export_params" in row}
    submissions = [ln for ln in out if "] submission (wave" in ln and "export jobs" not in ln]
    exports = [ln for ln in out if "] submission (wave" in ln and "export jobs after training" in ln]
    assert len(set(limits.values())) > 1 and len(submissions) >= 4  # two limits in each of the two waves
    assert export_limits and exports
    for want, lines in ((limits, submissions), (export_limits, exports)):
        listed = []
        for line in lines:
            limit = int(re.search(r"time limit (\d+) min", line).group(1))
            names = line.split(" min: ", 1)[1].split(", ")
            assert {want[n] for n in names} == {limit}, line
            listed += names
        assert sorted(listed) == sorted(want)
    for row in rows:
        if "export_params" in row:  # one GPU of the site's kind, one task on one node, the memory of one GPU
            ex = row["export_params"]
            assert (ex["nodes"], ex["tasks_per_node"], ex["slurm_gres"]) == (1, 1, "gpu:v100:1"), ex
            assert ex["timeout_min"] == row["export_estimate"]["time_limit_min"]
    keys = {c.name: submission_key(c, slurm, "f") for c in configs}
    assert keys["ptf-resnet18-keep0.5-s0"] != keys["ptf-resnet152-keep0.5-s0"]


def test_a_pending_reason_is_named_only_where_the_queue_alone_does_not_clear_it() -> None:
    """`prunex.cluster.jobs.stuck_reason`, which the launcher's note on a pending job reads (the note itself:
    tests/minicluster/test_interrupt_minicluster.py)."""
    from prunex.cluster.jobs import stuck_reason

    cleared = ["Resources", "Priority", "Dependency", "None", "BeginTime", "AssocGrpCpuLimit", "QOSGrpNodeLimit", ""]
    for waits in [*cleared, "QOSMaxCpuPerUserLimit", "MaxCpuPerAccount"]:  # also what the others' running jobs use
        assert stuck_reason(waits) == "", waits
    assert stuck_reason("PartitionNodeLimit").startswith("more nodes than its partition gives a job")
    assert stuck_reason("PartitionTimeLimit") == "a longer time limit than its partition allows"
    for per_job in ("QOSMaxWallDurationPerJobLimit", "AssocMaxNodesPerJobLimit", "QOSMaxCpuPerNode"):
        assert stuck_reason(per_job) == "more than its account or QOS gives one job", per_job
