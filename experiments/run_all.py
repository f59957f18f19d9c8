"""`python -m experiments.run_all`: the suite's one entry point, what `./run_all.sh` hands over to.

`./run_all.sh` keeps only what must be shell, the environment bootstrap (choosing or building the Python:
none with the packages may exist yet), and then `exec`s this module with its own arguments:

    python -m experiments.run_all test [PYTEST ARGS]     # ruff, compileall, pytest with xdist
    python -m experiments.run_all --check [ARGS]         # the preflight check: python -m experiments.doctor ARGS
    python -m experiments.run_all --figures-only [--results DIR] [--out DIR]
    python -m experiments.run_all [--profile P] [--results DIR] ...   # the main job (see --help)

Run directly, it needs an environment that is already set up (the main job's packages, the checkout on
PYTHONPATH is added for its children); `./run_all.sh` is the command the documentation shows. Relative paths
are read from the checkout's root, as `./run_all.sh` always did (it starts with `cd` there).

Each step is a child process (`sys.executable -m MODULE`), as the shell job ran them; the mini Slurm
cluster's client environment (`python -m prunex.minicluster env`) goes into the environment of the children
started after it. Signals: while a child runs, SIGINT and SIGTERM received here are forwarded to it (a
repeated one again) and the child is waited for; a step the job cannot go on without then ends this program
with 128 + the signal's number, the experiments' exit status is reported as it is ("no figures drawn").
With no child running, a signal ends the program with 128 + its number. A mini cluster brought up here is
brought down whatever happens (a `finally`).

Only the standard library is imported here, so that `--help` is instant and runs on any python3 >= 3.7.
"""

from __future__ import annotations

import fnmatch
import json
import os
import platform
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

USAGE = """\
usage: ./run_all.sh [test [PYTEST ARGS]] [--profile smoke|local|regime|paper] [--executor debug|local|slurm]
                    [--results DIR] [--only EXPERIMENT] [--detach] [--submit-driver]
                    [--site NAME] [--account PROJECT] [--device auto|cuda|cpu] [--partition P]
                    [--time-min N] [--gres G] [--cpus-per-task N] [--mem M] [--sbatch KEY=VALUE]
       ./run_all.sh --figures-only [--results DIR] [--out DIR]
       ./run_all.sh --check [the options of python -m experiments.doctor]
       ./run_all.sh -h|--help
With no option: every experiment, then every figure and the claims report, drawn into RESULTS/figures
(RESULTS: results/PROFILE) once every run has finished; a failed or interrupted main job draws nothing.
The local and regime profiles also run experiments.wire_dtype (bf16 on the wire beside fp32, issue 18).
The profile is `paper` on a real Slurm cluster and `regime` elsewhere (on a mini Slurm cluster where
root allows): the local runs with the inter-node link rate at which DDP communicates for the share of
an iteration it does in the paper (probed first, kept in RESULTS/regime.json; prunex/cluster/regime.py);
`--profile local` is the compute-bound 1 Gbit/s profile; the regime profile runs the Pareto (whose accuracies
do not depend on the link) last, at that 1 Gbit/s. On a real Slurm cluster the preflight check
(python -m experiments.doctor) runs first and nothing is submitted unless it passes; --check runs only
that check. Running the same command again resumes: finished runs are skipped, queued or running Slurm
jobs reattached. Ctrl-C cancels the jobs (--detach: leaves Slurm jobs running).
--submit-driver sends this driver itself to Slurm as a one-core job (for login nodes that end long
processes); its log is RESULTS/driver-JOBID.out.
--figures-only draws the figures from saved logs without training: by default the committed
figures/ from saved-logs/local and figures/regime/ from saved-logs/regime; with --results DIR into
DIR/figures (or --out DIR).
./run_all.sh sets the environment up, then runs python -m experiments.run_all with the same arguments
(in an environment already set up, that command runs the same jobs).
Environment: PRUNEX_PYTHON=/path/to/python names the Python to use; PRUNEX_SITE, PRUNEX_SLURM_*.
"""

