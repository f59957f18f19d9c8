#!/usr/bin/env bash
# PruneX suite: `./run_all.sh` runs every experiment then every figure; `./run_all.sh test` runs
# the test suite; `./run_all.sh --check` runs the preflight check (python -m experiments.doctor). Each
# sets the environment up itself (idempotently): an environment that meets the supported range
# and has what the job imports is used as it is (PRUNEX_PYTHON=/path/to/python, an active conda or
# venv, a site module's python on PATH); otherwise a .venv is built from requirements.txt.
# Only this bootstrap is shell (no Python with the packages may exist yet); the jobs themselves are
# experiments/run_all.py, which this script `exec`s with its arguments once the Python is chosen.
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
# torch's version from its installed metadata: importing torch only to read it cost every ./run_all.sh ~4 s of CPU
# on a 2-core VM before the job imported it again. A torch without metadata (a source build on the path) is imported.
from importlib.metadata import PackageNotFoundError, version
try:
    torch_version = version("torch")
except PackageNotFoundError:
    import torch
    torch_version = torch.__version__
from prunex.cluster.compat import UnsupportedEnvironment, check_torch_version
try:
    check_torch_version(torch_version)
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
    # pip compiles the ~11,000 modules one after the other (66 s of a 2-core VM, 2026-11-27); compileall on
    # every core, leaving out the packages' own test suites (nothing here imports them), took 22-30 s. A file that
    # does not compile is skipped, as pip skips it. At most 8 processes: a cluster's login node is shared.
    "$target/bin/python" -m pip install -q --no-compile --disable-pip-version-check -r requirements.txt
    local workers
    workers=$(nproc 2>/dev/null || echo 1)
    [ "$workers" -le 8 ] || workers=8
    "$target/bin/python" -m compileall -qq -j "$workers" -x '/tests?/' \
      "$("$target/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" || true
    echo "$want" > "$target/.prunex-stamp"
  fi
  if [ "$target" != "$ROOT/.venv" ]; then
    ln -sfn "$target" .venv
  fi
  PY="$ROOT/.venv/bin/python"
}

case "${1:-}" in
  test) bootstrap test ;;
  --check) bootstrap check ;;
  -h|--help)  # the usage is experiments/run_all.py's, printed by any python3 (>= 3.7): no environment needed
    PY="$ROOT/.venv/bin/python"
    [ -x "$PY" ] || PY=$(command -v python3) || die "no python3 to print the usage with (see experiments/run_all.py)"
    export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" ;;
  *) bootstrap main ;;
esac
exec "$PY" -m experiments.run_all "$@"
