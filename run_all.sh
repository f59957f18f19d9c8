#!/usr/bin/env bash
# PruneX suite: `./run_all.sh` runs every experiment then every figure; `./run_all.sh test` runs
# the test suite; `./run_all.sh --check` runs the preflight check (python -m experiments.doctor). Each
# sets the environment up itself (idempotently): an environment that meets the supported range
# and has what the job imports is used as it is (PRUNEX_PYTHON=/path/to/python, an active conda or
# venv, a site module's python on PATH); otherwise a .venv is built from requirements.txt.
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$(pwd)

say() { printf '[run_all] %s\n' "$*"; }
die() { printf 'error: %s\n' "$*" >&2; exit 2; }

# -- environment ---------------------------------------------------------------------------------
# What each job imports (the module names); the versions it needs are prunex/cluster/compat.py's.
PYTHON_MIN=3.10
MODULES_MAIN="torch torchvision submitit pandas pyarrow numpy matplotlib seaborn sklearn"
MODULES_CHECK="torch torchvision submitit pandas pyarrow numpy sklearn"
MODULES_TEST="$MODULES_MAIN pytest pytest_timeout xdist ruff"

python_version() {  # X.Y.Z of a python, any version (also 2.7 and 3.6)
  "$1" -c 'import sys; print("%d.%d.%d" % tuple(sys.version_info[:3]))' 2>/dev/null
}

env_problem() {  # empty if python $1 runs this job (modules $2), else what is wrong, in a few words
  local py=$1 version
  version=$(python_version "$py") || { echo "does not run"; return; }
  if ! "$py" -c "import sys; sys.exit(0 if sys.version_info >= tuple(map(int, '$PYTHON_MIN'.split('.'))) else 1)"; then
    echo "is Python $version; prunex needs >= $PYTHON_MIN"
    return
  fi
  PYTHONPATH="$ROOT" "$py" - "$2" <<'PY' 2>/dev/null || echo "cannot check its packages"
import importlib.util, sys
missing = [m for m in sys.argv[1].split() if importlib.util.find_spec(m) is None]
if missing:
    print("lacks " + " ".join(missing))
    sys.exit(0)
import torch
from prunex.cluster.compat import UnsupportedEnvironment, check_torch_version
try:
    check_torch_version(torch.__version__)
except UnsupportedEnvironment as e:
    print(str(e).split(":")[0])
PY
}

on_cluster() {  # a real Slurm cluster answers here (the mini cluster of this machine is not one)
  [ -z "${PRUNEX_MINICLUSTER_DIR:-}" ] && command -v sinfo >/dev/null && timeout 20 sinfo -h >/dev/null 2>&1
}

pip_pins() {  # pip requirements (requirements.txt's pins) of the module names $1
  local module name pin out=""
  for module in $1; do
    case "$module" in
      sklearn) name=scikit-learn ;; pytest_timeout) name=pytest-timeout ;; xdist) name=pytest-xdist ;;
      *) name=$module ;;
    esac
    pin=$(grep -i "^$name==" requirements.txt || echo "$name")
    out+="$pin "
  done
  echo "${out% }"
}