CLUSTER_OPTIONS = (
    "--site",
    "--account",
    "--device",
    "--partition",
    "--time-min",
    "--gres",
    "--gpus-per-node",
    "--cpus-per-task",
    "--mem",
    "--sbatch",
)
OWN_OPTIONS = ("--profile", "--executor", "--results", "--only", "--out")  # the values this job reads itself
FLAGS = ("--figures-only", "--detach", "--submit-driver")
CLUSTER_DIR = ROOT / ".prunex-cluster"
# The local profile's inter-node link as a tc rate (experiments/common.py LOCAL_TC_RATE; only the standard library
# is imported here): the mini cluster's rate for `local`, and for the regime profile's link-free experiments.
LOCAL_INTER_BW = "1gbit"
LINK_FREE = ("pareto",)  # experiments/common.py LINK_FREE: run apart, last, at LOCAL_INTER_BW in the regime profile


def say(msg: str) -> None:
    print(f"[run_all] {msg}", flush=True)


def err(msg: str) -> None:
    print(f"[run_all] error: {msg}", file=sys.stderr, flush=True)


def py(module: str, *args: str) -> list[str]:
    """`python -m module args` with this interpreter (the one ./run_all.sh chose)."""
    return [sys.executable, "-m", module, *args]


class Children:
    """The child processes of this entry point, their environment, and what SIGINT and SIGTERM do meanwhile.

    `run` is the shell job's `run_child`: the signal is forwarded, the child waited for, its exit status
    returned and the job goes on with it. `step` is one of its foreground commands: a signal received while
    it ran ends this program with 128 + its number once the step has ended (bash ran its trap then).
    """

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.proc: subprocess.Popen | None = None
        self.starting = False  # between the fork and `self.proc`: a signal waits for the child
        self.pending: list[int] = []
        self.received: int | None = None  # the last signal received while the current child ran
        self.closing = False
        self.cluster_dir: Path | None = None  # a mini cluster that is up (or being brought up): down at the end

    def install(self) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            if signal.getsignal(sig) is not signal.SIG_IGN:  # ignored when started so (a background job): kept
                signal.signal(sig, self._handler)

    def _handler(self, signum: int, frame: object) -> None:
        if self.starting:
            self.pending.append(signum)
            return
        proc = self.proc
        if proc is not None and proc.returncode is None:
            self.received = signum
            try:
                os.kill(proc.pid, signum)
            except ProcessLookupError:  # it has just ended; its status is being read
                pass
            return
        if self.closing:  # bringing the mini cluster down: finished once started
            return
        raise SystemExit(128 + signum)

    def _run(self, cmd: list[str], stdout: int | None = None, stderr: int | None = None) -> tuple[int, str]:
        self.received = None
        self.starting = True
        try:
            self.proc = subprocess.Popen(cmd, env=self.env, stdout=stdout, stderr=stderr, text=True)
        finally:
            self.starting = False
            pending, self.pending = self.pending, []
        for signum in pending:
            self._handler(signum, None)
        try:
            out, _ = self.proc.communicate()  # retried after each handler (PEP 475): waits for the child's end
            rc = self.proc.returncode
        finally:
            self.proc = None
        return (128 - rc if rc < 0 else rc), out or ""  # a child ended by signal N: 128 + N, as in the shell

    def run(self, cmd: list[str], stdout: int | None = None) -> int:
        """The child's exit status; a signal received meanwhile was forwarded to it."""
        return self._run(cmd, stdout)[0]

    def step(self, cmd: list[str], stdout: int | None = None, stderr: int | None = None) -> int:
        """The child's exit status; a signal received meanwhile ends this program once the child has ended."""
        return self._foreground(cmd, stdout, stderr)[0]

    def output(self, cmd: list[str]) -> tuple[int, str]:
        """`step` with the child's standard output captured: (exit status, output)."""
        return self._foreground(cmd, subprocess.PIPE)

    def _foreground(self, cmd: list[str], stdout: int | None = None, stderr: int | None = None) -> tuple[int, str]:
        rc, out = self._run(cmd, stdout, stderr)
        if self.received is not None:
            raise SystemExit(128 + self.received)
        return rc, out

    def which(self, name: str) -> str | None:
        return shutil.which(name, path=self.env.get("PATH", os.defpath))

    def close(self) -> None:
        """Bring a mini cluster brought up here down (the shell job's EXIT trap), quietly."""
        self.closing = True
        if self.cluster_dir is not None:
            self._run(
                py("prunex.minicluster", "down", "--dir", str(self.cluster_dir)), subprocess.DEVNULL, subprocess.DEVNULL
            )
            self.cluster_dir = None


