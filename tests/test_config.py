"""Bad input is a one-line error before anything is launched."""

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from prunex.methods.registry import OWN_METHODS_HINT
from prunex.run import main as run_main
from prunex.training.config import METHOD_NAMES, ADMMConfig, ConfigError, RunConfig, TopKConfig

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"method": "sgd"}, "unknown method 'sgd'"),
        ({"method": "ddp", "model": "vgg"}, "unknown model 'vgg'"),
        ({"method": "ddp", "dataset": "mnist"}, "unknown dataset 'mnist'"),
        ({"method": "ddp", "lr": -0.1}, "learning rate must be > 0"),
        ({"method": "ddp", "nodes": 0}, "impossible topology"),
        ({"method": "ddp", "name": "../escape"}, "invalid run name"),
        ({"method": "ddp", "name": "a b"}, "invalid run name"),
        ({"method": "ddp", "name": "x;rm"}, "invalid run name"),
        ({"method": "ddp", "executor": "debug", "nodes": 2}, "debug executor runs one process"),
    ],
)
def test_invalid_run_configs(kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        RunConfig(**kwargs)


@pytest.mark.parametrize("keep", [0.0, -0.5, 1.5, float("nan")])
def test_keep_rates_outside_unit_interval(keep: float) -> None:
    with pytest.raises(ConfigError, match=r"in \(0, 1\]|must be a finite number"):
        ADMMConfig(channel_keep=keep)
    with pytest.raises(ConfigError):
        TopKConfig(ratio=keep)


def test_bucket_size_zero() -> None:
    with pytest.raises(ConfigError, match=r"bucket size must be in \(0, "):
        ADMMConfig(bucket_mb=0)


def test_freeze_iteration_zero_is_refused() -> None:
    # T_freeze counts the iterations whose mask is recomputed: 0 would freeze the all-ones initial mask
    with pytest.raises(ConfigError, match="freeze_iteration must be >= 1, got 0 .*never prune"):
        ADMMConfig(freeze_iteration=0)
    assert ADMMConfig(freeze_iteration=1).freeze_iteration == 1


def test_admm_policies() -> None:
    with pytest.raises(ConfigError, match="momentum_policy must be one of carry, reset"):
        ADMMConfig(momentum_policy="keep")
    # BatchNorm statistics are averaged at every consensus only when evaluation does not re-estimate them
    assert not RunConfig(method="hsadmm").averages_bn_stats  # bn_batches 20
    assert RunConfig(method="hsadmm", bn_batches=0).averages_bn_stats
    forced = RunConfig(method="hsadmm", admm=ADMMConfig(average_bn_stats=True))
    assert forced.averages_bn_stats and RunConfig.from_dict(forced.to_dict()) == forced


def test_round_trip_and_diff() -> None:
    cfg = RunConfig(method="hsadmm", nodes=2, procs_per_node=2)
    assert RunConfig.from_dict(cfg.to_dict()) == cfg
    other = dataclasses.replace(cfg, admm=dataclasses.replace(cfg.admm, channel_keep=0.25), seed=3)
    assert cfg.diff(other) == ["admm.channel_keep", "seed"]
    assert cfg.batch_size == 32 and cfg.name == "hsadmm-resnet20-digits-2x2-s0"  # digits defaults


@pytest.mark.parametrize(
    "args, message",
    [
        (["--method", "nope"], "unknown method"),
        (["--method", "ddp", "--lr", "-1"], "learning rate"),
        (["--method", "hsadmm", "--channel-keep", "1.5"], "channel_keep must be in (0, 1]"),
        (["--method", "ddp", "--name", "../../x"], "invalid run name"),
        (["--method", "hsadmm", "--freeze-iteration", "0"], "freeze_iteration must be >= 1"),
        (["--method", "hsadmm", "--momentum-policy", "sometimes"], "momentum_policy must be one of"),
        (["--method", "ddp", "--checkpoint-every-min", "-1"], "checkpoint cadence must be >= 0"),
        (["--method", "ddp", "--experiment", "runs"], "reserved for the shared run directories"),
        (["--method", "ddp", "--init-from", "results/adhoc/start"], "is a path; it takes the name of a finished run"),
    ],
)
def test_cli_rejects_before_launch(tmp_path: Path, args: list[str], message: str, capsys) -> None:
    results = tmp_path / "results"
    assert run_main([*args, "--results", str(results)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], lines
    assert not results.exists()  # nothing launched, nothing written


def test_cli_refuses_a_run_directory_of_the_layout_before_shared_runs(tmp_path: Path, capsys) -> None:
    old = tmp_path / "r" / "adhoc" / "old"
    old.mkdir(parents=True)
    (old / "config.json").write_text("{}")
    assert run_main(["--method", "ddp", "--name", "old", "--results", str(tmp_path / "r")]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "layout before shared runs" in lines[0], lines
    assert (old / "config.json").read_text() == "{}"  # left alone


def test_cli_missing_dataset_and_unwritable_results(tmp_path: Path, capsys) -> None:
    args = ["--method", "ddp", "--dataset", "cifar10", "--data-root", str(tmp_path / "nodata")]
    assert run_main([*args, "--results", str(tmp_path / "r")]) == 2
    assert "python -m prunex.training.data download --root" in capsys.readouterr().err
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert run_main(["--method", "ddp", "--results", str(blocker / "r")]) == 2
    err = capsys.readouterr().err  # the file in the way is named: chmod would not help
    assert f"is not writable: {blocker} is a file, not a directory" in err and "chmod" not in err, err


def test_cli_module_runs_as_a_program() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "prunex.run", "--method", "nope"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    known = ", ".join(METHOD_NAMES)
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"error: unknown method 'nope'; known: {known} ({OWN_METHODS_HINT})"


def test_the_model_names_are_the_models_built() -> None:
    from prunex.training.config import MODEL_NAMES
    from prunex.training.models import MODELS

    assert sorted(MODEL_NAMES) == sorted(MODELS)


def test_the_launchers_import_no_torch() -> None:
    """`python -m prunex.run` and the experiment drivers refuse, wait and reattach without torch (a launch imports
    it in preflight, whose dataset and layer checks build what they check): a refusal took 1.3 s instead of 5.6 s
    on a 2-core VM once the checkpoint, topology and config modules no longer imported torch."""
    code = (
        "import sys, prunex.run, experiments.all; from prunex.training.config import RunConfig; "
        "RunConfig(method='ddp'); print([m for m in ('torch', 'torchvision') if m in sys.modules])"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "[]", proc.stdout + proc.stderr


# Every option name prunex.run had before its options were generated from the config's fields.
_OPTIONS_BEFORE = (
    "--method --model --dataset --data-root --nodes --procs-per-node --executor --results --experiment --name "
    "--epochs --batch-size --lr --momentum --weight-decay --seed --eval-every --bn-batches --num-workers "
    "--train-subset --collective-timeout-s --checkpoint-every-min --detach --iterations --local-epochs "
    "--freeze-iteration --freeze-patience --retrain-epochs --topk-warmup-epochs --prune-epochs --prune-every "
    "--channel-keep --filter-keep --shape-keep --bucket-mb --rho-intra --rho-inter --rho-max --topk-ratio "
    "--density --inter-latency-s --inter-bw-gbit --flops-keep --layers --momentum-policy --average-bn-stats "
    "--grad-dtype --topk-momentum-correction --link-model --init-from --flops-from --export --device --site "
    "--account --partition --time-min --gpus-per-node --gres --cpus-per-task --mem --sbatch"
).split()


def test_every_config_field_is_an_option_and_every_old_option_stays() -> None:
    from prunex.cluster.options import _nested, config_from_args, options
    from prunex.run import build_parser

    p = build_parser()
    flags = {s for a in p._actions for s in a.option_strings}
    assert set(_OPTIONS_BEFORE) <= flags
    fields = {f.name for f in dataclasses.fields(RunConfig)} - set(_nested()) - {"device"}
    fields |= {f"{s}.{f.name}" for s, cls in _nested().items() for f in dataclasses.fields(cls)}
    assert {o.dotted for o in options()} == fields and {o.flag for o in options()} <= flags
    argv = "--method topk --topk-ratio 0.1 --link-model alpha-beta --inter-bw-gbit 2 --lr 0.5"
    config = config_from_args(p.parse_args([*argv.split(), "--export", "--device", "cpu"]))
    expected = RunConfig(
        method="topk",
        lr=0.5,
        export=True,
        device="cpu",
        topk=TopKConfig(ratio=0.1),
        link=dataclasses.replace(RunConfig(method="ddp").link, model="alpha-beta", bandwidth_gbit=2.0),
    )
    assert config == expected
    # a section's options with a method that reads it (with another one: refused, tests/test_option_values.py)
    assert config_from_args(p.parse_args(["--method", "hsadmm", "--no-adaptive-rho"])) == RunConfig(
        method="hsadmm", admm=ADMMConfig(adaptive_rho=False)
    )
    ddp = RunConfig(method="ddp")
    assert config_from_args(p.parse_args(["--method", "ddp", "--bucket-cap-mb", "5"])) == dataclasses.replace(
        ddp, ddp=dataclasses.replace(ddp.ddp, bucket_cap_mb=5.0)
    )
    assert config_from_args(p.parse_args(["--method", "ddp"])) == RunConfig(method="ddp")  # unset: defaults


def test_a_multi_task_export_is_a_job_of_its_own_unless_its_nodes_share_one_machine() -> None:
    """Issue 27 (`prunex.training.export_step`): a run of several tasks exports in a one-task job after training,
    so its allocation is not held while one process works; a one-task run, and a run bound to cores (the regime
    profile: its nodes share one machine and its serial waves must not overlap), export in the training job."""
    import importlib

    from experiments.common import profile

    def job(**kw) -> bool:
        return RunConfig(method="hsadmm", export=True, **kw).export_job

    assert job(nodes=2, procs_per_node=2) and job(nodes=1, procs_per_node=2) and job(nodes=2, procs_per_node=1)
    assert not job(nodes=1, procs_per_node=1) and not job(nodes=2, procs_per_node=2, bind_cores=True)
    assert not RunConfig(method="hsadmm", nodes=2, procs_per_node=2).export_job
    pareto = importlib.import_module("experiments.pareto").runs
    exported = {name: [c for c in pareto(profile(name)) if c.export] for name in ("local", "regime", "paper")}
    assert all(exported.values())
    assert all(c.export_job for c in exported["local"] + exported["paper"])
    assert not any(c.export_job for c in exported["regime"])