bootstrap() {
  # $1: the job (main, check or test), which decides the modules an existing environment must have.
  # The checkout is put on PYTHONPATH (also for the processes submitit starts), not installed: one
  # environment can then serve several checkouts without pointing at the wrong one.
  export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
  local modules=$MODULES_MAIN problem candidate
  case "$1" in
    test) modules=$MODULES_TEST ;;
    check) modules=$MODULES_CHECK ;;
  esac
  if [ -n "${PRUNEX_PYTHON:-}" ]; then  # named explicitly: used or refused, never replaced
    [ -x "$PRUNEX_PYTHON" ] || die "PRUNEX_PYTHON=$PRUNEX_PYTHON is not an executable python"
    problem=$(env_problem "$PRUNEX_PYTHON" "$modules")
    case "$problem" in
      "") ;;
      lacks*) die "PRUNEX_PYTHON=$PRUNEX_PYTHON $problem: install them into it ($PRUNEX_PYTHON -m pip install ...) or unset PRUNEX_PYTHON" ;;
      *) die "PRUNEX_PYTHON=$PRUNEX_PYTHON $problem: name another one or unset PRUNEX_PYTHON" ;;
    esac
    PY=$PRUNEX_PYTHON
    say "using PRUNEX_PYTHON ($PY)"
    return
  fi
  # An active conda or venv, then a python on PATH (e.g. `module load pytorch`), if it meets the range.
  local first_py="" first_problem=""  # the first candidate that runs, and what it lacks
  for candidate in python python3; do
    if [ "${VIRTUAL_ENV:-}" = "$ROOT/.venv" ]; then break; fi
    command -v "$candidate" >/dev/null || continue
    candidate=$(command -v "$candidate")
    problem=$(env_problem "$candidate" "$modules")
    if [ -z "$problem" ]; then
      PY=$candidate
      say "using the active environment ($PY)"
      return
    fi
    if [ -z "$first_py" ] && [ "$problem" != "does not run" ]; then
      first_py=$candidate first_problem=$problem
    fi
    if [ -n "${CONDA_PREFIX:-}${VIRTUAL_ENV:-}" ] && [ "$candidate" = "$(command -v python)" ]; then
      say "the active environment's $candidate $problem: not used"
    fi
  done
  local want
  want=$(cat requirements.txt | sha256sum | cut -c1-16)
  # .venv is a link to a shared environment keyed by requirements.txt (torch's CUDA build is ~5 GB;
  # every checkout of the same pins shares it). PRUNEX_VENV_CACHE=none builds a private .venv.
  local cache="${PRUNEX_VENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/prunex}"
  local target="$ROOT/.venv"
  if [ "$cache" != none ] && { [ -L .venv ] || [ ! -e .venv ]; }; then
    target="$cache/venv-$want"
  fi
  if [ "$(cat "$target/.prunex-stamp" 2>/dev/null)" != "$want" ] && [ -z "${PRUNEX_VENV_CACHE:-}" ] && on_cluster; then
    # On a cluster nothing of ~5 GB is built in $HOME (small quotas) unless asked: name what is missing
    # and the one command that adds it to the environment at hand.
    case "$first_problem" in
      lacks*)
        die "$first_py $first_problem: add them with: $first_py -m pip install --user $(pip_pins "${first_problem#lacks }") (or set PRUNEX_VENV_CACHE=DIR to build the pinned environment, ~5 GB, in DIR)"
        ;;
      *)
        die "no Python here has prunex's packages${first_py:+ ($first_py ${first_problem})}: load the site's PyTorch module (e.g. module load pytorch), set PRUNEX_PYTHON=/path/to/python, or set PRUNEX_VENV_CACHE=DIR to build the pinned environment (~5 GB) in DIR"
        ;;
    esac
  fi
  if [ "$(cat "$target/.prunex-stamp" 2>/dev/null)" != "$want" ]; then
    local base="${PYTHON:-python3}" version
    command -v "$base" >/dev/null || die "no $base to build the environment with: load a Python >= $PYTHON_MIN or set PRUNEX_PYTHON"
    version=$(python_version "$base") || die "$base does not run"
    "$base" -c "import sys; sys.exit(0 if sys.version_info >= tuple(map(int, '$PYTHON_MIN'.split('.'))) else 1)" \
      || die "$(command -v "$base") is Python $version; prunex needs >= $PYTHON_MIN: load a newer one (a site module, conda) or set PRUNEX_PYTHON=/path/to/python"
    say "building the environment in $target (first run: a few minutes)"
    mkdir -p "$(dirname "$target")"
    rm -rf "$target"
    "$base" -m venv "$target"
    "$target/bin/python" -m pip install -q --disable-pip-version-check -r requirements.txt
    echo "$want" > "$target/.prunex-stamp"
  fi
  if [ "$target" != "$ROOT/.venv" ]; then
    ln -sfn "$target" .venv
  fi
  PY="$ROOT/.venv/bin/python"
}