def child_env() -> dict[str, str]:
    """This environment with the checkout's root on PYTHONPATH (./run_all.sh exports it; a direct call may not)."""
    env = dict(os.environ)
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if not any(os.path.realpath(p) == str(ROOT) for p in paths):
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *paths])
    return env


def root_on_linux() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0 and platform.system() == "Linux"


def real_dir(path: str | Path) -> str | None:
    """The physical path of a directory (`cd DIR && pwd -P`), None where it is none."""
    return os.path.realpath(path) if os.path.isdir(path) else None


def non_empty(path: Path) -> bool:  # the shell's `[ -s FILE ]`
    try:
        return path.stat().st_size > 0
    except OSError:
        return False


def exports(text: str) -> dict[str, str]:
    """The `export K=V` lines of `python -m prunex.minicluster env` (values shell-quoted) as a dict."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        words = shlex.split(line, comments=True)
        if len(words) == 2 and words[0] == "export" and "=" in words[1]:
            key, value = words[1].split("=", 1)
            out[key] = value
    return out


def probe_command(results: str, env: dict[str, str]) -> list[str]:
    """The regime probe of the runs the regime profile times: its model, topology and dataset are the probe's
    defaults (tests/test_regime.py holds them equal), except a dataset PRUNEX_LOCAL_DATASET names
    (experiments/common.py `profile`), whose images, not digits', the timed runs then train on."""
    cmd = py("prunex.cluster.regime", "probe", "--out", f"{results}/regime.json")
    return cmd + (["--dataset", env["PRUNEX_LOCAL_DATASET"]] if env.get("PRUNEX_LOCAL_DATASET") else [])


def preflight_command(profile: str, cluster_args: list[str], only: str) -> list[str]:
    """The doctor's check before anything goes to Slurm: the profile's runs on the Slurm executor, with the
    cluster options, and only the experiments `--only` selects (the GPU-hours it prints are theirs)."""
    args = ["--profile", profile, "--executor", "slurm", *cluster_args] + (["--only", only] if only else [])
    return py("experiments.doctor", *args)


def regime_value(results: str, key: str) -> Any:
    """A value of RESULTS/regime.json, written by `python -m prunex.cluster.regime probe`."""
    with open(f"{results}/regime.json") as f:
        return json.load(f)[key]


