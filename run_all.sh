#!/usr/bin/env bash
# PruneX suite: `./run_all.sh` runs every experiment then every figure; `./run_all.sh test` runs
# the test suite; `./run_all.sh --check` runs the preflight check (python -m prunex.doctor). Each
# sets the environment up itself (idempotently): an environment that meets the supported range
# and has what the job imports is used as it is (PRUNEX_PYTHON=/path/to/python, an active conda or
# venv, a site module's python on PATH); otherwise a .venv is built from requirements.txt.
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$(pwd)

say() { printf '[run_all] %s\n' "$*"; }
die() { printf 'error: %s\n' "$*" >&2; exit 2; }

# -- environment ---------------------------------------------------------------------------------
# What each job imports (the module names); the versions it needs are prunex/compat.py's.
PYTHON_MIN=3.10
MODULES_MAIN="torch torchvision submitit pandas pyarrow numpy matplotlib seaborn sklearn"
MODULES_CHECK="torch torchvision submitit pandas pyarrow numpy sklearn"
MODULES_TEST="$MODULES_MAIN pytest ruff"

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
from prunex.compat import UnsupportedEnvironment, check_torch_version
try:
    check_torch_version(torch.__version__)
except UnsupportedEnvironment as e:
    print(str(e).split(":")[0])
PY
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
    mkdir -p "$cache"
  fi
  if [ "$(cat "$target/.prunex-stamp" 2>/dev/null)" != "$want" ]; then
    local base="${PYTHON:-python3}" version
    command -v "$base" >/dev/null || die "no $base to build the environment with: load a Python >= $PYTHON_MIN or set PRUNEX_PYTHON"
    version=$(python_version "$base") || die "$base does not run"
    "$base" -c "import sys; sys.exit(0 if sys.version_info >= tuple(map(int, '$PYTHON_MIN'.split('.'))) else 1)" \
      || die "$(command -v "$base") is Python $version; prunex needs >= $PYTHON_MIN: load a newer one (a site module, conda) or set PRUNEX_PYTHON=/path/to/python"
    say "building the environment in $target (first run: a few minutes)"
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
  say "pytest"
  set +e
  "$PY" -m pytest -q "$@"
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
usage: ./run_all.sh [test [PYTEST ARGS]] [--profile smoke|local|paper] [--executor debug|local|slurm]
                    [--results DIR] [--only EXPERIMENT] [--figures-only]
                    [--site NAME] [--account PROJECT] [--device auto|cuda|cpu] [--partition P]
                    [--time-min N] [--gres G] [--cpus-per-task N] [--mem M] [--sbatch KEY=VALUE]
       ./run_all.sh --check [the options of python -m prunex.doctor]
With no option: every experiment, then every figure and the claims report. The profile is `paper`
on a real Slurm cluster and `local` elsewhere (on a mini Slurm cluster where root allows). On a
real Slurm cluster the preflight check (python -m prunex.doctor) runs first and nothing is
submitted unless it passes; --check runs only that check.
--figures-only regenerates figures/ from saved logs (default: saved-logs/local) without training.
Environment: PRUNEX_PYTHON=/path/to/python names the Python to use; PRUNEX_SITE, PRUNEX_SLURM_*.
TXT
}

main_job() {
  local profile="" executor="" results="" only="" figures_only=0 cluster_args=()
  while [ $# -gt 0 ]; do
    case "$1" in
      --site|--account|--device|--partition|--time-min|--gres|--gpus-per-node|--cpus-per-task|--mem|--sbatch)
        [ $# -ge 2 ] || { say "$1 needs a value"; return 2; }
        cluster_args+=("$1" "$2"); shift 2 ;;
      --profile) profile=$2; shift 2 ;;
      --executor) executor=$2; shift 2 ;;
      --results) results=$2; shift 2 ;;
      --only) only=$2; shift 2 ;;
      --figures-only) figures_only=1; shift ;;
      -h|--help) usage; return 0 ;;
      *) say "unknown option $1"; usage; return 2 ;;
    esac
  done
  local cluster_dir="$ROOT/.prunex-cluster" cluster_up=0 rc=0
  if [ $figures_only = 1 ]; then
    results=${results:-saved-logs/local}
    say "figures only: from $results (no training)"
  else
    if [ -z "$profile" ]; then
      if command -v sinfo >/dev/null && [ -z "${PRUNEX_MINICLUSTER_DIR:-}" ] && sinfo -h >/dev/null 2>&1; then
        profile=paper; executor=${executor:-slurm}
        say "a Slurm cluster answers (sinfo): profile paper on it"
      else
        profile=local
      fi
    fi
    if [ "$profile" != paper ] && [ -z "$executor" ]; then
      if [ "$(id -u)" = 0 ] && [ "$(uname -s)" = Linux ] && bash .ci/install-minicluster.sh >/dev/null; then
        say "no Slurm cluster; root on Linux: bringing a 2-node mini Slurm cluster up (links shaped by tc at 1 Gbit/s)"
        "$PY" -m prunex.minicluster up --nodes 2 --cpus-per-node 2 --inter-bw 1gbit --dir "$cluster_dir"
        cluster_up=1
        trap '"$PY" -m prunex.minicluster down --dir "'"$cluster_dir"'" >/dev/null 2>&1 || true' EXIT INT TERM
        eval "$("$PY" -m prunex.minicluster env --dir "$cluster_dir")"
        executor=slurm
      else
        say "no Slurm cluster and no root for a mini cluster: local executor with the alpha-beta link model"
        executor=local
      fi
    fi
    results=${results:-results/$profile}
    say "profile $profile, executor ${executor:-default}, results in $results"
    local args=(--profile "$profile" --results "$results" ${cluster_args[@]+"${cluster_args[@]}"})
    [ -n "$executor" ] && args+=(--executor "$executor")
    if [ "${executor:-}" = slurm ] && [ -z "${PRUNEX_MINICLUSTER_DIR:-}" ]; then
      say "preflight check before submitting to Slurm (python -m prunex.doctor)"
      "$PY" -m prunex.doctor --profile "$profile" --executor slurm ${cluster_args[@]+"${cluster_args[@]}"} \
        || { say "the preflight check failed (see 'first to fix' above); nothing was submitted"; return 1; }
    fi
    [ -n "$only" ] && args+=(--only "$only")
    "$PY" -m experiments.all "${args[@]}" || rc=$?
    if [ $cluster_up = 1 ]; then
      "$PY" -m prunex.minicluster down --dir "$cluster_dir" || true
      trap - EXIT INT TERM
    fi
  fi
  "$PY" -m analysis.all --results "$results" --out figures || rc=$?
  say "figures: $ROOT/figures/  report: $ROOT/figures/REPORT.md"
  [ $rc = 0 ] || say "some runs or figures failed (exit code $rc); see the lines above"
  return $rc
}

case "${1:-}" in
  test) shift; bootstrap test; run_tests "$@" ;;
  --check) shift; bootstrap check; "$PY" -m prunex.doctor "$@" ;;
  -h|--help) usage ;;
  *) bootstrap main; main_job "$@" ;;
esac