run_tests() {
  # The mini Slurm cluster tests need Slurm and munge (Debian packages) and root; elsewhere they skip
  # with the install command.
  if [ "$(id -u)" = 0 ] && [ "$(uname -s)" = Linux ] && command -v apt-get >/dev/null; then
    bash .ci/install-minicluster.sh || say "could not install the mini cluster's packages; its tests will skip"
  fi
  say "ruff"
  "$PY" -m ruff check .
  "$PY" -m ruff format --check .
  # Two pytest-xdist workers (PRUNEX_TEST_WORKERS; 0 runs in this process): most multi-process tests
  # wait (process start-up, Slurm's scheduling, shaped links) as much as they compute, so two
  # overlap on 2 cores; the mini cluster's tests stay together on one worker (tests/conftest.py).
  local workers=${PRUNEX_TEST_WORKERS:-2}
  # Hundreds of the tests' processes import prunex; where PYTHONDONTWRITEBYTECODE is set (CI), each compiled
  # its sources again, ~1.5 s of CPU per interpreter on the 2-core VM. Compiled once here (ignored files;
  # Python reads them whatever that variable says, and recompiles a source that changed).
  "$PY" -m compileall -q -j 0 prunex experiments analysis benchmarks tests >/dev/null
  say "pytest ($workers workers)"
  set +e
  "$PY" -m pytest -q -n "$workers" --dist loadscope "$@"
  local rc=$?
  set -e
  if [ $rc -eq 5 ]; then
    say "pytest collected no tests: failing"
    return 1
  fi
  return $rc
}

usage() {
  cat <<'TXT'
usage: ./run_all.sh [test [PYTEST ARGS]] [--profile smoke|local|regime|paper] [--executor debug|local|slurm]
                    [--results DIR] [--only EXPERIMENT] [--detach] [--submit-driver]
                    [--site NAME] [--account PROJECT] [--device auto|cuda|cpu] [--partition P]
                    [--time-min N] [--gres G] [--cpus-per-task N] [--mem M] [--sbatch KEY=VALUE]
       ./run_all.sh --figures-only [--results DIR] [--out DIR]
       ./run_all.sh --check [the options of python -m experiments.doctor]
With no option: every experiment, then every figure and the claims report, drawn into RESULTS/figures
(RESULTS: results/PROFILE) once every run has finished; a failed or interrupted main job draws nothing.
The local and regime profiles also run experiments.wire_dtype (bf16 on the wire beside fp32, issue 18).
The profile is `paper` on a real Slurm cluster and `regime` elsewhere (on a mini Slurm cluster where
root allows): the local runs with the inter-node link rate at which DDP communicates for the share of
an iteration it does in the paper (probed first, kept in RESULTS/regime.json; prunex/cluster/regime.py);
`--profile local` is the compute-bound 1 Gbit/s profile. On a real Slurm cluster the preflight check (python -m experiments.doctor) runs first and
nothing is submitted unless it passes; --check runs only that check. Running the same command again
resumes: finished runs are skipped, queued or running Slurm jobs reattached. Ctrl-C cancels the
jobs (--detach: leaves Slurm jobs running).
--submit-driver sends this driver itself to Slurm as a one-core job (for login nodes that end long
processes); its log is RESULTS/driver-JOBID.out.
--figures-only draws the figures from saved logs without training: by default the committed
figures/ from saved-logs/local and figures/regime/ from saved-logs/regime; with --results DIR into
DIR/figures (or --out DIR).
Environment: PRUNEX_PYTHON=/path/to/python names the Python to use; PRUNEX_SITE, PRUNEX_SLURM_*.
TXT
}

err() { printf '[run_all] error: %s\n' "$*" >&2; }

# A child that INT/TERM of this script reach (bash runs a trap only once its foreground command has
# ended, so the child runs in the background and is waited for); a repeated signal is forwarded too.
CHILD=""
forward() {
  if [ -n "$CHILD" ] && kill -0 "$CHILD" 2>/dev/null; then
    kill -"$1" "$CHILD" 2>/dev/null || true
  else
    exit $((128 + $(kill -l "$1")))
  fi
}
run_child() {
  local status=0 final=0
  "$@" &
  CHILD=$!
  wait "$CHILD" || status=$?
  while kill -0 "$CHILD" 2>/dev/null; do  # a trap interrupted the wait: the child is still ending
    status=0
    wait "$CHILD" || status=$?
  done
  wait "$CHILD" 2>/dev/null || final=$?  # bash keeps the child's status: its own, not the interrupted wait's
  [ "$final" = 127 ] || status=$final
  CHILD=""
  return "$status"
}

