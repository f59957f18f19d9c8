"""Physical export (prunex.pruning.export), its channel analysis, the L1 baseline's masks and the inference bench."""

from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
import torch
from torch import nn

from prunex.bench import inference
from prunex.bench.inference import mask_randomly_
from prunex.pruning import export
from prunex.pruning.channels import UnsupportedGraph, removable_channels, trace_channels
from prunex.pruning.oneshot import apply_masks, l1_channel_masks, prune_to_flops
from prunex.training.config import RunConfig
from prunex.training.models import build_model

KINDS = {"filter": (0.5, 1.0), "channel": (1.0, 0.5), "both": (0.5, 0.5)}
X = torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(1))  # small images: a fast forward


@pytest.mark.parametrize("arch", ["resnet20", "resnet18", "resnet152", "wide_resnet50_2"])
def test_export_is_exact_and_smaller_for_every_mask_kind(arch: str) -> None:
    torch.manual_seed(0)
    base = build_model(arch).eval()
    for kind, (fk, ck) in KINDS.items():
        masked = mask_randomly_(copy.deepcopy(base), filter_keep=fk, channel_keep=ck, seed=3)
        small, res = export.compact(masked, measure=False)
        err, n = export.max_relative_error(masked, small, [X], torch.device("cpu"))
        assert n == 2 and err <= export.TOLERANCE, f"{arch} {kind}: relative error {err:.3g}"
        assert res.compact_params < res.dense_params, f"{arch} {kind}: nothing removed"
        assert 0 < res.mask_zeros_removed <= res.mask_zeros
        # the export keeps nothing that is removable: its own analysis finds nothing more to remove
        assert not any(bool(r.any()) for r in removable_channels(small).values()), f"{arch} {kind}"
        del masked, small


def test_filter_pruned_channels_stay_when_their_constant_is_read() -> None:
    """A zeroed filter whose BatchNorm shift is positive feeds relu(beta) > 0 to its reader: not removable."""
    model = build_model("resnet20").eval()
    conv, bn = model.layer1[0].conv1, model.layer1[0].bn1
    with torch.no_grad():
        conv.weight[0].zero_()
        conv.weight[1].zero_()
        bn.bias[0], bn.bias[1] = 0.3, -0.3  # channel 0 carries relu(0.3), channel 1 relu(-0.3) = 0
    small, _ = export.compact(model, measure=False)
    assert small.layer1[0].conv1.out_channels == 15  # only the channel that is identically zero went
    err, _ = export.max_relative_error(model, small, [X], torch.device("cpu"))
    assert err <= export.TOLERANCE


def test_a_layer_with_nothing_left_is_refused() -> None:
    model = build_model("resnet20").eval()
    with torch.no_grad():
        model.layer2[1].conv2.weight.zero_()
    with pytest.raises(export.ExportError, match=r"layer layer2\.1\.conv2\.weight: the mask removes every weight"):
        export.compact(model)