# -- the test job ---------------------------------------------------------------------------------------------
def run_tests(pytest_args: list[str], kids: Children) -> int:
    # The mini Slurm cluster tests need Slurm and munge (Debian packages) and root; elsewhere they skip
    # with the install command.
    if root_on_linux() and kids.which("apt-get"):
        if kids.step(["bash", ".ci/install-minicluster.sh"]) != 0:
            say("could not install the mini cluster's packages; its tests will skip")
    say("ruff")
    for cmd in (py("ruff", "check", "."), py("ruff", "format", "--check", ".")):
        rc = kids.step(cmd)
        if rc:
            return rc
    # Three pytest-xdist workers (PRUNEX_TEST_WORKERS; 0 runs in this process) on the 2-core CI machine: the
    # multi-process tests wait (process start-up, Slurm's scheduling, shaped links, polling) as well as compute,
    # so with two workers a quarter of the CPU time idled; the suite took 10 min 25 s and 10 min 19 s on two
    # workers, 9 min 13 s and 9 min 6 s on three (2026-11-26, AMD EPYC, docs/testing.md). The mini cluster's
    # tests stay together on one worker (tests/conftest.py).
    workers = os.environ.get("PRUNEX_TEST_WORKERS") or "3"
    # Hundreds of the tests' processes import prunex; where PYTHONDONTWRITEBYTECODE is set (CI), each compiled
    # its sources again, ~1.5 s of CPU per interpreter on the 2-core VM. Compiled once here (ignored files;
    # Python reads them whatever that variable says, and recompiles a source that changed).
    rc = kids.step(
        py("compileall", "-q", "-j", "0", "prunex", "experiments", "analysis", "benchmarks", "tests"),
        stdout=subprocess.DEVNULL,
    )
    if rc:
        return rc
    say(f"pytest ({workers} workers)")
    rc = kids.step(py("pytest", "-q", "-n", workers, "--dist", "loadscope", *pytest_args))
    if rc == 5:
        say("pytest collected no tests: failing")
        return 1
    return rc


# -- the main job -------------------------------------------------------------------------------------------
def figures_only(results: str, out: str, kids: Children) -> int:
    # with no --results and no --out: the committed reference figures, figures/ from saved-logs/local
    # and, once the regime profile's logs are committed, figures/regime/ from saved-logs/regime
    regime_logs = ROOT / "saved-logs" / "regime"
    also_regime = not results and not out and regime_logs.is_dir()
    results = results or "saved-logs/local"
    if not out:
        # the committed reference figures are drawn from the committed logs only; a user's own
        # results get their figures beside them
        here = real_dir(results)
        if here is not None and here == real_dir(ROOT / "saved-logs" / "local"):
            out = "figures"
        elif here is not None and regime_logs.is_dir() and here == real_dir(regime_logs):
            out = "figures/regime"
        else:
            out = f"{results}/figures"
    say(f"figures only: from {results} into {out} (no training)")
    rc = kids.step(py("analysis.all", "--results", results, "--out", out))
    if also_regime:
        say("figures only: from saved-logs/regime into figures/regime (no training)")
        regime_rc = kids.step(py("analysis.all", "--results", "saved-logs/regime", "--out", "figures/regime"))
        rc = rc or regime_rc
    return rc


def submit_driver(
    profile: str, executor: str, results: str, only: str, cluster_args: list[str], slurm_answers: bool, kids: Children
) -> int:
    if not slurm_answers or not kids.which("sbatch"):
        err("--submit-driver needs a Slurm cluster that answers (sinfo, sbatch); run ./run_all.sh here instead")
        return 2
    if executor and executor != "slurm":
        err(f"--submit-driver runs the driver on Slurm; its runs use --executor slurm, not {executor}")
        return 2
    if not kids.env.get("PRUNEX_MINICLUSTER_DIR"):  # what the driver would check first, checked before it is queued
        say("preflight check before submitting the driver (python -m experiments.doctor)")
        if kids.step(preflight_command(profile, cluster_args, only)) != 0:
            say("the preflight check failed (see 'first to fix' above); nothing was submitted")
            return 1
    os.makedirs(results, exist_ok=True)
    results = os.path.realpath(results)
    wrap = ["./run_all.sh", "--profile", profile, "--executor", "slurm", "--results", results, "--detach"]
    wrap += cluster_args + (["--only", only] if only else [])
    env = kids.env
    time_min = env.get("PRUNEX_SLURM_DRIVER_TIME_MIN") or env.get("PRUNEX_SLURM_TIME_MIN") or "4320"
    sb = ["sbatch", "--parsable", "--job-name=prunex-driver", "--nodes=1", "--ntasks=1", "--cpus-per-task=1"]
    sb += [f"--time={time_min}", f"--output={results}/driver-%j.out", "--export=ALL,PRUNEX_DRIVER_JOB=1"]
    part = env.get("PRUNEX_SLURM_DRIVER_PARTITION") or env.get("PRUNEX_SLURM_PARTITION") or ""
    if part:
        sb.append(f"--partition={part}")
    account = env.get("PRUNEX_SLURM_ACCOUNT", "")  # --account on this command line wins, as for the runs
    for key, value in zip(cluster_args[::2], cluster_args[1::2], strict=True):
        if key == "--account":
            account = value
    if account:
        sb.append(f"--account={account}")
    script = f"cd {shlex.quote(str(ROOT))} && exec " + "".join(shlex.quote(w) + " " for w in wrap)
    rc, job = kids.output([*sb, "--wrap", script])
    if rc:
        err("sbatch refused the driver job (see its message above)")
        return 1
    job = job.rstrip("\n").split(";")[0]  # --parsable: JOBID[;CLUSTER]
    say(f"driver submitted as Slurm job {job} (one core); log: {results}/driver-{job}.out")
    say(f"it submits or reattaches every run, waits for them, then draws {results}/figures; if it ends early")
    say(f"(time limit, scancel {job}), its runs go on: ./run_all.sh --submit-driver again reattaches to them")
    return 0


