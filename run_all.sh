#!/usr/bin/env bash
# PruneX suite: `./run_all.sh` runs every experiment then every figure; `./run_all.sh test` runs
# the test suite. Both set the environment up themselves (idempotently): an already active
# environment that provides the packages (conda, a cluster module, a venv) is used as it is,
# otherwise a .venv is built in the checkout from requirements.txt.
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$(pwd)

say() { printf '[run_all] %s\n' "$*"; }

# -- environment ---------------------------------------------------------------------------------
have_packages() {
  "$1" - <<'PY' 2>/dev/null
import importlib.util, sys
mods = ["torch", "torchvision", "submitit", "pandas", "pyarrow", "matplotlib", "seaborn", "sklearn", "tqdm", "pytest", "ruff"]
sys.exit(0 if all(importlib.util.find_spec(m) for m in mods) else 1)
PY
}

bootstrap() {
  if [ -n "${CONDA_PREFIX:-}${VIRTUAL_ENV:-}" ] && [ "${VIRTUAL_ENV:-}" != "$ROOT/.venv" ] \
     && command -v python >/dev/null && have_packages python; then
    PY=$(command -v python)
    say "using the active environment ($PY)"
    "$PY" -m pip install -q --no-deps -e . >/dev/null 2>&1 || true
    return
  fi
  local stamp=".venv/.prunex-stamp" want
  want=$(cat requirements.txt pyproject.toml | sha256sum | cut -c1-16)
  if [ ! -x .venv/bin/python ]; then
    say "building .venv (first run: a few minutes)"
    "${PYTHON:-python3}" -m venv .venv
  fi
  if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    say "installing pinned packages into .venv"
    .venv/bin/python -m pip install -q --disable-pip-version-check -r requirements.txt
    .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps -e .
    echo "$want" > "$stamp"
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

main_job() {
  # The experiment suite is filled in by later work; for now the main job runs the dense
  # baseline once on the local executor.
  "$PY" -m prunex.run --method ddp --model resnet20 --dataset digits --nodes 2 --procs-per-node 2 \
    --executor local --results "${RESULTS:-results}" "$@"
}

bootstrap
case "${1:-}" in
  test) shift; run_tests "$@" ;;
  *) main_job "$@" ;;
esac