def test_the_cli_refuses_an_empty_layer_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "config.json").write_text(json.dumps(RunConfig(method="hsadmm").to_dict()))
    model = build_model("resnet20")
    with torch.no_grad():
        model.layer3[0].conv1.weight.zero_()
    torch.save(model.state_dict(), run_dir / "final_model.pt")
    (run_dir / "DONE").write_text("a finished run\n")
    assert export.main([str(run_dir)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "layer3.0.conv1.weight" in err[0] and not (run_dir / export.COMPACT_FILE).exists()
    assert export.main([str(tmp_path / "nowhere")]) == 2
    assert "not a run directory" in capsys.readouterr().err
    # a finished run whose folder keeps no model (saved logs): said so, not "has not finished" (2026-12-08)
    (run_dir / "final_model.pt").unlink()
    assert export.main([str(run_dir)]) == 2
    (err,) = capsys.readouterr().err.strip().splitlines()
    assert err.endswith(
        "no final_model.pt; the run finished, but its folder keeps no model, as saved logs do: export it where it ran"
    ), err
    (run_dir / "DONE").unlink()
    assert export.main([str(run_dir)]) == 2
    assert capsys.readouterr().err.strip().endswith("no final_model.pt (the run has not finished)")
    # a device that is none, or a GPU this process cannot see: one line, before the run's model is loaded
    bad = ["gpu", "cuda:99"] + ([] if torch.cuda.is_available() else ["cuda"])
    for device in bad:
        assert export.main([str(tmp_path / "nowhere"), "--device", device]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(
            f"error: --device {device!r}" if device == "gpu" else "error: --device"
        )
        assert "not a run directory" not in err[0]


def test_unknown_operations_are_refused() -> None:
    class Gate(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3)
            self.fc = nn.Linear(4, 2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(torch.sigmoid(self.conv(x)).mean((2, 3)))

    with pytest.raises(UnsupportedGraph, match="sigmoid"):
        trace_channels(Gate())


def test_the_exported_file_loads_in_a_fresh_process_without_prunex(tmp_path: Path) -> None:
    masked = mask_randomly_(build_model("resnet20").eval(), filter_keep=0.5, channel_keep=0.5, seed=5)
    small, _ = export.compact(masked, measure=False)
    path = export.save_program(small, tmp_path / "model.pt2")
    x = torch.randn(3, 3, 32, 32)
    torch.save({"x": x}, tmp_path / "x.pt")
    script = (
        "import sys, torch\n"
        "torch.set_grad_enabled(False)\n"  # inference, as a user runs it; the outputs carry no graph
        "m = torch.export.load(sys.argv[1]).module()\n"
        "x = torch.load(sys.argv[2])['x']\n"
        "loaded = [k for k in sys.modules if k.startswith('prunex')]\n"
        "torch.save({'y': m(x), 'y1': m(x[:1]), 'prunex': loaded}, sys.argv[3])\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    subprocess.run(
        [sys.executable, "-c", script, str(path), str(tmp_path / "x.pt"), str(tmp_path / "y.pt")],
        cwd=tmp_path,
        env=env,
        check=True,
        timeout=120,
    )
    out = torch.load(tmp_path / "y.pt")
    assert out["prunex"] == []
    with torch.no_grad():
        ref = masked(x)
    assert float((out["y"] - ref).abs().max() / ref.abs().max()) <= export.TOLERANCE
    assert torch.allclose(out["y1"], out["y"][:1], rtol=1e-5, atol=1e-6)  # the batch dimension is dynamic


def test_l1_masks_prune_internal_channels_to_the_flops_target() -> None:
    torch.manual_seed(0)
    dense = build_model("resnet20").eval()
    masks, keep, achieved = prune_to_flops(dense, 0.6)
    assert 0 < keep < 1 and achieved <= 0.6
    pruned = copy.deepcopy(dense)
    apply_masks(pruned, masks)
    small, res = export.compact(pruned)
    assert res.flops_fraction == pytest.approx(achieved)
    assert res.mask_zeros_removed == res.mask_zeros  # the L1 masks are exactly removable
    # a little more keep would exceed the target: the largest feasible uniform keep was found
    looser = copy.deepcopy(dense)
    apply_masks(looser, l1_channel_masks(dense, min(1.0, keep + 0.05)))
    assert export.compact(looser)[1].flops_fraction > 0.6
    # Li et al.: in every internal space, the kept filters have the largest L1 norms
    conv = dense.layer2[1].conv1.weight.detach()
    l1 = conv.abs().sum((1, 2, 3))
    kept = masks["layer2.1.conv1.weight"].flatten(1).any(1)
    assert l1[kept].min() >= l1[~kept].max()
    assert not masks["layer2.1.conv2.weight"][:, ~kept].any()  # the reader's slices go with them
    assert masks["layer2.1.conv2.weight"].flatten(1).any(1).all()  # shortcut-stream channels untouched


@pytest.mark.slow
def test_export_run_and_bench_write_their_tables(data_root: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "config.json").write_text(json.dumps(RunConfig(method="hsadmm", name="r").to_dict()))
    torch.manual_seed(0)
    model = inference.random_masked_model("resnet20", filter_keep=1.0, channel_keep=0.5)
    torch.save(model.state_dict(), run_dir / "final_model.pt")
    (run_dir / "DONE").write_text("a finished run\n")
    df = inference.bench_run(run_dir, device="cpu", budget_s=0.01)
    info = json.loads((run_dir / export.EXPORT_JSON).read_text())
    assert info["check_samples"] == 359 and info["max_rel_err"] <= export.TOLERANCE
    assert 0 < info["flops_fraction"] < 1 and info["params_fraction"] == info["compact_params"] / info["dense_params"]
    assert list(pd.read_parquet(run_dir / inference.INFERENCE_FILE).columns) == inference.COLUMNS
    assert set(df["batch"]) == set(inference.BATCHES) and set(df["variant"]) == {"dense", "compact"}
    comp = df[df["variant"] == "compact"]
    assert (comp["flops_ratio"] == info["flops_fraction"]).all() and (comp["repeats"] >= 3).all()
    assert (df["latency_ms"] > 0).all() and (df["threads"] == torch.get_num_threads()).all()


def test_analysis_reads_the_columns_the_bench_writes() -> None:
    from analysis.common import INFERENCE_COLUMNS

    assert INFERENCE_COLUMNS == inference.COLUMNS


def test_the_bench_cli_refuses_bad_input_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    bad = [
        [],  # neither a run nor --model
        ["--model", "resnet20"],  # no --out
        ["--model", "resnet21", "--out", str(tmp_path)],
        ["--model", "resnet20", "--out", str(tmp_path), "--channel-keep", "0"],
        ["--model", "resnet20", "--out", str(tmp_path), "--batches", "1,x"],
        [str(tmp_path / "nowhere")],
    ]
    for argv in bad:
        assert inference.main(argv) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: "), (argv, err)
    assert not (tmp_path / inference.INFERENCE_FILE).exists()


def test_export_refuses_a_damaged_truncated_or_unfinished_model(
    tmp_path: Path, capsys: pytest.CaptureFixture, fault_report
) -> None:
    """Issue 29: 4 KB overwritten inside final_model.pt was exported with different numbers (its exactness
    check compared against the damaged model); a truncated file was a traceback; a run without DONE was
    exported. The run writes final_model.pt's SHA-256 beside it (`prunex.pruning.export.write_checksum`)."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "config.json").write_text(json.dumps(RunConfig(method="hsadmm", name="r").to_dict()))
    torch.manual_seed(0)
    model = inference.random_masked_model("resnet20", filter_keep=1.0, channel_keep=0.5)
    weights = run_dir / "final_model.pt"
    torch.save(model.state_dict(), weights)
    export.write_checksum(weights)

    def refused() -> str:
        assert export.main([str(run_dir), "--check-samples", "8"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1, err
        return err[0]

    line = refused()
    assert "has not finished (no DONE)" in line
    fault_report("prunex.pruning.export of a run without DONE", None, line, "nothing written")
    (run_dir / "DONE").write_text("done\n")
    good = weights.read_bytes()
    damaged = bytearray(good)
    damaged[len(good) // 2 : len(good) // 2 + 4096] = bytes(4096)
    weights.write_bytes(bytes(damaged))
    line = refused()
    assert "do not match the checksum" in line and not (run_dir / export.COMPACT_FILE).exists()
    fault_report("prunex.pruning.export of a final_model.pt with 4 KB overwritten", None, line, "nothing written")
    weights.write_bytes(good[:1000])
    (run_dir / ("final_model.pt" + export.CHECKSUM_SUFFIX)).unlink()  # as a run from before checksums
    line = refused()
    assert "not a readable model" in line
    fault_report("prunex.pruning.export of a truncated final_model.pt without checksum", None, line, "nothing written")
    weights.write_bytes(good)
    assert export.main([str(run_dir), "--check-samples", "8"]) == 0


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="core binding is Linux-only")
def test_the_in_job_bench_gets_back_the_cores_a_bound_rank_gave_up(data_root: Path, tmp_path: Path) -> None:
    """--bind-cores pins each rank to one core with one thread; a one-task run's export and inference bench
    (in its training job, `prunex.training.export_step`) then run with every core the job had
    (`prunex.cluster.regime.release_core`). Bound, the bench's 2 OpenMP threads
    shared one core: ResNet-20 at batch 1 took ~560 ms in every regime run, 2.7 ms unbound."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "config.json").write_text(json.dumps(RunConfig(method="ddp", name="r").to_dict()))
    torch.save(build_model("resnet20").state_dict(), run_dir / "final_model.pt")
    export.write_checksum(run_dir / "final_model.pt")
    code = (
        "import json, os, sys, torch\n"
        "from pathlib import Path\n"
        "from prunex.cluster import regime\nfrom prunex.training import export_step\n"
        "before = os.sched_getaffinity(0)\n"
        "core = regime.bind_to_core(1)\n"
        "bound = (sorted(os.sched_getaffinity(0)), torch.get_num_threads(), regime.usable_cores())\n"
        "export_step.export_and_bench(Path(sys.argv[1]), torch.device('cpu'), 0.01, 4)\n"
        "print(json.dumps({'before': sorted(before), 'core': core, 'bound': bound,\n"
        "    'after': sorted(os.sched_getaffinity(0)), 'threads': torch.get_num_threads(),\n"
        "    'again': regime.release_core()}))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    res = subprocess.run(
        [sys.executable, "-c", code, str(run_dir)], capture_output=True, text=True, env=env, timeout=180
    )
    assert res.returncode == 0, res.stderr[-2000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    before = out["before"]
    assert out["bound"] == [[out["core"]], 1, 1] and out["core"] == before[1 % len(before)]
    assert out["after"] == before and out["threads"] == len(before) and out["again"] == len(before)
    rows = pd.read_parquet(run_dir / inference.INFERENCE_FILE)
    assert set(rows["batch"]) == {1, 4} and (rows["threads"] == len(before)).all()


def make_trained_run(config: RunConfig) -> Path:
    """What a training job of ``config`` (a run of several tasks with `--export`) leaves: the run directory with
    its config, a masked ResNet-20 as `final_model.pt` with its checksum, and the marker TRAINED."""
    from prunex.cluster.preflight import preflight
    from prunex.training.log import write_marker

    run_dir = preflight(config)
    (run_dir / "config.json").write_text(json.dumps(config.to_dict()))
    model = mask_randomly_(build_model("resnet20").eval(), filter_keep=0.5, channel_keep=0.5, seed=1)
    torch.save(model.state_dict(), run_dir / "final_model.pt")
    export.write_checksum(run_dir / "final_model.pt")
    write_marker(run_dir / "TRAINED")
    return run_dir


@pytest.mark.slow
def test_a_trained_run_is_relaunched_as_its_export_job_only(data_root: Path, tmp_path: Path) -> None:
    """Issue 27: `--export` held the whole allocation (the paper's Pareto: 64 GPUs) while rank 0 exported and
    benched. A run of several tasks now ends its training job TRAINED and the launcher submits an export job of
    one task (`prunex.training.export_step`; that chain, on Slurm: the mini cluster's back-to-back test). Here: a
    TRAINED run is launched; its export job fails on a damaged model (a one-line error naming the run; the run stays
    TRAINED); launched again once repaired, one job of one task exports, benches and marks it DONE, and nothing is
    trained again."""
    from prunex.cluster.launch import launch
    from prunex.cluster.lock import job_history

    config = RunConfig(
        method="hsadmm",
        nodes=1,
        procs_per_node=2,
        name="ex",
        export=True,
        bench_budget_s=0.01,
        bench_batch=4,
        executor="local",
        data_root=str(data_root),
        results=str(tmp_path / "r"),
    )
    assert config.export_job
    run_dir = make_trained_run(config)
    weights = (run_dir / "final_model.pt").read_bytes()

    # an export job that fails (4 KB of the model overwritten: its checksum refuses it) leaves the run TRAINED
    damaged = bytearray(weights)
    damaged[len(weights) // 2 : len(weights) // 2 + 4096] = bytes(4096)
    (run_dir / "final_model.pt").write_bytes(bytes(damaged))
    with pytest.raises(RuntimeError) as failed:
        launch(config, echo=False)
    message = str(failed.value)
    assert "run ex failed" in message and "do not match the checksum" in message and "\n" not in message, message
    assert (run_dir / "TRAINED").exists() and not (run_dir / "DONE").exists()
    assert not any((run_dir / f).exists() for f in (export.EXPORT_JSON, export.COMPACT_FILE))

    (run_dir / "final_model.pt").write_bytes(weights)  # repaired: the same command again exports it
    assert launch(config, echo=False) == run_dir
    assert (run_dir / "DONE").exists() and not (run_dir / "TRAINED").exists()
    assert all((run_dir / f).exists() for f in (export.EXPORT_JSON, export.COMPACT_FILE, inference.INFERENCE_FILE))
    jobs = job_history(run_dir)
    assert [j["tasks"] for j in jobs] == [1, 1], jobs
    log = "".join(p.read_text() for p in Path(jobs[1]["folder"]).glob(f"{jobs[1]['job_id']}_0_log.out"))
    assert "] export: " in log and "] inference:" in log, log[-2000:]
    # each bench line a progress line of its own, which the launcher echoes (before, it showed "inference:" alone)
    shown = [ln for ln in log.splitlines() if ln.startswith(f"[{run_dir.name}] inference: ")]
    assert [b for b in ("batch 1:", "batch 4:") if any(b in ln for ln in shown)] == ["batch 1:", "batch 4:"], log
    assert (run_dir / "final_model.pt").read_bytes() == weights and not (run_dir / "checkpoints").exists()
    summary = json.loads((run_dir / export.EXPORT_JSON).read_text())
    assert summary["compact_params"] < summary["dense_params"], summary
    assert launch(config, echo=False) == run_dir and len(job_history(run_dir)) == 2  # DONE: nothing submitted


@pytest.mark.slow
def test_a_failed_in_job_export_is_relaunched_as_the_export_alone(
    data_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review (2026-11-28): a run that exports in its training job (one task here; `--bind-cores` runs too) wrote
    TRAINED only never, so a failed export was relaunched as a training job that trained the run again (from a
    checkpoint, or from scratch after its logs were cleared). It is now saved and TRAINED before its export, and
    a relaunch submits the export job alone: nothing is trained again."""
    from prunex.cluster.launch import launch
    from prunex.cluster.lock import job_history
    from prunex.cluster.rundir import run_dir_for

    config = RunConfig(
        method="ddp",
        epochs=1,
        name="inj",
        export=True,
        bench_budget_s=0.01,
        bench_batch=4,
        train_subset=64,
        bn_batches=1,
        executor="local",
        data_root=str(data_root),
        results=str(tmp_path / "r"),
    )
    assert not config.export_job  # one task: the export runs in the training job
    monkeypatch.setenv("PRUNEX_FAULT_EXPORT_FAIL", "1")
    with pytest.raises(RuntimeError, match="fault injection: the export fails"):
        launch(config, echo=False)
    run_dir = run_dir_for(config)
    assert (run_dir / "TRAINED").exists() and not (run_dir / "DONE").exists()
    assert not (run_dir / "checkpoints").exists() and (run_dir / "final_model.pt").exists()
    weights, steps = (run_dir / "final_model.pt").read_bytes(), pd.read_parquet(run_dir / "steps.parquet")

    monkeypatch.delenv("PRUNEX_FAULT_EXPORT_FAIL")
    assert launch(config, echo=False) == run_dir
    assert (run_dir / "DONE").exists() and not (run_dir / "TRAINED").exists()
    assert (run_dir / export.EXPORT_JSON).exists() and (run_dir / inference.INFERENCE_FILE).exists()
    assert [j["tasks"] for j in job_history(run_dir)] == [1, 1]
    log = "".join(p.read_text() for p in (run_dir / "submitit").glob("*_log.out"))
    assert log.count("exported and benched: done") == 1, log[-2000:]  # the second job: prunex.training.export_step
    assert (run_dir / "final_model.pt").read_bytes() == weights
    pd.testing.assert_frame_equal(pd.read_parquet(run_dir / "steps.parquet"), steps)


def _interrupted_export(
    data_root: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    stop: Callable[[RunConfig, Path], object],
) -> None:
    """A TRAINED 1 x 2 run (`make_trained_run`) whose export job gets SIGINT right after its submission, inside
    ``stop(config, run_dir)`` (a launch of it): ``stop`` must raise `Interrupted` with the export job cancelled and
    gone, and the run must stay TRAINED."""
    from prunex.cluster import interrupt, jobs
    from prunex.cluster import launch as launcher
    from prunex.cluster.lock import job_history

    config = RunConfig(
        method="hsadmm",
        nodes=1,
        procs_per_node=2,
        name=name,
        export=True,
        executor="local",
        data_root=str(data_root),
        results=str(tmp_path / "r"),
    )
    run_dir = make_trained_run(config)
    submit_and_record = launcher._submit_and_record

    def interrupted_after(*args: object, **kwargs: object) -> list:
        out = submit_and_record(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGINT)  # handled now: deferred until the job is among the launcher's
        return out

    monkeypatch.setattr(launcher, "_submit_and_record", interrupted_after)
    with interrupt.interruptible(), pytest.raises(interrupt.Interrupted) as stopped:
        stop(config, run_dir)
    assert "interrupted" in str(stopped.value), stopped.value
    (record,) = job_history(run_dir)  # the export job, the only one submitted for the run here
    assert record["tasks"] == 1
    assert jobs.state(jobs.JobRecord(**record)) == jobs.GONE  # cancelled and waited for, not left running
    assert (run_dir / "TRAINED").exists() and not (run_dir / "DONE").exists()


def test_an_interrupt_while_the_export_job_is_submitted_cancels_it(
    data_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C while a job is being submitted waits until it is submitted and recorded (`interrupt.deferred`), then
    cancels it. The wait used to end inside the submission, before the job was among those the launcher cancels:
    the job ran on, unwaited, and its run's claim was released. Here the launch of a TRAINED run (`submit`)."""
    from prunex.cluster.launch import launch

    _interrupted_export(data_root, tmp_path, monkeypatch, "ix", lambda config, _: launch(config, echo=False))


def test_an_interrupt_while_the_export_job_is_submitted_after_training_cancels_it(
    data_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same in `wait_all`, where a training job that ended TRAINED gets its export job: a finished two-task job
    that trained nothing stands for the run's training job."""
    import functools

    from prunex.cluster import jobs
    from prunex.cluster.launch import Submitted, wait_all

    def after_training(config: RunConfig, run_dir: Path) -> object:
        executor = jobs.LocalGroupExecutor(folder=str(tmp_path / "trained"))
        executor.update_parameters(tasks_per_node=2, timeout_min=2)
        trained = executor.submit(functools.partial(int, 0))
        assert trained.results() == [0, 0]
        return wait_all([Submitted(config, run_dir, trained, jobs.record_of(trained, "local", 2))], echo=False)

    _interrupted_export(data_root, tmp_path, monkeypatch, "iw", after_training)