def model_regime(results: str, kids: Children) -> bool:
    """The regime profile's performance model (docs/experiments.md, "The paper's regime on one machine"): links
    from the sweep of this cluster session, compute per sample from the 1-process runs (one core each); Fig. 9's
    model curves beyond 2 nodes, and each method's predicted iteration time against the 2 x 1 runs."""
    computes: list[str] = []
    for m in ("ddp", "hsadmm", "topk"):
        run = f"{results}/strong_scaling/{m}-resnet20-1x1"
        if os.path.isfile(f"{run}/DONE"):
            computes += ["--compute-from-run", run]
    if not computes:
        say("no 1x1 strong-scaling run to take compute from: no model")
        return False
    collectives = f"{results}/perfmodel/collectives.parquet"
    cluster = f"{results}/perfmodel/minicluster-regime.json"
    sweep = ["cluster-from-sweep", "--collectives", collectives, *computes, "--name", "minicluster-regime"]
    project = ["project", "--cluster", cluster, "--model", "resnet20", "--dataset", "digits", "--gpus", "1,2"]
    project += ["--extend-to", "8", "--batch-size", "32", "--local-epochs", "1", "--dynamic-fraction", "0.5"]
    validate = ["validate-iterations", "--results", results, "--collectives", collectives]
    steps = [[*sweep, "--out", cluster], [*project, "--out", f"{results}/perfmodel"]]
    steps.append([*validate, "--out", f"{results}/perfmodel"])
    return all(kids.step(py("prunex.perfmodel", *step)) == 0 for step in steps)