model_regime() {
  # The regime profile's performance model (docs/experiments.md, "The paper's regime on one machine"): links from the
  # sweep of this cluster session, compute per sample from the 1-process runs (one core each); Fig. 9's
  # model curves beyond 2 nodes, and each method's predicted iteration time against the 2 x 1 runs.
  local results=$1 computes=() m
  for m in ddp hsadmm topk; do
    [ -f "$results/strong_scaling/$m-resnet20-1x1/DONE" ] && computes+=(--compute-from-run "$results/strong_scaling/$m-resnet20-1x1")
  done
  [ ${#computes[@]} -gt 0 ] || { say "no 1x1 strong-scaling run to take compute from: no model"; return 1; }
  "$PY" -m prunex.perfmodel cluster-from-sweep --collectives "$results/perfmodel/collectives.parquet" \
    "${computes[@]}" --name minicluster-regime --out "$results/perfmodel/minicluster-regime.json" || return 1
  "$PY" -m prunex.perfmodel project --cluster "$results/perfmodel/minicluster-regime.json" --model resnet20 \
    --dataset digits --gpus 1,2 --extend-to 8 --batch-size 32 --local-epochs 1 --dynamic-fraction 0.5 \
    --out "$results/perfmodel" || return 1
  "$PY" -m prunex.perfmodel validate-iterations --results "$results" \
    --collectives "$results/perfmodel/collectives.parquet" --out "$results/perfmodel"
}

main_job() {
  local profile="" executor="" results="" only="" out="" figures_only=0 detach=0 submit_driver=0 cluster_args=()
  while [ $# -gt 0 ]; do
    case "$1" in
      --site|--account|--device|--partition|--time-min|--gres|--gpus-per-node|--cpus-per-task|--mem|--sbatch)
        if [ $# -lt 2 ] || [ -z "$2" ]; then err "$1 needs a value (see ./run_all.sh --help)"; return 2; fi
        cluster_args+=("$1" "$2"); shift 2 ;;
      --profile|--executor|--results|--only|--out)
        if [ $# -lt 2 ] || [ -z "$2" ]; then err "$1 needs a value (see ./run_all.sh --help)"; return 2; fi
        case "$1" in
          --profile) profile=$2 ;; --executor) executor=$2 ;; --results) results=$2 ;;
          --only) only=$2 ;; --out) out=$2 ;;
        esac
        shift 2 ;;
      --figures-only) figures_only=1; shift ;;
      --detach) detach=1; shift ;;
      --submit-driver) submit_driver=1; shift ;;
      -h|--help) usage; return 0 ;;
      *) err "unknown option $1 (see ./run_all.sh --help)"; return 2 ;;
    esac
  done
  if [ $figures_only = 1 ]; then
    if [ -n "$profile$executor$only" ] || [ $detach = 1 ] || [ $submit_driver = 1 ] || [ ${#cluster_args[@]} -gt 0 ]; then
      err "--figures-only takes only --results and --out (it trains nothing)"
      return 2
    fi
    # with no --results and no --out: the committed reference figures, figures/ from saved-logs/local
    # and, once the regime profile's logs are committed, figures/regime/ from saved-logs/regime
    local also_regime=0 fig_rc=0
    [ -z "$results$out" ] && [ -d "$ROOT/saved-logs/regime" ] && also_regime=1
    results=${results:-saved-logs/local}
    if [ -z "$out" ]; then
      # the committed reference figures are drawn from the committed logs only; a user's own
      # results get their figures beside them
      if [ "$(cd "$results" 2>/dev/null && pwd -P)" = "$(cd "$ROOT/saved-logs/local" && pwd -P)" ]; then
        out=figures
      elif [ -d "$ROOT/saved-logs/regime" ] &&
        [ "$(cd "$results" 2>/dev/null && pwd -P)" = "$(cd "$ROOT/saved-logs/regime" && pwd -P)" ]; then
        out=figures/regime
      else
        out="$results/figures"
      fi
    fi
    say "figures only: from $results into $out (no training)"
    "$PY" -m analysis.all --results "$results" --out "$out" || fig_rc=$?
    if [ $also_regime = 1 ]; then
      say "figures only: from saved-logs/regime into figures/regime (no training)"
      local regime_rc=0
      "$PY" -m analysis.all --results saved-logs/regime --out figures/regime || regime_rc=$?
      [ $fig_rc != 0 ] || fig_rc=$regime_rc
    fi
    return $fig_rc
  fi
  [ -n "$out" ] && { err "--out goes with --figures-only; the main job draws into RESULTS/figures"; return 2; }

  local slurm_answers=0 cluster_dir="$ROOT/.prunex-cluster" rc=0
  command -v sinfo >/dev/null && sinfo -h >/dev/null 2>&1 && slurm_answers=1
  if [ -z "$profile" ]; then
    if [ $slurm_answers = 1 ] && [ -z "${PRUNEX_MINICLUSTER_DIR:-}" ]; then
      profile=paper; executor=${executor:-slurm}
      say "a Slurm cluster answers (sinfo): profile paper on it"
    else
      profile=regime
    fi
  fi
  results=${results:-results/$profile}
  local args=(--profile "$profile" --results "$results" ${cluster_args[@]+"${cluster_args[@]}"})
  [ -n "$only" ] && args+=(--only "$only")
  # bad input (profile, executor, --only, Slurm variables): one line, before anything is brought up
  local check=("${args[@]}")
  [ -n "$executor" ] && check+=(--executor "$executor")
  "$PY" -m experiments.all "${check[@]}" --dry-run >/dev/null || return $?

  if [ $submit_driver = 1 ]; then
    if [ $slurm_answers = 0 ] || ! command -v sbatch >/dev/null; then
      err "--submit-driver needs a Slurm cluster that answers (sinfo, sbatch); run ./run_all.sh here instead"
      return 2
    fi
    if [ -n "$executor" ] && [ "$executor" != slurm ]; then
      err "--submit-driver runs the driver on Slurm; its runs use --executor slurm, not $executor"
      return 2
    fi
    mkdir -p "$results"
    results=$(cd "$results" && pwd -P)
    local wrap=(./run_all.sh --profile "$profile" --executor slurm --results "$results" --detach
      ${cluster_args[@]+"${cluster_args[@]}"})
    [ -n "$only" ] && wrap+=(--only "$only")
    local sb=(sbatch --parsable --job-name=prunex-driver --nodes=1 --ntasks=1 --cpus-per-task=1
      "--time=${PRUNEX_SLURM_DRIVER_TIME_MIN:-${PRUNEX_SLURM_TIME_MIN:-4320}}"
      "--output=$results/driver-%j.out" --export=ALL,PRUNEX_DRIVER_JOB=1)
    local part=${PRUNEX_SLURM_DRIVER_PARTITION:-${PRUNEX_SLURM_PARTITION:-}}
    [ -n "$part" ] && sb+=("--partition=$part")
    local account=${PRUNEX_SLURM_ACCOUNT:-} i  # --account on this command line wins, as for the runs
    for ((i = 0; i < ${#cluster_args[@]}; i += 2)); do
      [ "${cluster_args[i]}" = --account ] && account=${cluster_args[i + 1]}
    done
    [ -n "$account" ] && sb+=("--account=$account")
    local job
    job=$("${sb[@]}" --wrap "cd $(printf %q "$ROOT") && exec $(printf '%q ' "${wrap[@]}")") || {
      err "sbatch refused the driver job (see its message above)"; return 1; }
    job=${job%%;*}
    say "driver submitted as Slurm job $job (one core); log: $results/driver-$job.out"
    say "it submits or reattaches every run, waits for them, then draws $results/figures; if it ends early"
    say "(time limit, scancel $job), its runs go on: ./run_all.sh --submit-driver again reattaches to them"
    return 0
  fi

  local cluster_up=0 inter_bw=1gbit
  if [ "$profile" = regime ]; then
    # the link rate is chosen before any run, from this machine's compute (prunex/cluster/regime.py), and kept
    # for the life of the results directory: a resumed run trains at the rate it started with
    say "regime-matched profile: probing this machine's compute per iteration to choose the inter-node link rate"
    run_child "$PY" -m prunex.cluster.regime probe --out "$results/regime.json" || return $?
    inter_bw=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["tc_rate"])' "$results/regime.json")
  fi
  if [ "$profile" != paper ] && [ -z "$executor" ]; then
    if [ "$(id -u)" = 0 ] && [ "$(uname -s)" = Linux ] && bash .ci/install-minicluster.sh >/dev/null; then
      say "no Slurm cluster; root on Linux: bringing a 2-node mini Slurm cluster up (links shaped by tc at $inter_bw)"
      trap '"$PY" -m prunex.minicluster down --dir "'"$cluster_dir"'" >/dev/null 2>&1 || true' EXIT
      run_child "$PY" -m prunex.minicluster up --nodes 2 --cpus-per-node 2 --inter-bw "$inter_bw" --dir "$cluster_dir" \
        || return $?
      cluster_up=1
      eval "$("$PY" -m prunex.minicluster env --dir "$cluster_dir")"
      executor=slurm
    else
      say "no Slurm cluster and no root for a mini cluster: local executor with the alpha-beta link model"
      executor=local
    fi
  fi
  if [ "$profile" = regime ] && [ ! -s "$results/perfmodel/collectives.parquet" ]; then
    # the perf model's links, measured in this cluster session at the validation runs' 1 process per node
    say "sweeping the collectives of this cluster for the performance model (2 x 1 processes, 16 KB-1 MB)"
    local sweep=(--nodes 2 --procs-per-node 1 --sizes 16KB..1MB --repeats 3 --small-repeats 8
      --out "$results/perfmodel/collectives.parquet")
    if [ "$executor" = local ]; then
      sweep+=(--executor local --bandwidth-gbit "$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["bandwidth_mbit"] / 1e3)' "$results/regime.json")")
    fi
    run_child "$PY" -m prunex.bench.collectives "${sweep[@]}" || say "the collective sweep failed: no model validation this time"
  fi
  say "profile $profile, executor ${executor:-default}, results in $results"
  [ -n "$executor" ] && args+=(--executor "$executor")
  if [ "${executor:-}" = slurm ] && [ -z "${PRUNEX_MINICLUSTER_DIR:-}" ]; then
    say "preflight check before submitting to Slurm (python -m experiments.doctor)"
    "$PY" -m experiments.doctor --profile "$profile" --executor slurm ${cluster_args[@]+"${cluster_args[@]}"} \
      || { say "the preflight check failed (see 'first to fix' above); nothing was submitted"; return 1; }
  fi
  [ $detach = 1 ] && args+=(--detach)
  run_child "$PY" -m experiments.all "${args[@]}" || rc=$?
  if [ $rc = 0 ] && { [ "$profile" = local ] || [ "$profile" = regime ]; } && { [ -z "$only" ] || [[ wire_dtype == $only ]]; }; then
    # bf16 on the wire beside fp32 (issue 18): not a paper result, so not in experiments.all
    local wire_args=(--profile "$profile" --results "$results" ${cluster_args[@]+"${cluster_args[@]}"})
    [ -n "$executor" ] && wire_args+=(--executor "$executor")
    [ $detach = 1 ] && wire_args+=(--detach)
    run_child "$PY" -m experiments.wire_dtype "${wire_args[@]}" || rc=$?
  fi
  if [ $cluster_up = 1 ]; then
    "$PY" -m prunex.minicluster down --dir "$cluster_dir" >/dev/null || true
    trap - EXIT
  fi
  if [ $rc != 0 ]; then
    # figures only from complete, intended input: nothing is drawn after a failure or an interrupt
    say "no figures drawn: the experiments ended with exit code $rc (see above). The same command resumes"
    say "(finished runs are skipped); to draw what exists: ./run_all.sh --figures-only --results $results"
    return $rc
  fi
  if [ "$profile" = regime ] && [ -s "$results/perfmodel/collectives.parquet" ]; then
    model_regime "$results" || say "the performance model of this cluster failed (see above); figures go on without it"
  fi
  run_child "$PY" -m analysis.all --results "$results" --out "$results/figures" || rc=$?
  say "figures: $results/figures/  report: $results/figures/REPORT.md"
  [ $rc = 0 ] || say "some figures failed (exit code $rc); see the lines above"
  return $rc
}

trap 'forward INT' INT
trap 'forward TERM' TERM
case "${1:-}" in
  test) shift; bootstrap test; run_tests "$@" ;;
  --check) shift; bootstrap check; "$PY" -m experiments.doctor "$@" ;;
  -h|--help) usage ;;
  *) bootstrap main; main_job "$@" ;;
esac