def main_job(argv: list[str], kids: Children) -> int:
    values = dict.fromkeys(OWN_OPTIONS, "")
    flags = dict.fromkeys(FLAGS, False)
    cluster_args: list[str] = []
    i = 0
    while i < len(argv):
        opt = argv[i]
        if opt in CLUSTER_OPTIONS or opt in OWN_OPTIONS:
            if i + 1 >= len(argv) or not argv[i + 1]:
                err(f"{opt} needs a value (see ./run_all.sh --help)")
                return 2
            if opt in CLUSTER_OPTIONS:
                cluster_args += [opt, argv[i + 1]]
            else:
                values[opt] = argv[i + 1]
            i += 2
        elif opt in FLAGS:
            flags[opt] = True
            i += 1
        elif opt in ("-h", "--help"):
            print(USAGE, end="", flush=True)
            return 0
        else:
            err(f"unknown option {opt} (see ./run_all.sh --help)")
            return 2
    profile, executor, results, only, out = (values[o] for o in OWN_OPTIONS)
    figures, detach, driver = (flags[f] for f in FLAGS)
    if figures:
        if profile or executor or only or detach or driver or cluster_args:
            err("--figures-only takes only --results and --out (it trains nothing)")
            return 2
        return figures_only(results, out, kids)
    if out:
        err("--out goes with --figures-only; the main job draws into RESULTS/figures")
        return 2

    slurm_answers = (
        bool(kids.which("sinfo")) and kids.step(["sinfo", "-h"], subprocess.DEVNULL, subprocess.DEVNULL) == 0
    )
    if not profile:
        if slurm_answers and not kids.env.get("PRUNEX_MINICLUSTER_DIR"):
            profile, executor = "paper", executor or "slurm"
            say("a Slurm cluster answers (sinfo): profile paper on it")
        else:
            profile = "regime"
    if profile == "paper" and not executor:
        # the paper profile's own executor (experiments/common.py), named here so that the preflight check below
        # runs for `--profile paper` as for the profile chosen because sinfo answers (it was skipped, 2026-12-08)
        executor = "slurm"
    results = results or f"results/{profile}"
    if os.path.exists(results) and not os.path.isdir(results):  # before the probe writes regime.json into it
        err(f"--results {results} is a file, not a directory; name a folder for the runs and figures")
        return 2
    args = ["--profile", profile, "--results", results, *cluster_args] + (["--only", only] if only else [])
    # bad input (profile, executor, --only, Slurm variables): one line, before anything is brought up
    check = args + (["--executor", executor] if executor else [])
    rc = kids.step(py("experiments.all", *check, "--dry-run"), stdout=subprocess.DEVNULL)
    if rc:
        return rc
    if driver:
        return submit_driver(profile, executor, results, only, cluster_args, slurm_answers, kids)

    inter_bw = LOCAL_INTER_BW
    if profile == "regime":
        # the link rate is chosen before any run, from this machine's compute (prunex/cluster/regime.py), and kept
        # for the life of the results directory: a resumed run trains at the rate it started with
        say("regime-matched profile: probing this machine's compute per iteration to choose the inter-node link rate")
        rc = kids.run(probe_command(results, kids.env))
        if rc:
            return rc
        inter_bw = str(regime_value(results, "tc_rate"))
    cluster_up = False
    if profile != "paper" and not executor:
        if root_on_linux() and kids.step(["bash", ".ci/install-minicluster.sh"], stdout=subprocess.DEVNULL) == 0:
            say(
                "no Slurm cluster; root on Linux: bringing a 2-node mini Slurm cluster up"
                f" (links shaped by tc at {inter_bw})"
            )
            kids.cluster_dir = CLUSTER_DIR  # brought down at the end whatever happens (Children.close)
            up = ["up", "--nodes", "2", "--cpus-per-node", "2", "--inter-bw", inter_bw, "--dir", str(CLUSTER_DIR)]
            rc = kids.run(py("prunex.minicluster", *up))
            if rc:
                return rc
            cluster_up = True
            kids.env.update(exports(kids.output(py("prunex.minicluster", "env", "--dir", str(CLUSTER_DIR)))[1]))
            executor = "slurm"
        else:
            say("no Slurm cluster and no root for a mini cluster: local executor with the alpha-beta link model")
            executor = "local"
    if profile == "regime" and not non_empty(Path(results, "perfmodel", "collectives.parquet")):
        # the perf model's links, measured in this cluster session at the validation runs' 1 process per node
        say("sweeping the collectives of this cluster for the performance model (2 x 1 processes, 16 KB-1 MB)")
        sweep = ["--nodes", "2", "--procs-per-node", "1", "--sizes", "16KB..1MB", "--repeats", "3"]
        sweep += ["--small-repeats", "8", "--out", f"{results}/perfmodel/collectives.parquet"]
        if executor == "local":
            gbit = float(regime_value(results, "bandwidth_mbit")) / 1e3
            sweep += ["--executor", "local", "--bandwidth-gbit", str(gbit)]
        # a signal during the sweep ends the job (the shell job went on to train after it)
        if kids.step(py("prunex.bench.collectives", *sweep)) != 0:
            say("the collective sweep failed: no model validation this time")
    say(f"profile {profile}, executor {executor or 'default'}, results in {results}")
    if executor:
        args += ["--executor", executor]
    if executor == "slurm" and not kids.env.get("PRUNEX_MINICLUSTER_DIR"):
        say("preflight check before submitting to Slurm (python -m experiments.doctor)")
        if kids.step(preflight_command(profile, cluster_args, only)) != 0:
            say("the preflight check failed (see 'first to fix' above); nothing was submitted")
            return 1
    if detach:
        args.append("--detach")
    # The regime profile's link-free experiments (the Pareto: accuracy against FLOPs) run last, at the local
    # profile's link: on the mini cluster reshaped in place (each run's meta.json records the rate it had); with
    # the local executor their runs model that rate themselves (experiments/common.py link_free).
    apart = [e for e in LINK_FREE if profile == "regime" and (not only or fnmatch.fnmatchcase(e, only))]
    rc = kids.run(py("experiments.all", *args, *(["--skip", ",".join(apart)] if apart else [])))
    alone = ["--profile", profile, "--results", results, *cluster_args]
    alone += (["--executor", executor] if executor else []) + (["--detach"] if detach else [])
    if rc == 0 and profile in ("local", "regime") and (not only or fnmatch.fnmatchcase("wire_dtype", only)):
        # bf16 on the wire beside fp32 (issue 18): not a paper result, so not in experiments.all
        rc = kids.run(py("experiments.wire_dtype", *alone))
    for experiment in apart if rc in (0, 1) else []:  # as in experiments.all, a failed run does not stop the others
        shaped = 0
        if cluster_up:
            say(f"{experiment}: its results do not depend on the link; node links reshaped to {LOCAL_INTER_BW}")
            shaped = kids.run(
                py("prunex.minicluster", "shape", "--inter-bw", LOCAL_INTER_BW, "--dir", str(CLUSTER_DIR))
            )
        rc = max(rc, shaped or kids.run(py(f"experiments.{experiment}", *alone)))
    if cluster_up:
        kids.run(py("prunex.minicluster", "down", "--dir", str(CLUSTER_DIR)), stdout=subprocess.DEVNULL)
        kids.cluster_dir = None
    if rc:
        # figures only from complete, intended input: nothing is drawn after a failure or an interrupt
        if rc == 2:  # a refusal, one line, before that step launched anything
            say(
                "no figures drawn: the experiments refused their input (the error above); fix it and run the same "
                "command again"
            )
        else:
            say(f"no figures drawn: the experiments ended with exit code {rc} (see above)")
        if any(Path(results).glob("*/*/config.json")):  # runs to resume from and to draw
            say(
                "the same command resumes (finished runs are skipped); to draw what exists: "
                f"./run_all.sh --figures-only --results {results}"
            )
        return rc
    if profile == "regime" and non_empty(Path(results, "perfmodel", "collectives.parquet")):
        if not model_regime(results, kids):
            say("the performance model of this cluster failed (see above); figures go on without it")
    rc = kids.run(py("analysis.all", "--results", results, "--out", f"{results}/figures"))
    say(f"figures: {results}/figures/  report: {results}/figures/REPORT.md")
    if rc:
        say(f"some figures failed (exit code {rc}); see the lines above")
    return rc


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    first = argv[0] if argv else ""
    if first in ("-h", "--help"):
        print(USAGE, end="")
        return 0
    os.chdir(ROOT)  # relative paths are the checkout's, as in ./run_all.sh
    kids = Children(child_env())
    if first == "--check":
        sys.stdout.flush()
        os.execve(sys.executable, py("experiments.doctor", *argv[1:]), kids.env)
    kids.install()
    try:
        if first == "test":
            return run_tests(argv[1:], kids)
        return main_job(argv, kids)
    finally:
        kids.close()


if __name__ == "__main__":
    sys.exit(main())
